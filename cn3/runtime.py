"""Device choice, seeding and RNG snapshots shared by the CN3 and NMT trainers.

Exact resume needs every random stream restored: torch (CPU and CUDA), Python and NumPy.
"""

from __future__ import annotations

import random

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
                       device: torch.device) -> dict:
    """Load a ``latest.pt`` for ``--resume``: weights, optimiser and every RNG stream.

    Returns the checkpoint's training ``state`` (epoch, batch in epoch, step, best score, ...).
    """
    ckpt = torch.load(path, map_location=device, weights_only=False)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    set_rng_state(ckpt["rng"])
    return ckpt["state"]
