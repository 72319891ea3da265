"""Hybrid local/global attention (Xu et al., 2019): band limits, gate limits, dropout on both."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cn3.attention import band_mask, masked_softmax, padding_mask
from cn3.layers.hybrid_attention import HybridSelfAttention, local_from_global
from cn3.layers.transformer import MultiHeadAttention


pytestmark = pytest.mark.usefixtures("one_thread")

D, H = 16, 4


def batch(seed: int = 0, lengths=(7, 4, 1)):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), max(lengths), D, generator=g)
    return x, padding_mask(torch.tensor(lengths))


def make(mode: str, window: int, seed: int = 0, dropout: float = 0.0, **kw) -> HybridSelfAttention:
    torch.manual_seed(seed)
    return HybridSelfAttention(D, H, dropout, window, mode, **kw).eval()


def vanilla_like(module: HybridSelfAttention) -> MultiHeadAttention:
    ref = MultiHeadAttention(D, H).eval()
    ref.load_state_dict({k: v for k, v in module.state_dict().items() if not k.startswith("gate.")})
    return ref


def close(a, b, mask):
    """Equal at real tokens (padded query rows are never read downstream)."""
    torch.testing.assert_close(a[mask], b[mask], atol=1e-5, rtol=1e-5)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 9), m=st.integers(0, 10), length=st.integers(1, 9))
def test_local_weights_stay_in_the_band(n, m, length):
    length = min(length, n)
    energy = torch.randn(1, 2, n, n)
    keys = padding_mask(torch.tensor([length]), n)
    w = masked_softmax(energy, keys, band_mask(n, m))
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    outside = ((i - j).abs() > m) | (j >= length)
    assert (w[..., outside] == 0).all()
    rows = w.sum(-1)[..., :length]  # a real query always has itself in its band
    torch.testing.assert_close(rows, torch.ones_like(rows))


def test_window_zero_attends_to_self_only():
    x, mask = batch()
    module = make("local", window=0)
    out, _ = module(x, mask)
    expected = module.out_proj(module.v_proj(x))  # each token's own value, all heads
    close(out, expected, mask)


@pytest.mark.parametrize("window", [6, 7, 50])
def test_window_covering_the_sentence_equals_global(window):
    x, mask = batch()  # N = 7: window >= N - 1 reaches every key
    module = make("local", window=window)
    out, _ = module(x, mask)
    ref, _ = vanilla_like(module)(x, mask)
    close(out, ref, mask)


def force_gate(module: HybridSelfAttention, value: float) -> None:
    with torch.no_grad():
        module.gate.weight.zero_()
        module.gate.bias.fill_(value)


@pytest.mark.parametrize("per_head", [True, False])
def test_gate_closed_equals_global(per_head):
    x, mask = batch(1)
    module = make("hybrid", window=1, seed=1, gate_per_head=per_head)
    force_gate(module, -1e4)  # g = sigmoid(-1e4) = 0: global attention only
    out, info = module(x, mask)
    assert (info["gate"] == 0).all() and info["gate"].shape == (3, H if per_head else 1, 7)
    close(out, vanilla_like(module)(x, mask)[0], mask)


@pytest.mark.parametrize("window", [0, 1, 2])
def test_gate_open_equals_local(window):
    x, mask = batch(2)
    module = make("hybrid", window=window, seed=2)
    force_gate(module, 1e4)  # g = 1: local attention only
    local = make("local", window=window, seed=2)
    local.load_state_dict({k: v for k, v in module.state_dict().items() if not k.startswith("gate.")})
    close(module(x, mask)[0], local(x, mask)[0], mask)


def test_gated_output_lies_between_the_two_patterns():
    """With g = 1/2 (gate bias 0, weight 0) the output is the mean of the local and global outputs."""
    x, mask = batch(3)
    module = make("hybrid", window=1, seed=3)
    force_gate(module, 0.0)
    local = make("local", window=1, seed=3)
    local.load_state_dict({k: v for k, v in module.state_dict().items() if not k.startswith("gate.")})
    glob = vanilla_like(module)
    bias = module.out_proj.bias
    mean = ((local(x, mask)[0] - bias) + (glob(x, mask)[0] - bias)) / 2 + bias
    close(module(x, mask)[0], mean, mask)


@pytest.mark.parametrize("gate", [1e4, -1e4])
def test_dropout_applies_to_both_distributions(gate):
    """The authors' code skips dropout on the local distribution; here both get it."""
    x, mask = batch(4)
    module = make("hybrid", window=1, seed=4, dropout=0.5)
    force_gate(module, gate)  # all weight on one pattern: that pattern's dropout must show
    module.train()
    torch.manual_seed(0)
    a = module(x, mask)[0]
    b = module(x, mask)[0]
    assert not torch.allclose(a[mask], b[mask])
    module.eval()
    torch.testing.assert_close(module(x, mask)[0], module(x, mask)[0])


def test_concat_mode_uses_both_patterns():
    x, mask = batch(5)
    module = make("concat", window=0, seed=5)
    assert module.out_proj.in_features == 2 * D
    out, info = module(x, mask)
    assert out.shape == x.shape and info is None
    with torch.no_grad():
        module.out_proj.weight[:, D:].zero_()  # keep the local half only: window 0 = own value
    local_only = module(x, mask)[0]
    expected = module.v_proj(x) @ module.out_proj.weight[:, :D].T + module.out_proj.bias
    close(local_only, expected, mask)


def test_gradients_flow_and_padding_is_ignored():
    x, mask = batch(6)
    module = make("hybrid", window=1, seed=6).train()
    x.requires_grad_(True)
    out, _ = module(x, mask)
    out[mask].sum().backward()
    assert torch.isfinite(x.grad).all()
    assert (x.grad[~mask] == 0).all()  # padded keys get no weight, hence no gradient
    assert module.gate.weight.grad.abs().sum() > 0


def test_local_from_global_equals_the_masked_softmax_with_gradients():
    torch.manual_seed(7)
    energy = (torch.randn(3, 2, 7, 7) * 4).requires_grad_(True)
    mask = padding_mask(torch.tensor([7, 4, 1]))
    band = band_mask(7, 1)
    fast = local_from_global(masked_softmax(energy, mask), band, mask)
    exact = masked_softmax(energy, mask, band)
    rows = mask[:, None, :]
    torch.testing.assert_close(fast[rows.expand(3, 2, 7)], exact[rows.expand(3, 2, 7)])
    grad = torch.randn_like(exact) * rows.unsqueeze(-1)
    (g_fast,) = torch.autograd.grad(fast, energy, grad)
    (g_exact,) = torch.autograd.grad(exact, energy, grad)
    torch.testing.assert_close(g_fast, g_exact, atol=1e-6, rtol=1e-5)


def test_underflowing_band_falls_back_to_the_exact_softmax():
    """A row whose band energies sit far below its maximum: renormalizing would divide 0 by 0."""
    energy = torch.zeros(1, 1, 5, 5)
    energy[..., 0, 4] = 200.0  # query 0 looks only at key 4, outside its window
    mask = torch.ones(1, 5, dtype=torch.bool)
    assert local_from_global(masked_softmax(energy, mask), band_mask(5, 1), mask) is None
    module = make("hybrid", window=1, seed=8)
    force_gate(module, 1e4)
    exact = make("hybrid", window=1, seed=8, exact_local=True)
    exact.load_state_dict(module.state_dict())
    x, mask = batch(8)
    with torch.no_grad():  # make one query's energies extreme through a huge key projection
        module.k_proj.weight.mul_(1e3)
        exact.k_proj.weight.mul_(1e3)
    out, ref = module(x, mask)[0], exact(x, mask)[0]
    assert torch.isfinite(out).all()
    close(out, ref, mask)
