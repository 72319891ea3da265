"""The SDPA path of hybrid attention: two fused attentions and a lerp, the CUDA default,
forced here on the CPU (``sdpa="always"``) and compared with the weights path (``"never"``)."""

from __future__ import annotations

import pytest
import torch

from cn3.layers.attention import padding_mask
from cn3.layers.hybrid_attention import HybridSelfAttention, band_self_masks

pytestmark = pytest.mark.usefixtures("one_thread")

D, H = 16, 4


def run(module: HybridSelfAttention, path: str, x: torch.Tensor, mask: torch.Tensor | None):
    """Output and gate, and the gradients (input, every parameter) of a random weighting of the
    output at real tokens (padded query rows are never read downstream)."""
    module.sdpa = path
    out, info = module(x, mask)
    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=out.dtype)
    if mask is not None:
        weight = weight * mask[..., None]
    grads = torch.autograd.grad((out * weight).sum(), [x] + list(module.parameters()))
    real = out if mask is None else out[mask]
    return real, info["gate"], grads


@pytest.mark.parametrize("window", [0, 1, 3, 50])
@pytest.mark.parametrize("per_head", [False, True])
@pytest.mark.parametrize("lengths,masked", [((7, 4, 1), True), ((9, 3), True), ((5, 5), False)])
def test_sdpa_path_equals_the_weights_path(window, per_head, lengths, masked):
    torch.manual_seed(window)
    module = HybridSelfAttention(D, H, 0.0, window, "hybrid", gate_per_head=per_head).double().eval()
    with torch.no_grad():  # a gate away from 1/2
        module.gate.bias.fill_(0.8)
    x = torch.randn(len(lengths), max(lengths), D, dtype=torch.float64, requires_grad=True)
    mask = padding_mask(torch.tensor(lengths)) if masked else None
    want = run(module, "never", x, mask)
    got = run(module, "always", x, mask)
    torch.testing.assert_close(got[0], want[0], atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(got[1], want[1], atol=0, rtol=0)
    for a, b in zip(got[2], want[2]):
        torch.testing.assert_close(a, b, atol=1e-11, rtol=1e-9)


def test_sdpa_path_has_no_empty_rows():
    """An empty sentence and padded queries far past the end stay finite, gradients too."""
    module = HybridSelfAttention(D, H, 0.0, 1, "hybrid")
    module.sdpa = "always"
    x = torch.randn(3, 8, D, requires_grad=True)
    mask = padding_mask(torch.tensor([8, 2, 0]), 8)
    out, _ = module(x, mask)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(x.grad).all()


def test_sdpa_path_in_training_drops_both_distributions():
    """Dropout p = 1 drops everything: the attention output is the projection bias alone."""
    module = HybridSelfAttention(D, H, 1.0, 1, "hybrid").train()
    module.sdpa = "always"
    with torch.no_grad():
        module.out_proj.bias.uniform_()
    x, mask = torch.randn(2, 6, D), padding_mask(torch.tensor([6, 3]))
    out, info = module(x, mask)
    torch.testing.assert_close(out, module.out_proj.bias.expand_as(out).detach())
    assert info["gate"].shape == (2, 1, 6)


def test_auto_keeps_the_weights_path_on_cpu_and_need_weights_always_does():
    module = HybridSelfAttention(D, H, 0.5, 1, "hybrid").train()
    drawn = []
    module.dropout_mask = lambda like: drawn.append(1) or torch.ones_like(like)  # noqa: E731
    x, mask = torch.randn(2, 5, D), padding_mask(torch.tensor([5, 2]))
    module(x, mask)
    assert drawn  # "auto" on the CPU: the weights path, with its one shared mask
    module.sdpa, drawn[:] = "always", []
    _, info = module(x, mask, need_weights=True)
    assert drawn and "weights" in info
    module.sdpa = "sometimes"
    with pytest.raises(ValueError, match="sdpa"):
        module(x, mask)


def test_cached_masks_made_in_inference_mode_serve_training():
    with torch.inference_mode():
        band, diagonal = band_self_masks(11, 2, torch.device("cpu"))
    assert not band.is_inference() and not diagonal.is_inference()
    assert band.sum() == 11 + 2 * (10 + 9) and diagonal.sum() == 11
    module = HybridSelfAttention(D, H, 0.0, 2, "hybrid")
    module.sdpa = "always"
    x = torch.randn(2, 11, D, requires_grad=True)
    module(x, padding_mask(torch.tensor([11, 5])))[0].sum().backward()
    assert x.grad is not None


def test_sdpa_path_under_bf16_autocast_follows_float32():
    module = HybridSelfAttention(D, H, 0.0, 1, "hybrid").eval()
    module.sdpa = "always"
    x, mask = torch.randn(3, 9, D), padding_mask(torch.tensor([9, 5, 2]))
    ref = module(x, mask)[0]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = module(x, mask)[0]
    torch.testing.assert_close(out.float()[mask], ref[mask], atol=0.05, rtol=0.05)


def test_auto_takes_sdpa_on_cuda_unless_deterministic():
    from types import SimpleNamespace
    module = HybridSelfAttention(D, H, 0.0, 1, "hybrid")
    on_cuda = SimpleNamespace(is_cuda=True)
    assert module._use_sdpa(on_cuda)
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        assert not module._use_sdpa(on_cuda)
    finally:
        torch.use_deterministic_algorithms(was)
