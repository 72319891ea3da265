"""The compiled training forward (``train.compile``): static shapes by length buckets, one ``torch.compile``.

What is compiled: a task's forward and loss, whose backward AOTAutograd compiles with it, so the
forward, the loss and the backward are each one compiled graph (``mode="reduce-overhead"`` on CUDA:
replayed as CUDA graphs); gradient clipping and the optimizer update run on torch's foreach (or,
on CUDA, fused) kernels beside it. The eager step stays the reference: compiled and eager give the
same losses and gradients to rounding (``tests/train/test_compiled.py``).

Static shapes: every position length is rounded up to a bucket boundary
(:data:`LENGTH_BUCKETS`; past the last one, to a multiple of :data:`LENGTH_STRIDE`), both sides of
a pair to the same one. The extra positions are padding, which the encoders mask, so no score
changes. The number of rows is not padded: the sentence loss is a mean over a batch's rows and an
encoder's auxiliary penalty a mean too, so a padded row would have to be masked inside every head;
a bucketed epoch has at most two batch sizes (``batch_size`` and the last pool's remainder), so
compilations are bounded by twice the number of buckets used (:func:`recompile_limit`).

Host syncs: none in the compiled forward (the recurrent encoders take the padded path of
:func:`cn3.layers.packed.run_packed` while compiling). The Tree-LSTM, which walks a tree's levels on
the host by design, is the exception: it compiles in pieces around those reads.

Recurrent layers: not compiled. Each LSTM/GRU direction is ``torch.compiler.disable``d
(:func:`cn3.layers.lstm.run_direction`) and runs eagerly (cuDNN on CUDA) between compiled pieces, whose
size then does not grow with the length (``docs/gpu.md``, "train.compile").
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

import torch

from cn3.config import ConfigError

#: the position lengths a compiled step's batches are padded up to
LENGTH_BUCKETS = (8, 16, 24, 32, 48, 64, 96, 128)
#: past the last bucket, lengths round up to a multiple of this
LENGTH_STRIDE = 64


def bucket_length(n: int) -> int:
    """The smallest bucket boundary ``>= n`` (:data:`LENGTH_BUCKETS`), or ``n`` rounded up to a multiple of
    :data:`LENGTH_STRIDE` past the last one. ``bucket_length(0) == 8``."""
    i = bisect.bisect_left(LENGTH_BUCKETS, n)
    if i < len(LENGTH_BUCKETS):
        return LENGTH_BUCKETS[i]
    return -(-n // LENGTH_STRIDE) * LENGTH_STRIDE


def recompile_limit(max_length: int) -> int:
    """How many graphs a compiled forward may need for items up to ``max_length`` long: two batch sizes
    for each bucket up to ``bucket_length(max_length)``."""
    buckets = sorted({bucket_length(n) for n in range(1, max(max_length, 1) + 1)})
    return 2 * len(buckets)


def use_compile(setting: bool | str, device: torch.device, reason_off: str | None = None) -> bool:
    """Whether a run compiles its step: ``train.compile`` is ``True`` (on), ``False`` (off) or ``"auto"``:
    on CUDA, off on the CPU, where compiling took longer than it saved (``docs/benchmarks.md``,
    "The compiled step").

    Args:
        reason_off: why this run cannot compile (e.g. the adversarial loss's hooks), or ``None``.

    Raises:
        ConfigError: compile is asked for (``True``) where ``reason_off`` rules it out.
    """
    if setting is True:
        if reason_off:
            raise ConfigError(f"train.compile=on: {reason_off}; use train.compile=auto or off")
        return True
    if setting is False or reason_off:
        return False
    return device.type == "cuda"


class CompiledForward:
    """``fn`` compiled with static shapes (``torch.compile(dynamic=False)``; ``mode="reduce-overhead"``
    on CUDA, the default mode on the CPU), called under dynamo settings that let it trace the
    recurrent encoders (``allow_rnn``) and keep up to ``limit`` graphs (:func:`recompile_limit`)
    before falling back to eager. ``backend`` is inductor for training; the tests also use
    ``"aot_eager"`` (dynamo's graphs and AOTAutograd's backward without code generation) to check
    every encoder's capture in seconds rather than minutes.

    Building one drops every graph dynamo holds in the process (``torch._dynamo.reset``).
    On CUDA each call starts a new CUDA-graph step (``torch.compiler.cudagraph_mark_step_begin``), so
    a training loop may call it once per update; the returned tensors are overwritten by the next
    call and must be consumed (summed, backpropagated) before it.
    """

    def __init__(self, fn: Callable, device: torch.device, limit: int, backend: str = "inductor"):
        # one compiled training forward per process: dynamo keeps its graphs per code object, so a second
        # task's (runs in one process, tests) would count against the first's limit and fall back to eager
        torch._dynamo.reset()
        self.cuda = device.type == "cuda"
        self.limit = max(limit, torch._dynamo.config.recompile_limit)
        mode = "reduce-overhead" if self.cuda and backend == "inductor" else None
        self.fn = torch.compile(fn, backend=backend, mode=mode, dynamic=False)

    def __call__(self, *args, **kwargs):
        if self.cuda:
            torch.compiler.cudagraph_mark_step_begin()
        with torch._dynamo.config.patch(allow_rnn=True, recompile_limit=self.limit):
            return self.fn(*args, **kwargs)
