"""Device choice, seeding and RNG snapshots shared by the CN3 and NMT trainers.

Exact resume needs every random stream restored: torch (CPU and CUDA), Python and NumPy.
"""

from __future__ import annotations

import random
import signal
import threading
from pathlib import Path

import numpy as np
import torch
import yaml

from cn3.averaging import load_ema_state
from cn3.compat import check_resumable
from cn3.config import ConfigError, from_dict, to_dict
from cn3.run_dir import RunDir


def resolve_device(name: str) -> torch.device:
    """``auto`` = CUDA when available, else CPU; ``cuda`` without a device is a ConfigError."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda: no CUDA device is available (use --device auto or cpu)")
    return torch.device(name)


def autocast(device: torch.device, precision: str):
    """The training forward pass's context for ``train.precision``: ``torch.autocast`` in bfloat16
    on ``device``'s type for ``bf16``, a no-op for ``fp32``. Only the forward pass goes inside: the
    backward pass follows the dtypes autocast chose."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state() -> dict:
    return {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def restore_checkpoint(path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                       device: torch.device, ema: torch.nn.Module | None = None) -> dict:
    """Load a ``latest.pt`` for ``--resume``: weights, optimiser, weight average and every RNG stream.

    Returns the checkpoint's training ``state`` (epoch, batch in epoch, step, best score, ...).
    """
    ckpt = torch.load(path, map_location=device, weights_only=False)
    check_resumable(ckpt.get("cn3_version"), path)
    load_ema_state(ckpt, ema, model)
    optimizer.load_state_dict(ckpt["optimizer"])
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


def open_run(cfg, run_path: str | Path, resume: bool, device_name: str,
             resumable: set[tuple[str, str]]) -> tuple[torch.device, RunDir, dict]:
    """What both trainers do first: the device, torch's thread count, the run directory and the
    config as a dict, checked against the run's own config when resuming."""
    device = resolve_device(device_name)
    if cfg.train.num_threads:
        torch.set_num_threads(cfg.train.num_threads)
    run = RunDir(run_path)
    config_dict = to_dict(cfg)
    if resume and run.config.exists():
        # read back through the dataclasses: a key added to the config since the run started takes its
        # default (which keeps the old behaviour), instead of counting as a change
        try:
            saved = to_dict(from_dict(type(cfg), yaml.safe_load(run.config.read_text())))
        except ConfigError as err:  # e.g. a key a later release removed: the run is another release's
            raise ConfigError(f"cannot resume {run.path}: its config.yaml does not fit this cn3 ({err}); it was "
                              "probably written by another release; evaluate it as it is, or start a new run") from None
        check_resume_config(saved, config_dict, resumable)
    return device, run, config_dict


def sigterm_as_interrupt():
    """Make SIGTERM (``kill``, job schedulers) stop training like Ctrl-C, so the trainer saves
    ``latest.pt`` before exiting. Returns the previous handler to restore, or ``None`` off the
    main thread (where signal handlers cannot be installed)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)
