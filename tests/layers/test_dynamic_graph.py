"""The CN3 dynamic-graph layer against its literal per-sentence reference (blockwise and dense
paths; the fused kernel: tests/layers/test_fused_energy.py), and the blockwise additive attention against
plain broadcasting."""

from __future__ import annotations

import pytest
import torch

from cn3.layers import (
    BlockwiseAdditiveAttention,
    DynamicGraphEncoder,
    DynamicGraphLayer,
    additive_attention,
    cn3_attention,
)
from cn3.layers.attention import padding_mask
from tests.references import additive_attention_dense, dynamic_graph_reference

D, A, T = 5, 3, 6  # hidden, attribute size, edge types


def make_inputs(lengths, n=None, use_v=True, use_edges=True, seed=0):
    gen = torch.Generator().manual_seed(seed)
    n = n or max(lengths)
    mask = padding_mask(torch.tensor(lengths), n)
    h = torch.randn(len(lengths), n, D, generator=gen, dtype=torch.float64)
    v = torch.randn(len(lengths), n, A, generator=gen, dtype=torch.float64) if use_v else None
    edges = torch.randint(0, T, (len(lengths), n, n), generator=gen) if use_edges else None
    return h, mask, v, edges


def make_layer(use_v=True, use_edges=True, **kwargs):
    torch.manual_seed(1)
    return DynamicGraphLayer(D, attr_dim=A if use_v else 0, n_edge_types=T if use_edges else 0,
                             edge_dim=4, energy_dim=7, init_range=0.5, **kwargs).double()


@pytest.mark.parametrize("use_v", [False, True])
@pytest.mark.parametrize("use_edges", [False, True])
@pytest.mark.parametrize("block_rows, impl", [(None, "blockwise"), (1, "blockwise"), (3, "blockwise"),
                                              (None, "dense")])
def test_layer_matches_reference(use_v, use_edges, block_rows, impl):
    layer = make_layer(use_v, use_edges, block_rows=block_rows, impl=impl)
    h, mask, v, edges = make_inputs([6, 3, 1], use_v=use_v, use_edges=use_edges)
    h.requires_grad_(True)
    out, alpha, gate = layer(h, mask, v, edges)
    ref_out, ref_alpha, ref_gate = dynamic_graph_reference(layer, h, mask, v, edges)
    torch.testing.assert_close(out, ref_out, atol=1e-10, rtol=1e-7)
    torch.testing.assert_close(alpha, ref_alpha, atol=1e-10, rtol=1e-7)
    torch.testing.assert_close(gate, ref_gate, atol=1e-10, rtol=1e-7)

    # the same loss through both paths gives the same gradients for every parameter and h
    probe = torch.randn_like(out)
    params = [h, *layer.parameters()]
    fast = torch.autograd.grad((out * probe).sum(), params)
    slow = torch.autograd.grad((ref_out * probe).sum(), params)
    for got, want in zip(fast, slow):
        torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-7)


def test_padding_does_not_change_real_tokens():
    layer = make_layer()
    h, mask, v, edges = make_inputs([5, 2], n=5)
    out, alpha, gate = layer(h, mask, v, edges)
    extra = 4
    h_pad = torch.cat([h, torch.randn(2, extra, D, dtype=torch.float64)], dim=1)
    v_pad = torch.cat([v, torch.randn(2, extra, A, dtype=torch.float64)], dim=1)
    edges_pad = torch.randint(0, T, (2, 5 + extra, 5 + extra))
    edges_pad[:, :5, :5] = edges
    mask_pad = padding_mask(torch.tensor([5, 2]), 5 + extra)
    out_pad, alpha_pad, gate_pad = layer(h_pad, mask_pad, v_pad, edges_pad)
    torch.testing.assert_close(out_pad[:, :5], out)
    torch.testing.assert_close(alpha_pad[:, :5, :5], alpha)
    torch.testing.assert_close(gate_pad[:, :5], gate)
    assert torch.all(out_pad[:, 5:] == 0) and torch.all(gate_pad[:, 5:] == 0)


def test_alpha_is_a_distribution_over_real_nodes_only():
    layer = make_layer()
    h, mask, v, edges = make_inputs([6, 4, 1])
    _, alpha, _ = layer(h, mask, v, edges)
    pairs = mask[:, :, None] & mask[:, None, :]
    assert torch.all(alpha[~pairs] == 0)
    torch.testing.assert_close(alpha.sum(-1), mask.double())


def test_gradcheck_blockwise_attention():
    gen = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64, requires_grad=True)

    q, k, u, edge_vecs, values = rand(2, 4, 3), rand(2, 5, 3), rand(3), rand(T, 3), rand(2, 5, 2)
    edge_type = torch.randint(0, T, (2, 4, 5), generator=gen)
    key_mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    query_mask = torch.tensor([[True] * 4, [True, True, True, False]])
    for block_rows in (1, 3, 4):
        def fn(q, k, u, edge_vecs, values):
            return BlockwiseAdditiveAttention.apply(q, k, u, edge_vecs, edge_type, values,
                                                    key_mask, query_mask, block_rows)[0]
        assert torch.autograd.gradcheck(fn, (q, k, u, edge_vecs, values))
    no_edges = lambda q, k, u, values: BlockwiseAdditiveAttention.apply(  # noqa: E731
        q, k, u, None, None, values, None, None, 2)[0]
    assert torch.autograd.gradcheck(no_edges, (q, k, u, values))


def test_gradcheck_heads_with_a_key_mask_per_query():
    """:func:`cn3_attention` with three heads and a key mask per (query, key) pair: every input's gradient,
    ``u (H, e/H)`` included."""
    gen = torch.Generator().manual_seed(3)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64, requires_grad=True)

    q, k, u, edge_vecs, values = rand(2, 5, 6), rand(2, 5, 6), rand(3, 2), rand(T, 6), rand(2, 5, 9)
    edge_type = torch.randint(0, T, (2, 5, 5), generator=gen)
    keys = torch.rand(2, 5, 5, generator=gen) > 0.3  # (B, N, N)
    keys[1, 2] = False  # a query with no key
    mask = torch.tensor([[True] * 5, [True, True, True, True, False]])
    for block_rows in (1, 3, 5):
        def fn(q, k, u, edge_vecs, values):
            return cn3_attention(q, k, u, values, mask, edge_vecs, edge_type, keys=keys, impl="blockwise",
                                 block_rows=block_rows)[0]
        assert torch.autograd.gradcheck(fn, (q, k, u, edge_vecs, values))


@pytest.mark.parametrize("block_rows", [1, 3, 64])
def test_heads_equal_one_reference_per_head(block_rows):
    """``u (H, e/H)``: head ``h`` is :func:`additive_attention_dense` on columns ``h e/H : (h+1) e/H`` of the
    projections and edge vectors and slice ``h d/H : (h+1) d/H`` of the values, its output in that slice,
    its weights at ``alpha[:, h]``; the gradients are those of the per-head references."""
    gen = torch.Generator().manual_seed(block_rows)
    b, n, heads, width, d = 3, 6, 3, 2, 9  # e = 6, d/H = 3
    leaves = [torch.randn(*s, generator=gen, dtype=torch.float64, requires_grad=True)
              for s in [(b, n, heads * width), (b, n, heads * width), (heads, width), (T, heads * width), (b, n, d)]]
    q, k, u, edge_vecs, values = leaves
    edge_type = torch.randint(0, T, (b, n, n), generator=gen)
    mask = padding_mask(torch.tensor([6, 4, 1]), n)
    keys = torch.rand(b, n, n, generator=gen) > 0.4  # (B, N, N)
    out, alpha = cn3_attention(q, k, u, values, mask, edge_vecs, edge_type, keys=keys, impl="blockwise",
                               block_rows=block_rows)
    assert alpha.shape == (b, heads, n, n)
    refs = []
    for h in range(heads):
        cols, vcols = slice(h * width, (h + 1) * width), slice(h * 3, (h + 1) * 3)
        refs.append(additive_attention_dense(q[..., cols], k[..., cols], u[h], values[..., vcols],
                                             keys & mask[:, None, :], mask, edge_vecs[:, cols], edge_type))
        torch.testing.assert_close(out[..., vcols], refs[-1][0])
        torch.testing.assert_close(alpha[:, h], refs[-1][1])
    ref_out = torch.cat([ref[0] for ref in refs], dim=-1)
    probe = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    for got, want in zip(torch.autograd.grad((out * probe).sum(), leaves),
                         torch.autograd.grad((ref_out * probe).sum(), leaves)):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("block_rows", [1, 2, 5, 7, 64])
@pytest.mark.parametrize("use_edges", [False, True])
def test_blockwise_equals_unblocked(block_rows, use_edges):
    gen = torch.Generator().manual_seed(block_rows)
    b, n, e, d = 3, 7, 4, 5
    leaves = [torch.randn(*s, generator=gen, dtype=torch.float64, requires_grad=True)
              for s in [(b, n, e), (b, n, e), (e,), (T, e), (b, n, d)]]
    q, k, u, edge_vecs, values = leaves
    edge_type = torch.randint(0, T, (b, n, n), generator=gen)
    if not use_edges:
        edge_vecs, edge_type = None, None
    mask = padding_mask(torch.tensor([7, 4, 1]), n)
    args = (q, k, u, values, mask, mask, edge_vecs, edge_type)
    out, alpha = additive_attention(*args, block_rows=block_rows)
    ref_out, ref_alpha = additive_attention_dense(*args)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(alpha, ref_alpha)
    assert not alpha.requires_grad
    probe = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    inputs = [x for x in (q, k, u, edge_vecs, values) if x is not None]
    for got, want in zip(torch.autograd.grad((out * probe).sum(), inputs),
                         torch.autograd.grad((ref_out * probe).sum(), inputs)):
        torch.testing.assert_close(got, want)


def test_saved_memory_is_linear_in_energy_dim():
    """What backward keeps is O(N^2 + N (e + d)), never the O(N^2 e) tanh tensor."""
    n, e, d = 300, 64, 16
    layer = DynamicGraphLayer(d, energy_dim=e)
    h = torch.randn(1, n, d, requires_grad=True)
    mask = torch.ones(1, n, dtype=torch.bool)
    saved: dict[int, int] = {}

    def pack(tensor):
        saved[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out, _, _ = layer(h, mask)
    tanh_bytes = 4 * n * n * e  # what plain broadcasting keeps, at least once
    assert sum(saved.values()) < tanh_bytes / 8
    out.sum().backward()
    assert torch.isfinite(h.grad).all()


def test_reset_parameters_is_uniform_in_init_range():
    layer = DynamicGraphLayer(20, attr_dim=4, n_edge_types=5, edge_dim=6, energy_dim=30)
    for name, param in layer.named_parameters():
        assert param.abs().max() <= 0.1, name
        assert param.abs().max() > 0.05, name  # not left at zero
    assert layer.energy_weight().shape == (30, 2 * 20 + 2 * 4 + 6)


def test_inputs_must_match_the_configuration():
    h, mask, v, edges = make_inputs([3])
    with pytest.raises(ValueError, match="v is missing"):
        make_layer()(h, mask, None, edges)
    with pytest.raises(ValueError, match="edge_type is unexpected"):
        make_layer(use_edges=False)(h, mask, v, edges)


def test_encoder_stacks_layers():
    torch.manual_seed(0)
    encoder = DynamicGraphEncoder(3, D, attr_dim=A, n_edge_types=T, edge_dim=4,
                                  energy_dim=7).double()
    h, mask, v, edges = make_inputs([4, 2])
    out, alphas, gates = encoder(h, mask, v, edges)
    assert len(alphas) == len(gates) == 3
    assert alphas[0].shape == (2, 4, 4) and gates[0].shape == (2, 4, D)
    expected = h
    for layer in encoder.layers:
        expected = layer(expected, mask, v, edges)[0]
    torch.testing.assert_close(out, expected)


def test_a_layer_trains_under_bf16_autocast_with_gradients_close_to_fp32():
    """``torch.autocast("cpu", bfloat16)`` around the layer: the blockwise energy's custom backward
    used to fail on the mix of bf16 projections and fp32 parameters. The bf16 gradients must stay
    within 5% (relative norm) of the fp32 ones for every parameter (bf16 keeps 8 bits of mantissa,
    about 0.4% per rounding), and come back in the parameters' own dtype."""
    import torch

    from cn3.layers.dynamic_graph import DynamicGraphLayer

    torch.manual_seed(0)
    batch, n, hidden, attr, types = 4, 12, 32, 8, 5
    layer = DynamicGraphLayer(hidden, attr_dim=attr, n_edge_types=types, energy_dim=16, block_rows=5)
    h = torch.randn(batch, n, hidden, requires_grad=True)
    v = torch.randn(batch, n, attr)
    mask = torch.ones(batch, n, dtype=torch.bool)
    mask[1, 8:] = False
    edge_type = torch.randint(0, types, (batch, n, n))
    weight = torch.linspace(-1, 1, hidden)

    def grads(bf16: bool):
        layer.zero_grad()
        h.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = layer(h, mask, v, edge_type)[0]
        (out.float() * weight).sum().backward()
        return out.float().detach(), {name: p.grad.clone() for name, p in layer.named_parameters()}, h.grad.clone()

    out32, grads32, h32 = grads(False)
    out16, grads16, h16 = grads(True)
    assert (out16 - out32).abs().max() < 0.05
    for name, g in grads32.items():
        assert grads16[name].dtype == torch.float32, name
        assert (grads16[name] - g).norm() / g.norm() < 0.05, name
    assert (h16 - h32).norm() / h32.norm() < 0.05
