"""Hybrid local/global attention (Xu et al., 2019): band limits, gate limits, dropout on both, and the
band path (local weights from the 2m + 1 band entries only) against the dense N x N formulation."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cn3.layers.attention import (
    attend,
    band_gather,
    band_index,
    band_key_mask,
    band_mask,
    band_scatter,
    band_width,
    gated_mix,
    local_band,
    masked_softmax,
    padding_mask,
)
from cn3.layers.hybrid_attention import HybridSelfAttention
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


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 9), m=st.integers(0, 10), length=st.integers(1, 9), masked=st.booleans())
def test_band_softmax_equals_the_dense_band_softmax(n, m, length, masked):
    """The band path's local weights, scattered back, are the N x N masked softmax with band_mask."""
    length = min(length, n)
    energy = torch.randn(2, 3, n, n, dtype=torch.float64) * 3
    keys = padding_mask(torch.tensor([n, length]), n) if masked else None
    width = band_width(n, m)
    index = band_index(n, width)
    local = local_band(energy, band_key_mask(keys, n, width), index)
    assert local.shape == (2, 3, n, 2 * width + 1)
    dense = masked_softmax(energy, keys, band_mask(n, m))
    torch.testing.assert_close(band_scatter(local, index), dense, atol=1e-12, rtol=1e-12)
    # and the band of the dense weights is the band weights (columns outside the sentence are 0)
    inside = band_key_mask(None, n, width)
    torch.testing.assert_close(band_gather(dense, index) * inside, local, atol=1e-12, rtol=1e-12)


def dense_reference(module: HybridSelfAttention, x, mask, keep=None):
    """The formulation before the band path, from the module's own parameters: the local softmax
    over N x N with band_mask, gated_mix of the two distributions, one attend; ``keep`` is a
    dropout keep mask for the mixed weights (hybrid) or for each distribution (local, concat).
    Returns ``(out, weights averaged over heads)``."""
    n = x.shape[1]
    q = module.query(x)
    k, v = module.keys_values(x)
    energy = q @ k.transpose(-1, -2)
    glob = masked_softmax(energy, mask)
    local = masked_softmax(energy, mask, band_mask(n, module.window))
    drop = (lambda w: w * keep / (1 - module.dropout)) if keep is not None else (lambda w: w)  # noqa: E731
    if module.mode == "hybrid":
        g = torch.sigmoid(module.gate(x)).transpose(1, 2).unsqueeze(-1)
        mixed = gated_mix(local, glob, g)
        return module.out_proj(module.merge(attend(drop(mixed), v))), mixed.mean(1)
    if module.mode == "local":
        return module.out_proj(module.merge(attend(drop(local), v))), local.mean(1)
    both = torch.cat([module.merge(attend(drop(local), v)), module.merge(attend(drop(glob), v))], dim=-1)
    return module.out_proj(both), (0.5 * (local + glob)).mean(1)


def outputs_and_grads(fn, module, x, seed=0):
    """The output of ``fn(x)`` and the gradients of a random weighting of it at real tokens w.r.t.
    the input and every parameter (q/k/v/out projections, the gate)."""
    out, weights = fn(x)
    g = torch.Generator().manual_seed(seed)
    loss = (out * torch.randn(out.shape, generator=g, dtype=out.dtype)).sum()
    params = [x] + [p for _, p in sorted(module.named_parameters())]
    return out, weights, torch.autograd.grad(loss, params)


CASES = [("hybrid", False), ("hybrid", True), ("local", False), ("concat", False)]


@pytest.mark.parametrize("mode,per_head", CASES)
@pytest.mark.parametrize("window", [0, 1, 2, 6, 50])
@pytest.mark.parametrize("lengths,masked", [((7, 4, 1), True), ((9, 3), True), ((5, 5), False)])
def test_band_path_equals_the_dense_formulation(mode, per_head, window, lengths, masked):
    """Outputs, info["weights"] and gradients (input, projections, gate) at several shapes: padding,
    no mask, window 0, windows covering the sentence (6 for N = 7, 50 for all)."""
    torch.manual_seed(window)
    kw = {"gate_per_head": per_head} if mode == "hybrid" else {}
    module = HybridSelfAttention(D, H, 0.0, window, mode, **kw).double().eval()
    if mode == "hybrid":
        with torch.no_grad():  # a gate away from 1/2, different per token
            module.gate.bias.fill_(0.8)
    g = torch.Generator().manual_seed(len(lengths) + window)
    x = torch.randn(len(lengths), max(lengths), D, generator=g, dtype=torch.float64, requires_grad=True)
    mask = padding_mask(torch.tensor(lengths)) if masked else None
    out, weights, grads = outputs_and_grads(lambda x: _with_weights(module, x, mask), module, x)
    ref, ref_weights, ref_grads = outputs_and_grads(lambda x: dense_reference(module, x, mask), module, x)
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(weights, ref_weights, atol=1e-12, rtol=1e-10)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, atol=1e-11, rtol=1e-9)


def _with_weights(module, x, mask):
    out, info = module(x, mask, need_weights=True)
    return out, info["weights"]


@pytest.mark.parametrize("per_head", [False, True])
def test_band_path_equals_the_dense_formulation_in_float32(per_head):
    x, mask = batch(9, lengths=(12, 7, 3))
    x.requires_grad_(True)
    module = make("hybrid", window=2, seed=9, gate_per_head=per_head)
    out, _, grads = outputs_and_grads(lambda x: _with_weights(module, x, mask), module, x)
    ref, _, ref_grads = outputs_and_grads(lambda x: dense_reference(module, x, mask), module, x)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("window", [0, 1, 3, 50])
@pytest.mark.parametrize("per_head", [False, True])
def test_hybrid_dropout_is_one_mask_on_the_mixed_distribution(window, per_head):
    """Training mode: the mask drawn once over N x N drops the global weights and, on its band, the
    local ones: ``g Att(drop_M(l), V) + (1 - g) Att(drop_M(a), V) = Att(drop_M(mix), V)``."""
    torch.manual_seed(10)
    module = HybridSelfAttention(D, H, 0.4, window, "hybrid", gate_per_head=per_head).double().train()
    with torch.no_grad():
        module.gate.bias.fill_(-0.3)
    x, mask = batch(10)
    x = x.double().requires_grad_(True)
    g = torch.Generator().manual_seed(11)
    keep = (torch.rand(x.shape[0], H, x.shape[1], x.shape[1], generator=g) > 0.4).double()
    module.dropout_mask = lambda like: keep.clone().to(like)  # the layer scales its mask in place
    out, _, grads = outputs_and_grads(lambda x: (module(x, mask)[0], None), module, x)
    ref, _, ref_grads = outputs_and_grads(lambda x: dense_reference(module, x, mask, keep), module, x)
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, atol=1e-11, rtol=1e-9)
    # info["weights"] stays the mixed distribution before dropout
    _, info = module(x, mask, need_weights=True)
    torch.testing.assert_close(info["weights"], dense_reference(module, x, mask)[1], atol=1e-12, rtol=1e-10)


def test_closed_gate_in_training_is_vanilla_attention_with_its_own_dropout():
    """The hybrid layer draws its dropout mask over (B, H, N, N) as vanilla attention's F.dropout
    does (on CPU), so with the gate closed and the same random state the two agree in training."""
    x, mask = batch(12)
    module = make("hybrid", window=1, seed=12, dropout=0.3).train()
    force_gate(module, -1e4)
    vanilla = vanilla_like(module).train()
    vanilla.dropout = 0.3
    torch.manual_seed(3)
    out = module(x, mask)[0]
    torch.manual_seed(3)
    close(out, vanilla(x, mask)[0], mask)


def test_extreme_energies_stay_exact():
    """Local weights are a softmax of the band energies themselves: a query whose band sits far below
    its row maximum (where renormalizing the global weights would divide 0 by 0) is still exact."""
    module = make("hybrid", window=1, seed=8).double()
    force_gate(module, 1e4)  # all weight on the local pattern
    x, mask = batch(8)
    x = x.double()
    with torch.no_grad():  # make the energies extreme through a huge key projection
        module.k_proj.weight.mul_(1e3)
    out = module(x, mask)[0]
    assert torch.isfinite(out).all()
    close(out, dense_reference(module, x, mask)[0], mask)


@pytest.mark.parametrize("mode", ["hybrid", "local", "concat"])
def test_bf16_autocast_follows_float32(mode):
    x, mask = batch(13, lengths=(9, 5, 2))
    module = make(mode, window=1, seed=13, dropout=0.0)
    ref = module(x, mask)[0]
    x.requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = module(x, mask)
    out.float().sum().backward()
    torch.testing.assert_close(out.float()[mask], ref[mask], atol=0.05, rtol=0.05)
    assert torch.isfinite(x.grad).all()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all()
               for p in module.parameters())
