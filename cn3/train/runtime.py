"""Where and how a run computes: the device, the precision (autocast, loss scaling), seeding and
every RNG stream's state, deterministic algorithms and signals."""

from __future__ import annotations

import os
import random
import signal
import threading
from contextlib import contextmanager

import numpy as np
import torch

from cn3.config import ConfigError


def resolve_device(name: str) -> torch.device:
    """``auto`` = CUDA when available, else CPU; ``cuda`` without a device is a ConfigError."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda: no CUDA device is available (use --device auto or cpu)")
    return torch.device(name)


#: ``train.precision`` -> the dtype of the autocast forward pass
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(device: torch.device, precision: str):
    """The training forward pass's context for ``train.precision``: ``torch.autocast`` on
    ``device``'s type in bfloat16 (``bf16``) or float16 (``fp16``), a no-op for ``fp32``. Only the
    forward pass goes inside: the backward pass follows the dtypes autocast chose."""
    dtype = AUTOCAST_DTYPES.get(precision)
    return torch.autocast(device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None)


#: Where ``train.precision=fp16`` is offered. torch autocasts to float16 on CPU too, but oneDNN has
#: no float16 LSTM (CN3's context layer fails), and bf16 is the faster CPU choice anyway. (Tests add
#: "cpu" to run the loss-scaling path on LSTM-free models.)
FP16_DEVICE_TYPES = {"cuda"}


def slow_precision_note(precision: str, device: torch.device) -> str | None:
    """A warning for ``train.precision=bf16`` on an x86 CPU without native bf16, else ``None``.

    There bf16 training is many times slower than fp32 for nothing (docs/benchmarks.md, "bf16 on an
    AVX2-only CPU"); the run still goes on as asked."""
    capability = torch.backends.cpu.get_cpu_capability()
    if precision != "bf16" or device.type != "cpu" or capability not in ("AVX2", "DEFAULT"):
        return None
    return (f"train.precision=bf16 on this CPU (torch capability {capability}, no native bf16 arithmetic) "
            "runs many times slower than fp32 (a Linear layer 15x on one thread: docs/benchmarks.md); LSTMs run "
            "in fp32 here. fp32 (the default) is the faster choice on it; bf16 pays on GPUs and AVX-512/AMX CPUs")


def make_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler | None:
    """The loss scaler of an ``fp16`` run (float16's 5-bit exponent underflows small gradients
    unless the loss is scaled up first; steps with inf/NaN gradients are skipped and the scale
    backs off); ``None`` otherwise. Its state goes into ``latest.pt``, so resume stays exact."""
    return torch.amp.GradScaler(device.type) if precision == "fp16" else None


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state() -> dict:
    """Every random stream, in the plain forms a checkpoint keeps (:func:`plain_rng_state`)."""
    return plain_rng_state({"torch": torch.get_rng_state(), "python": random.getstate(),
                            "numpy": np.random.get_state(),
                            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None})


def plain_rng_state(state: dict) -> dict:
    """``state`` with Python's and NumPy's streams as tensors, numbers and strings, which
    ``torch.load(weights_only=True)`` reads (NumPy's key array would need NumPy's unpickler).

    Python: ``[version, int64 tensor of the 625 words, gauss]``; NumPy: ``{"bit_generator", "key"
    (int64 tensor of the 624 uint32 words), "pos", "has_gauss", "gauss"}``. States already in these
    forms pass unchanged, so it also converts the checkpoints of cn3 0.3.0 and earlier
    (:func:`upgrade_checkpoint`)."""
    version, words, gauss = state["python"]
    numpy = state["numpy"]
    if isinstance(numpy, tuple):  # np.random.get_state(): (name, keys, pos, has_gauss, cached_gaussian)
        name, keys, pos, has_gauss, cached = numpy
        numpy = {"bit_generator": str(name), "key": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
                 "pos": int(pos), "has_gauss": int(has_gauss), "gauss": float(cached)}
    if not isinstance(words, torch.Tensor):
        words = torch.tensor(words, dtype=torch.int64)
    return {**state, "python": [version, words, gauss], "numpy": numpy}


def _host_bytes(state: torch.Tensor) -> torch.Tensor:
    """An RNG state as ``torch.set_rng_state`` takes it: a CPU byte tensor."""
    return state.detach().to("cpu", torch.uint8)


def set_rng_state(state: dict) -> None:
    """Restore the streams of :func:`rng_state`. The CUDA states are restored where CUDA is
    available, for the devices this machine has (a run saved on a CPU machine has none)."""
    torch.set_rng_state(_host_bytes(state["torch"]))
    version, words, gauss = state["python"]
    random.setstate((version, tuple(words.tolist()), gauss))
    n = state["numpy"]
    np.random.set_state((n["bit_generator"], n["key"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                         n["gauss"]))
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([_host_bytes(s) for s in state["cuda"][:torch.cuda.device_count()]])


@contextmanager
def deterministic_algorithms(enabled: bool):
    """torch's deterministic algorithms inside the block when ``enabled`` (``train.deterministic``),
    restored to their previous setting after it (a trainer called from Python leaves the process as
    it found it)."""
    if not enabled:
        yield
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS reads it when its first handle is made
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous)


def sigterm_as_interrupt():
    """Make SIGTERM (``kill``, job schedulers) stop the experiment runner like Ctrl-C, so it stops
    its cells, each saving ``latest.pt``. Returns the previous handler to restore, or ``None`` off the
    main thread (where signal handlers cannot be installed). The training loop holds signals back
    while an update runs instead (:class:`cn3.train.interrupts.Interrupts`)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)
