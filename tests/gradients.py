"""Gradients checked against the definition: central finite differences in float64."""

from __future__ import annotations

from collections.abc import Callable

import torch


def assert_gradients_match_finite_differences(module: torch.nn.Module, loss: Callable[[], torch.Tensor],
                                              entries: int = 3, eps: float = 1e-6, seed: int = 0) -> None:
    """Autograd's gradient of every parameter of ``module`` (float64, deterministic: no dropout) equals
    ``(loss(p + eps) - loss(p - eps)) / 2 eps`` at ``entries`` random entries of each parameter, the
    entry with the largest gradient among them; and every parameter gets a gradient somewhere."""
    params = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
    assert all(p.dtype == torch.float64 for _, p in params), "finite differences need float64"
    grads = torch.autograd.grad(loss(), [p for _, p in params])
    generator = torch.Generator().manual_seed(seed)
    for (name, p), g in zip(params, grads):
        flat, gflat = p.data.view(-1), g.reshape(-1)
        assert gflat.abs().sum() > 0, f"{name} gets no gradient"
        picks = torch.randint(flat.numel(), (entries,), generator=generator).tolist() + [int(gflat.abs().argmax())]
        for j in picks:
            saved = flat[j].item()
            with torch.no_grad():
                flat[j] = saved + eps
                up = loss().item()
                flat[j] = saved - eps
                down = loss().item()
                flat[j] = saved
            numeric = (up - down) / (2 * eps)
            assert abs(gflat[j].item() - numeric) <= 1e-5 + 1e-4 * abs(numeric), (name, j, gflat[j].item(), numeric)
