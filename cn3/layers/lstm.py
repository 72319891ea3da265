"""``LSTM``: ``torch.nn.LSTM`` that also runs under CPU bf16 autocast on CPUs without AVX-512.

torch's CPU autocast runs ``lstm`` in bfloat16 through oneDNN, and oneDNN's bf16 LSTM needs AVX-512:
on an AVX2-only CPU (an AMD EPYC here, torch capability ``AVX2``) the call fails with "could not
create a primitive descriptor for the LSTM forward propagation primitive", so every model with an
LSTM (CN3's context, the char BiLSTM, the zoo's lstm, pdgraph, selfatt1, lstm_san) crashed under
``train.precision=bf16``. Where a one-time probe finds that, this LSTM runs in float32 with autocast
off around it (its input cast up, its output float32, which the layers after it take as they take
any float32 tensor under autocast); everywhere else it is ``nn.LSTM`` unchanged. Same parameters and
state-dict keys as ``nn.LSTM``, so checkpoints load either way.
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence


@functools.cache
def cpu_bf16_lstm_supported() -> bool:
    """Whether oneDNN runs a bfloat16 LSTM on this CPU (a tiny forward under autocast, once per process).

    The probe's LSTM is initialised inside ``fork_rng``: the probe runs at a model's first bf16
    forward, and drawing its weights from the global generator there would shift every dropout mask
    after it, so that a run and its resume (which probes again, in a new process) would differ."""
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            nn.LSTM(2, 2)(torch.zeros(1, 1, 2))
    except RuntimeError:
        return False
    return True


def _float(x):
    return x.float() if isinstance(x, (torch.Tensor, PackedSequence)) else tuple(_float(t) for t in x)


class LSTM(nn.LSTM):
    """``nn.LSTM`` (same arguments); under CPU bf16 autocast without a oneDNN bf16 LSTM, float32."""

    def forward(self, input, hx=None):  # noqa: A002 - nn.LSTM's own argument name
        data = input.data if isinstance(input, PackedSequence) else input
        if (data.device.type == "cpu" and torch.is_autocast_enabled("cpu")
                and torch.get_autocast_dtype("cpu") == torch.bfloat16 and not cpu_bf16_lstm_supported()):
            with torch.autocast("cpu", enabled=False):
                return super().forward(_float(input), None if hx is None else _float(hx))
        return super().forward(input, hx)
