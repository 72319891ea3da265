"""The fused Triton kernel (:mod:`cn3.layers.fused_energy`) in Triton's interpreter, on CPU tensors,
against the literal references: outputs, weights and every gradient.

Not collected by a plain ``pytest`` run (the name has no ``test_`` prefix): ``TRITON_INTERPRET=1``
must be in the environment before ``triton`` is first imported, which holds per process, so
``tests/layers/test_fused_energy.py::test_interpreter_cases`` runs this file in a subprocess. Directly::

    TRITON_INTERPRET=1 .venv/bin/python -m pytest -q tests/fused_interpreter_cases.py

The interpreter runs the kernels (the forward and both backward passes) with one fixed config,
:data:`~cn3.layers.fused_energy.INTERPRETER_TILES` (4 queries x 4 keys x 4 energy columns), so
``N = 6`` and ``e = 7`` leave partial tiles on every axis. Inputs are float32 (the kernels'
arithmetic) and the references run in float64 on the same values: the kernel file's own
:func:`~cn3.layers.fused_energy.reference_attention` and the layer's literal per-pair reference.
"""

from __future__ import annotations

import copy
import os

import pytest
import torch

if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("needs TRITON_INTERPRET=1 before triton is imported (run by tests/layers/test_fused_energy.py)",
                allow_module_level=True)
pytest.importorskip("triton")

from cn3.layers import DynamicGraphEncoder, DynamicGraphLayer  # noqa: E402
from cn3.layers.attention import padding_mask  # noqa: E402
from cn3.layers.fused_energy import INTERPRETING, fused_additive_attention, reference_attention  # noqa: E402
from tests.references import dynamic_graph_reference  # noqa: E402

D, A, T = 6, 3, 5  # hidden, attribute size, edge types
TOL = {"atol": 2e-5, "rtol": 1e-4}  # float32 kernel against the float64 reference


def test_kernels_are_interpreted():
    assert INTERPRETING


def _leaves(gen, *shapes):
    return [torch.randn(*shape, generator=gen, requires_grad=True) for shape in shapes]


def _check_attention(q, k, u, values, key_mask, query_mask, edge_vecs, edge_type, need_alpha, gen):
    """Forward, weights and the gradient of every differentiable input against the kernel file's
    reference (:func:`~cn3.layers.fused_energy.reference_attention`) in float64."""
    out, alpha = fused_additive_attention(q, k, u, values, key_mask, query_mask, edge_vecs, edge_type,
                                          need_alpha=need_alpha)
    inputs = [x for x in (q, k, u, edge_vecs, values) if x is not None]
    wide = [x.detach().double().requires_grad_() for x in inputs]
    named = dict(zip([n for n, x in zip("qkuev", (q, k, u, edge_vecs, values)) if x is not None], wide))
    ref, ref_alpha = reference_attention(named["q"], named["k"], named["u"], named["v"], key_mask, query_mask,
                                         named.get("e"), edge_type)
    torch.testing.assert_close(out.double(), ref, **TOL)
    if need_alpha:
        torch.testing.assert_close(alpha.double(), ref_alpha, **TOL)
        assert not alpha.requires_grad
    else:
        assert alpha is None
    probe = torch.randn(out.shape, generator=gen)
    for got, want in zip(torch.autograd.grad((out * probe).sum(), inputs),
                         torch.autograd.grad((ref * probe.double()).sum(), wide)):
        torch.testing.assert_close(got.double(), want, **TOL)


@pytest.mark.parametrize("use_edges", [False, True])
@pytest.mark.parametrize("need_alpha", [False, True])
@pytest.mark.parametrize("masks", ["none", "padding", "scattered"])
def test_attention_matches_broadcasting(use_edges, need_alpha, masks):
    """``N = 6`` over 4-row tiles; ``padding``: lengths 6, 3, 0 (an all-padding sentence);
    ``scattered``: key and query masks with holes (not a prefix), one query row without any key."""
    gen = torch.Generator().manual_seed(hash((use_edges, need_alpha, masks)) % 1000)
    b, n, e, d = 3, 6, 7, 5
    q, k, u, edge_vecs, values = _leaves(gen, (b, n, e), (b, n, e), (e,), (T, e), (b, n, d))
    edge_type = torch.randint(0, T, (b, n, n), generator=gen)
    if not use_edges:
        edge_vecs, edge_type = None, None
    key_mask = query_mask = None
    if masks == "padding":
        key_mask = query_mask = padding_mask(torch.tensor([6, 3, 0]), n)
    elif masks == "scattered":
        key_mask = torch.tensor([[1, 0, 1, 1, 0, 1], [0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0]], dtype=torch.bool)
        query_mask = torch.tensor([[0, 1, 1, 0, 1, 1], [1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    _check_attention(q, k, u, values, key_mask, query_mask, edge_vecs, edge_type, need_alpha, gen)


@pytest.mark.parametrize("n_q, n_k", [(1, 1), (5, 9), (9, 2)])
def test_attention_odd_shapes(n_q, n_k):
    """One node; queries and keys of different counts; energy width 9 (three slabs of 4, the last
    with one column) and value width 17 (padded to 32)."""
    gen = torch.Generator().manual_seed(n_q * 10 + n_k)
    b, e, d = 2, 9, 17
    q, k, u, edge_vecs, values = _leaves(gen, (b, n_q, e), (b, n_k, e), (e,), (T, e), (b, n_k, d))
    edge_type = torch.randint(0, T, (b, n_q, n_k), generator=gen)
    key_mask = padding_mask(torch.tensor([n_k, max(1, n_k - 1)]), n_k)
    query_mask = padding_mask(torch.tensor([n_q, max(1, n_q // 2)]), n_q)
    _check_attention(q, k, u, values, key_mask, query_mask, edge_vecs, edge_type, True, gen)


@pytest.mark.parametrize("need_alpha", [False, True])
def test_attention_heads(need_alpha):
    """Three energy heads in one launch, each over its own columns of q, k, E and slice of the values."""
    gen = torch.Generator().manual_seed(3)
    b, n, e, d, heads = 2, 7, 6, 9, 3
    q, k, u, edge_vecs, values = _leaves(gen, (b, n, e), (b, n, e), (heads, e // heads), (T, e), (b, n, d))
    edge_type = torch.randint(0, T, (b, n, n), generator=gen)
    mask = padding_mask(torch.tensor([7, 2]), n)
    _check_attention(q, k, u, values, mask, mask, edge_vecs, edge_type, need_alpha, gen)


def _layer_pair(heads: int, use_v: bool, use_edges: bool):
    """The same weights twice: float32 on the fused path, float64 for the literal reference."""
    torch.manual_seed(1)
    layer = DynamicGraphLayer(D, attr_dim=A if use_v else 0, n_edge_types=T if use_edges else 0, edge_dim=4,
                              energy_dim=6, init_range=0.5, energy_heads=heads, impl="fused")
    return layer, copy.deepcopy(layer).double()


@pytest.mark.parametrize("heads", [1, 2])
@pytest.mark.parametrize("use_v, use_edges", [(False, False), (True, True)])
@pytest.mark.parametrize("per_head", [False, True])
def test_layer_matches_reference(heads, use_v, use_edges, per_head):
    """The whole layer on ``impl="fused"`` (node attributes, edge types, energy heads, padding and
    an empty sentence) against the per-pair reference: outputs, weights and every parameter's
    gradient and the input's."""
    layer, wide = _layer_pair(heads, use_v, use_edges)
    gen = torch.Generator().manual_seed(heads)
    lengths = [6, 3, 0]
    n = max(lengths)
    mask = padding_mask(torch.tensor(lengths), n)
    h = torch.randn(len(lengths), n, D, generator=gen, requires_grad=True)
    v = torch.randn(len(lengths), n, A, generator=gen) if use_v else None
    edges = torch.randint(0, T, (len(lengths), n, n), generator=gen) if use_edges else None
    out, alpha, gate = layer(h, mask, v, edges, per_head=per_head)
    h64 = h.detach().double().requires_grad_()
    ref_out, ref_alpha, ref_gate = dynamic_graph_reference(wide, h64, mask, None if v is None else v.double(),
                                                           edges, per_head=per_head)
    for got, want in ((out, ref_out), (alpha, ref_alpha), (gate, ref_gate)):
        torch.testing.assert_close(got.double(), want, **TOL)
    probe = torch.randn(out.shape, generator=gen)
    fast = torch.autograd.grad((out * probe).sum(), [h, *layer.parameters()])
    slow = torch.autograd.grad((ref_out * probe.double()).sum(), [h64, *wide.parameters()])
    names = ["h"] + [name for name, _ in layer.named_parameters()]
    for name, got, want in zip(names, fast, slow):
        torch.testing.assert_close(got.double(), want, **TOL, msg=lambda m, name=name: f"{name}: {m}")


def test_encoder_with_relative_positions_without_alpha():
    """Relative positions (edge types computed by the encoder, an expanded (stride-0) tensor) and
    ``need_alpha=False``: the same states and gradients as the blockwise path, and no weights."""
    torch.manual_seed(0)
    fused = DynamicGraphEncoder(2, D, relative_positions=2, edge_dim=4, energy_dim=6, impl="fused")
    blockwise = copy.deepcopy(fused)
    for layer in blockwise.layers:
        layer.impl = "blockwise"
    mask = padding_mask(torch.tensor([5, 2]), 5)
    h = torch.randn(2, 5, D, requires_grad=True)
    out, alphas, _ = fused(h, mask, need_alpha=False)
    ref, _, _ = blockwise(h, mask)
    assert alphas is None
    torch.testing.assert_close(out, ref, **TOL)
    grads = torch.autograd.grad(out.sum(), [h, *fused.parameters()])
    ref_grads = torch.autograd.grad(ref.sum(), [h, *blockwise.parameters()])
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, **TOL)


def test_other_tanh_forms_are_refused_in_the_interpreter():
    q = torch.randn(1, 2, 4)
    with pytest.raises(ValueError, match="only 'sigmoid'"):
        fused_additive_attention(q, q, torch.randn(4), q, tanh="libdevice")


def test_compiled_function_runs_the_kernels():
    """``torch.compile(fullgraph=True)`` around the op (AOTAutograd, no inductor): one graph, and the
    kernels it runs give the reference's output and gradients."""
    gen = torch.Generator().manual_seed(11)
    q, k, u, values = _leaves(gen, (2, 5, 6), (2, 5, 6), (2, 3), (2, 5, 4))
    mask = padding_mask(torch.tensor([5, 2]), 5)

    def step(q, k, u, values):
        return fused_additive_attention(q, k, u, values, mask, mask, need_alpha=False)[0]

    out = torch.compile(step, fullgraph=True, backend="aot_eager")(q, k, u, values)
    _check_attention(q, k, u, values, mask, mask, None, None, False, gen)  # the eager op, against the reference
    torch.testing.assert_close(out, step(q, k, u, values), atol=1e-6, rtol=1e-6)
    grads = torch.autograd.grad(out.sum(), [q, k, u, values])
    for got, want in zip(grads, torch.autograd.grad(step(q, k, u, values).sum(), [q, k, u, values])):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)
