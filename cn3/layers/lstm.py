"""``LSTM``: ``torch.nn.LSTM`` that also runs under CPU bf16 autocast on CPUs without AVX-512.

WHY: torch's CPU autocast runs ``lstm`` in bfloat16 through oneDNN, whose bf16 LSTM needs AVX-512;
elsewhere the call fails ("could not create a primitive descriptor for the LSTM forward propagation
primitive"). Where a one-time probe (:func:`cpu_bf16_lstm_supported`) finds that, this LSTM runs in
float32 with autocast off around it (input cast up, output float32); everywhere else it is
``nn.LSTM`` unchanged. Same parameters and state-dict keys as ``nn.LSTM``.
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence


@functools.cache
def cpu_bf16_lstm_supported() -> bool:
    """Whether oneDNN runs a bfloat16 LSTM on this CPU (a tiny forward under autocast, once per process).

    The probe's LSTM is initialised inside ``fork_rng``: drawing from the global generator at a model's
    first bf16 forward would shift every later dropout mask, so a run and its resume would differ.
    """
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

    @torch.compiler.disable  # eager inside a compiled step (run_direction says why)
    def forward(self, input, hx=None):  # noqa: A002 - nn.LSTM's own argument name
        data = input.data if isinstance(input, PackedSequence) else input
        if (data.device.type == "cpu" and torch.is_autocast_enabled("cpu")
                and torch.get_autocast_dtype("cpu") == torch.bfloat16 and not cpu_bf16_lstm_supported()):
            with torch.autocast("cpu", enabled=False):
                return super().forward(_float(input), None if hx is None else _float(hx))
        return super().forward(input, hx)


_DIRECTION_CALLS = {"LSTM": torch._VF.lstm, "GRU": torch._VF.gru, "RNN_TANH": torch._VF.rnn_tanh,
                    "RNN_RELU": torch._VF.rnn_relu}


@torch.compiler.disable
def run_direction(rnn: nn.RNNBase, x: torch.Tensor, layer: int, reverse: bool) -> torch.Tensor:
    """One layer and direction of a ``batch_first`` ``rnn`` as a unidirectional call from zero states
    on that direction's own weights (``weight_ih_l{layer}[_reverse]``, ...): the same operator
    ``nn.LSTM`` calls (cuDNN on CUDA), over ``x`` read left to right.

    Shapes: ``x (B, N, d_in)`` -> ``(B, N, hidden)`` (``proj_size`` where an LSTM has one). Under CPU
    bf16 autocast without a oneDNN bf16 LSTM it runs in float32, as :class:`LSTM` does.

    WHY torch's ``_VF`` call rather than a module: the direction's weights stay those of ``rnn``, so
    the parameters, their initialisation and the state-dict keys do not change.

    WHY ``torch.compiler.disable``: inside a compiled step this call runs eagerly (cuDNN on CUDA)
    between the compiled pieces. Traced, AOTAutograd decomposes ``aten.lstm`` in training into one
    cell per time step, so the graphs grow with the length (thousands of nodes at 128) and inductor
    spends minutes on each (bucket, batch size); run eagerly, the pieces around it are a few nodes at
    every length (``tests/train/test_compiled_rnn.py``; ``docs/gpu.md``, "The compiled step").
    """
    suffix = f"_l{layer}" + ("_reverse" if reverse else "")
    weights = [getattr(rnn, name) for name in rnn._flat_weights_names if name.endswith(suffix)]
    batch = x.shape[0]
    real_hidden = rnn.proj_size if getattr(rnn, "proj_size", 0) > 0 else rnn.hidden_size
    if (rnn.mode == "LSTM" and x.device.type == "cpu" and torch.is_autocast_enabled("cpu")
            and torch.get_autocast_dtype("cpu") == torch.bfloat16 and not cpu_bf16_lstm_supported()):
        with torch.autocast("cpu", enabled=False):
            return run_direction(rnn, x.float(), layer, reverse)
    h0 = x.new_zeros(1, batch, real_hidden)
    call = _DIRECTION_CALLS[rnn.mode]
    if rnn.mode == "LSTM":
        hx = (h0, x.new_zeros(1, batch, rnn.hidden_size))
        return call(x, hx, weights, rnn.bias, 1, 0.0, rnn.training, False, True)[0]
    return call(x, h0, weights, rnn.bias, 1, 0.0, rnn.training, False, True)[0]
