"""The optimizers a config can name."""

from __future__ import annotations

import torch

from cn3.config import ConfigError


def make_optimizer(model: torch.nn.Module, name: str, lr: float, weight_decay: float = 0.0,
                   betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                   fused: bool = False) -> torch.optim.Optimizer:
    """``adadelta`` (the CN3 paper: rho 0.95, eps 1e-6), ``adam`` or ``sgd`` over the trainable parameters.

    ``fused`` (CUDA): Adam's and SGD's fused update, one kernel for every parameter (Adadelta, which
    torch does not fuse, takes its foreach update); otherwise torch's default implementation.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    if name == "adadelta":
        return torch.optim.Adadelta(params, lr=lr, rho=0.95, eps=1e-6, weight_decay=weight_decay,
                                    foreach=True if fused else None)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, fused=fused or None)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=weight_decay, fused=fused or None)
    raise ConfigError(f"unknown optimizer {name!r} (adadelta, adam, sgd)")
