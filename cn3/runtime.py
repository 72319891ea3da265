"""Device choice, seeding, RNG snapshots and checkpoint reading shared by the CN3 and NMT trainers.

Exact resume needs every random stream restored: torch (CPU and CUDA), Python and NumPy. A
checkpoint holds tensors, numbers, strings and plain containers only and is read with
``torch.load(weights_only=True)`` (:func:`load_checkpoint`), so a shared run directory cannot run
code when it is opened; :func:`upgrade_checkpoint` converts those of cn3 0.3.0 and earlier.
"""

from __future__ import annotations

import io
import os
import pickle
import random
import signal
import threading
from contextlib import contextmanager
from pathlib import Path, PurePath

import numpy as np
import torch
import yaml

from cn3.averaging import load_ema_state
from cn3.compat import check_resumable
from cn3.config import ConfigError, from_dict, to_dict
from cn3.util.errors import RunError
from cn3.distributed import World, init_world
from cn3.run_dir import RunDir
from cn3.util.atomic import atomic_write
from cn3.util.console import console


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

    Measured on an AVX2-only CPU (docs/benchmarks.md): a bf16 ``Linear`` forward and backward runs
    15x slower than in fp32 on one thread, so a bf16 training takes many times as long for nothing;
    the run still goes on as asked (the numbers are the same kind of bf16 a GPU gives)."""
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


#: What checkpoints of cn3 0.3.0 and earlier pickled besides tensors and plain data: NumPy's RNG
#: key array (under NumPy 2's and NumPy 1's module names). Reading those few globals runs no code
#: of the file's choosing, so :func:`upgrade_checkpoint` converts such checkpoints without trust.
LEGACY_GLOBALS = {"numpy._core.multiarray._reconstruct": np._core.multiarray._reconstruct,
                  "numpy.core.multiarray._reconstruct": np._core.multiarray._reconstruct,
                  "numpy.ndarray": np.ndarray, "numpy.dtype": np.dtype,
                  "numpy.dtypes.UInt32DType": np.dtypes.UInt32DType}


def upgrade_command(path: Path) -> str:
    """The command that converts the run holding checkpoint ``path``."""
    return f"cn3 checkpoint upgrade {Path(path).parent}"


def load_checkpoint(path: str | Path) -> dict:
    """A checkpoint (``best.pt``, ``latest.pt``) read with ``torch.load(weights_only=True)``, on the host.

    Only tensors, numbers, strings and plain containers are read, so opening a run someone shared
    runs no code from it. Everything comes back on the CPU: the RNG states must (``set_rng_state``
    takes CPU byte tensors only), and weights and optimizer states go to the model's device when
    loaded into it.

    Raises:
        RunError: on a file that is not a checkpoint; on one written by cn3 0.3.0 or earlier,
            naming the command that converts it; on one that carries pickled objects, refused.
    """
    path = Path(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        unsafe = unsafe_globals(path)
    except (RuntimeError, ValueError, EOFError, OSError) as err:
        raise unreadable(path, err) from None
    if unsafe <= LEGACY_GLOBALS.keys():
        raise RunError(f"{path} was written by an earlier cn3, whose checkpoints pickled NumPy's random "
                          f"state; convert the run once with `{upgrade_command(path)}`")
    raise RunError(refusal(path, unsafe))


def unreadable(path: Path, err: Exception) -> RunError:
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return RunError(f"{path} is not a readable checkpoint ({first})")


def unsafe_globals(path: Path) -> set[str]:
    """The globals (classes, functions) that the checkpoint ``path`` pickles beyond what
    ``weights_only=True`` reads, found without unpickling it."""
    try:
        return set(torch.serialization.get_unsafe_globals_in_checkpoint(path))
    except (RuntimeError, ValueError, EOFError, OSError) as err:  # not torch.save's zip format
        raise unreadable(path, err) from None


def refusal(path: Path, unsafe: set[str]) -> str:
    """Why a checkpoint carrying pickled objects (``unsafe``: their globals) is not opened."""
    return (f"refusing to open {path}: it carries pickled Python objects ({', '.join(sorted(unsafe))}), and "
            "loading them could run any code; cn3 checkpoints hold only tensors, numbers and strings. Retrain the "
            f"run, or, only if you trust where it came from, convert it with `{upgrade_command(path)} --trust`")


def upgrade_checkpoint(path: str | Path, trust: bool = False) -> bool:
    """Rewrite the checkpoint ``path`` in the plain forms :func:`load_checkpoint` reads, atomically;
    ``False`` when it is plain already.

    A checkpoint of cn3 0.3.0 or earlier (NumPy's RNG state) is read without running code from it.
    One carrying other pickled objects is read with ``weights_only=False``, which runs whatever the
    file's pickle calls, only with ``trust``; without it, a RunError.

    Raises:
        RunError: untrusted pickled objects, or an entry with no plain form.
    """
    path = Path(path)
    unsafe = unsafe_globals(path)
    if not unsafe:
        return False
    if unsafe <= LEGACY_GLOBALS.keys():
        allowed = [(obj, name) for name, obj in LEGACY_GLOBALS.items()]
        with torch.serialization.safe_globals(allowed):
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    elif trust:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
    else:
        raise RunError(refusal(path, unsafe))
    if isinstance(ckpt, dict) and isinstance(ckpt.get("rng"), dict):
        ckpt["rng"] = plain_rng_state(ckpt["rng"])
    data = io.BytesIO()
    torch.save(plain_checkpoint(ckpt, str(path)), data)
    atomic_write(path, lambda handle: handle.write(data.getvalue()))
    return True


def plain_checkpoint(value, where: str):
    """``value`` with NumPy arrays as tensors, NumPy scalars as numbers and paths as strings, so that
    ``torch.load(weights_only=True)`` reads it back: every checkpoint passes here before it is
    written, and ``cn3 checkpoint upgrade`` converts old ones with it. A RunError naming ``where``
    (the entry) for anything else that is not plain. Dicts and lists are converted in place, so a
    state dict keeps its type and ``_metadata``."""
    if isinstance(value, dict):
        for k, v in value.items():
            value[k] = plain_checkpoint(v, f"{where}[{k!r}]")
        return value
    if isinstance(value, list):
        value[:] = [plain_checkpoint(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return value
    if isinstance(value, tuple):
        return tuple(plain_checkpoint(v, f"{where}[{i}]") for i, v in enumerate(value))
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, PurePath):
        return str(value)
    if value is None or isinstance(value, (torch.Tensor, bool, int, float, str, bytes)):
        return value
    raise RunError(f"{where} is a {type(value).__module__}.{type(value).__qualname__}, which a checkpoint "
                      "cannot hold (tensors, numbers, strings and containers of them only)")


def restore_checkpoint(path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                       ema: torch.nn.Module | None = None, scaler: torch.amp.GradScaler | None = None) -> dict:
    """Load a ``latest.pt`` for ``--resume``: weights, optimiser, weight average, loss scaler and
    every RNG stream. Read on the host (:func:`load_checkpoint`); the model and optimizer take
    their states to their own device.

    Returns the checkpoint's training ``state`` (epoch, batch in epoch, step, best score, ...).
    """
    ckpt = load_checkpoint(path)
    check_resumable(ckpt.get("cn3_version"), path)
    load_ema_state(ckpt, ema, model)
    optimizer.load_state_dict(ckpt["optimizer"])
    if scaler is not None:
        scaler.load_state_dict(ckpt["scaler"])
    set_rng_state(ckpt["rng"])
    return ckpt["state"]


def check_resume_config(saved: dict, new: dict, resumable: set[tuple[str, str]]) -> None:
    """A resumed run must have the config it was started with, except the ``(section, key)``
    pairs in ``resumable`` (how long to go on, threads, ...); else a ConfigError naming the key."""

    def flat(d: dict, prefix=()) -> dict:
        out = {}
        for k, v in d.items():
            if isinstance(v, dict):
                out.update(flat(v, prefix + (k,)))
            else:
                out[prefix + (k,)] = v
        return out

    old_flat, new_flat = flat(saved), flat(new)
    for key in sorted(set(old_flat) | set(new_flat)):
        if old_flat.get(key) != new_flat.get(key) and key[:2] not in resumable:
            allowed = ", ".join(sorted(".".join(k) for k in resumable))
            raise ConfigError(f"cannot resume: {'.'.join(key)} is {new_flat.get(key)!r} but the run was started "
                              f"with {old_flat.get(key)!r} (only {allowed} may change)")


def read_saved_config(config_class, path: Path) -> dict:
    """A run's ``config.yaml`` read back through the dataclasses, as a dict: a key added to the config
    since the run started takes its default (which keeps the old behaviour) instead of counting as a
    change when the run is resumed or its grid cell checked.

    Raises:
        ConfigError: naming the file, when it does not fit this cn3 (a key a later release removed).
    """
    try:
        return to_dict(from_dict(config_class, yaml.safe_load(Path(path).read_text(encoding="utf-8"))))
    except ConfigError as err:  # the run is another release's
        raise ConfigError(f"{path} does not fit this cn3 ({err}); it was probably written by another release; "
                          "evaluate the run as it is, or start a new one") from None


def open_run(cfg, run_path: str | Path, resume: bool, device_name: str,
             resumable: set[tuple[str, str]]) -> tuple[torch.device, RunDir, dict, World]:
    """What both trainers do first: the device, torch's thread count, the run directory, the
    config as a dict (checked against the run's own config when resuming) and, under torchrun,
    the process group (:mod:`cn3.distributed`; rank 0's run directory alone writes)."""
    device = resolve_device(device_name)
    if cfg.train.num_threads:
        torch.set_num_threads(cfg.train.num_threads)
    if cfg.train.precision == "fp16" and device.type not in FP16_DEVICE_TYPES:
        raise ConfigError(f"train.precision=fp16 needs a CUDA device (this run is on {device.type}); "
                          "use train.precision=bf16 on CPU")
    world, device = init_world(device)
    if world.main and (note := slow_precision_note(cfg.train.precision, device)):
        console.print(f"[yellow]warning[/]: {note}")
    run = RunDir(run_path, writes=world.main)
    config_dict = to_dict(cfg)
    if resume and run.config.exists():
        check_resume_config(read_saved_config(type(cfg), run.config), config_dict, resumable)
    return device, run, config_dict, world


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
