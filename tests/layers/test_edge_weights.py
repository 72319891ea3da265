"""CN3's edge-weight options (cn3.layers.edge_weights) against literal references: the tree marginals
against brute-force enumeration of every dependency tree, the sparse normalisers against the ``entmax``
package row by row, centering and the regularisers by hand, and the whole layer against its
per-pair reference with each option; padding, one-word sentences and gradients."""

from __future__ import annotations

import itertools
import math

import entmax
import pytest
import torch

from cn3.layers import DynamicGraphEncoder, DynamicGraphLayer
from cn3.layers.attention import padding_mask
from cn3.layers.edge_weights import (
    EDGE_WEIGHTS,
    center_energy,
    graph_attention,
    heads_from_edge_types,
    hub_penalty,
    normalise,
    parse_loss,
    tree_marginals,
)
from data_prep.graphs import dense_edge_types, edge_types_from_heads
from tests.layers.test_dynamic_graph import make_inputs, make_layer


def brute_force_marginals(s: torch.Tensor) -> torch.Tensor:
    """``P(head(i) = k)`` (``k = i``: the root) by enumerating every head assignment with one root and
    no cycle, each weighted ``exp(sum_i s[i, head(i)])``."""
    n = s.shape[0]
    total, marginals = 0.0, torch.zeros(n, n, dtype=torch.float64)
    for heads in itertools.product(range(n), repeat=n):
        if sum(heads[i] == i for i in range(n)) != 1:
            continue
        if not all(_reaches_root(heads, i) for i in range(n)):
            continue
        weight = math.exp(sum(float(s[i, heads[i]]) for i in range(n)))
        total += weight
        for i in range(n):
            marginals[i, heads[i]] += weight
    return marginals / total


def _reaches_root(heads, i) -> bool:
    seen = set()
    while heads[i] != i:
        if i in seen:
            return False
        seen.add(i)
        i = heads[i]
    return True


def full(b, n, heads=1):
    return torch.ones(b, heads, n, n, dtype=torch.bool)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_tree_marginals_equal_brute_force_enumeration(n):
    s = 2 * torch.randn(n, n, generator=torch.Generator().manual_seed(n), dtype=torch.float64)
    got = tree_marginals(s[None, None], full(1, n))[0, 0]
    torch.testing.assert_close(got, brute_force_marginals(s), atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(got.sum(-1), torch.ones(n, dtype=torch.float64))  # a head or the root each
    assert abs(float(got.diagonal().sum()) - 1.0) < 1e-12  # exactly one root


def test_tree_marginals_ignore_padding_and_stay_finite_for_large_energies():
    gen = torch.Generator().manual_seed(0)
    s = 50 * torch.randn(2, 2, 6, 6, generator=gen, dtype=torch.float64)  # far outside exp's float range
    mask = padding_mask(torch.tensor([6, 3]), 6)
    allowed = (mask[:, None, :] & mask[:, :, None]).unsqueeze(1)
    got = tree_marginals(s, allowed)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got[1, :, :3, :3], tree_marginals(s[1:, :, :3, :3], full(1, 3, 2))[0])
    assert got[1, :, 3:].abs().sum() == 0 and got[1, :, :, 3:].abs().sum() == 0
    torch.testing.assert_close(got[0, 1], brute_force_marginals(s[0, 1]), atol=1e-9, rtol=1e-7)


def test_tree_marginals_gradcheck():
    s = torch.randn(1, 2, 4, 4, dtype=torch.float64, requires_grad=True)
    allowed = torch.ones(1, 1, 4, 4, dtype=torch.bool)
    allowed[..., 3, :] = allowed[..., :, 3] = False  # one padded word
    assert torch.autograd.gradcheck(lambda x: tree_marginals(x, allowed), (s,))


@pytest.mark.parametrize("name, fn", [("sparsemax", entmax.sparsemax), ("entmax15", entmax.entmax15)])
def test_sparse_rows_are_the_package_functions_on_the_allowed_keys(name, fn):
    gen = torch.Generator().manual_seed(1)
    s = 3 * torch.randn(2, 1, 5, 5, generator=gen)
    mask = padding_mask(torch.tensor([5, 3]), 5)
    allowed = (mask[:, None, :] & mask[:, :, None]).unsqueeze(1)
    got = normalise(s, allowed, name)
    for b, n in ((0, 5), (1, 3)):
        torch.testing.assert_close(got[b, 0, :n, :n], fn(s[b, 0, :n, :n], dim=-1))
    assert (got[1, 0, 3:] == 0).all() and (got[1, 0, :, 3:] == 0).all()
    assert (got[0] == 0).any()  # sparse: some edges exactly zero


def test_softmax_of_graph_attention_is_the_masked_softmax():
    s = torch.randn(1, 1, 4, 4)
    allowed = torch.ones(1, 1, 4, 4, dtype=torch.bool)
    allowed[..., 3] = False
    got = normalise(s, allowed, "softmax")
    torch.testing.assert_close(got[..., :3], torch.softmax(s[..., :3], dim=-1))
    assert (got[..., 3] == 0).all()
    with pytest.raises(ValueError, match="edge_weights must be one of"):
        normalise(s, allowed, "argmax")


def test_centering_removes_each_keys_mean_over_the_queries():
    gen = torch.Generator().manual_seed(2)
    s = torch.randn(1, 1, 4, 4, generator=gen, dtype=torch.float64)
    allowed = torch.ones(1, 1, 4, 4, dtype=torch.bool)
    allowed[..., 3, :] = allowed[..., :, 3] = False  # word 3 is padding
    centered = center_energy(s, allowed)
    torch.testing.assert_close(centered[0, 0, :3, :3], s[0, 0, :3, :3] - s[0, 0, :3, :3].mean(0, keepdim=True))
    static = torch.tensor([1.0, -2.0, 5.0, 0.0], dtype=torch.float64).expand(1, 1, 4, 4)  # s_ik = c_k
    rows = normalise(center_energy(static, allowed), allowed, "softmax")[0, 0, :3, :3]
    torch.testing.assert_close(rows, torch.full((3, 3), 1 / 3, dtype=torch.float64))  # nothing left to prefer


def test_parse_loss_is_the_cross_entropy_against_the_heads():
    s = torch.randn(1, 3, 3)
    allowed = torch.ones(1, 3, 3, dtype=torch.bool)
    heads = torch.tensor([[1, 1, 1]])  # word 1 the root (its own diagonal)
    expected = -(torch.log_softmax(s[0], -1)[[0, 1, 2], [1, 1, 1]]).mean()
    torch.testing.assert_close(parse_loss(s, allowed, heads), expected)
    heads = torch.tensor([[1, 1, -1]])  # word 2 has no head: left out
    expected = -(torch.log_softmax(s[0], -1)[[0, 1], [1, 1]]).mean()
    torch.testing.assert_close(parse_loss(s, allowed, heads), expected)


def test_heads_read_back_from_the_datasets_edge_types():
    head = torch.tensor([2, 2, -1, 2, 3])
    edge_index, edge_type = edge_types_from_heads(head, torch.tensor([1, 2, 0, 3, 4]))
    dense = dense_edge_types(edge_index, edge_type, max_num_nodes=6)  # (1, 6, 6), one padded slot
    mask = padding_mask(torch.tensor([5]), 6)
    assert heads_from_edge_types(dense, mask).tolist() == [[2, 2, 2, 2, 3, -1]]  # the root: itself


def test_hub_penalty_counts_column_mass_above_the_bound():
    alpha = torch.zeros(1, 1, 4, 4)
    alpha[0, 0, :, 0] = 1.0  # a star on word 0: column mass 4
    mask = torch.ones(1, 4, dtype=torch.bool)
    assert float(hub_penalty(alpha, mask, 2.0)) == pytest.approx((4 - 2) / 4)
    assert float(hub_penalty(torch.eye(4).view(1, 1, 4, 4), mask, 2.0)) == 0.0  # every column 1


def reference_layer(layer: DynamicGraphLayer, h, mask, v, edge_type):
    """The layer with its options, one sentence at a time: every energy by the literal per-pair loop
    (``tests.references``), centering by the column mean, the row maps by their definitions
    (softmax, the ``entmax`` package, brute-force tree enumeration)."""
    from tests.references import dynamic_graph_reference

    W, u = layer.energy_weight(), layer.u.reshape(1, -1)[0]
    h_new, gate = torch.zeros_like(h), torch.zeros_like(h)
    for b in range(h.shape[0]):
        nodes = mask[b].nonzero().flatten().tolist()
        s = torch.zeros(len(nodes), len(nodes), dtype=h.dtype)
        for a, i in enumerate(nodes):
            for c, k in enumerate(nodes):
                parts = [h[b, k], h[b, i]] + ([v[b, i], v[b, k]] if v is not None else [])
                if edge_type is not None:
                    parts.append(layer.edge_emb.weight[edge_type[b, i, k]])
                s[a, c] = u @ torch.tanh(W @ torch.cat(parts))
        if layer.energy_form == "centered":
            s = s - s.mean(0, keepdim=True)
        rows = {"softmax": lambda x: torch.softmax(x, -1), "sparsemax": lambda x: entmax.sparsemax(x, -1),
                "entmax15": lambda x: entmax.entmax15(x, -1), "tree": brute_force_marginals}[layer.edge_weights](s)
        g = torch.sigmoid(layer.lin_gate(h[b, nodes]))
        h_new[b, nodes] = g * (rows @ h[b, nodes]) + (1 - g) * h[b, nodes]
        gate[b, nodes] = g
    if layer.edge_weights == "softmax" and layer.energy_form == "additive":  # the literal reference agrees
        torch.testing.assert_close(h_new, dynamic_graph_reference(layer, h, mask, v, edge_type)[0])
    return h_new, gate


@pytest.mark.parametrize("edge_weights", EDGE_WEIGHTS)
@pytest.mark.parametrize("energy_form", ["additive", "centered"])
def test_layer_with_each_option_matches_the_reference(edge_weights, energy_form):
    h, mask, v, edges = make_inputs([5, 3, 1])  # a one-word sentence too
    layer = make_layer(edge_weights=edge_weights, energy_form=energy_form)
    out, alpha, gate = layer(h, mask, v, edges)
    ref, ref_gate = reference_layer(layer, h, mask, v, edges)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(gate, ref_gate)
    torch.testing.assert_close(alpha.sum(-1), mask.double())  # rows sum to 1, padding 0
    assert float(alpha[2, 0, 0].detach()) == pytest.approx(1.0)  # one word: all on itself (its root)


@pytest.mark.parametrize("edge_weights", EDGE_WEIGHTS)
def test_each_option_is_padding_invariant_and_blocks_do_not_change_it(edge_weights):
    h, mask, v, edges = make_inputs([4, 2], n=4)
    layer = make_layer(edge_weights=edge_weights, energy_form="centered")
    out, alpha, _ = layer(h, mask, v, edges)
    alone, alpha_alone, _ = layer(h[1:, :2], mask[1:, :2], v[1:, :2], edges[1:, :2, :2])
    torch.testing.assert_close(out[1, :2], alone[0])
    torch.testing.assert_close(alpha[1, :2, :2], alpha_alone[0])
    layer.block_rows = 1
    torch.testing.assert_close(layer(h, mask, v, edges)[0], out)


@pytest.mark.parametrize("edge_weights", EDGE_WEIGHTS)
def test_graph_attention_gradcheck(edge_weights):
    gen = torch.Generator().manual_seed(3)
    q, k = (torch.randn(2, 4, 6, generator=gen, dtype=torch.float64, requires_grad=True) for _ in range(2))
    u = torch.randn(2, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    values = torch.randn(2, 4, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    mask = padding_mask(torch.tensor([4, 3]), 4)

    def fn(q, k, u, values):
        out, alpha, _, _ = graph_attention(q, k, u, values, mask, edge_weights=edge_weights, energy_form="centered",
                                           block_rows=2)
        return out, alpha

    assert torch.autograd.gradcheck(fn, (q, k, u, values), atol=1e-6)


def test_softmax_through_graph_attention_equals_the_papers_path():
    """The generic path (which the regularisers use) computes the paper's layer to rounding."""
    h, mask, v, edges = make_inputs([5, 3])
    layer = make_layer()
    out, alpha, gate = layer(h, mask, v, edges)
    out2, alpha2, gate2, graph = layer(h, mask, v, edges, return_graph=True)
    torch.testing.assert_close(out2, out)
    torch.testing.assert_close(alpha2, alpha)
    assert graph.alpha.requires_grad and graph.energy.requires_grad


def test_default_options_add_no_parameters_and_unknown_ones_are_refused():
    assert set(make_layer().state_dict()) == set(make_layer(edge_weights="tree").state_dict())
    with pytest.raises(ValueError, match="edge_weights must be one of"):
        make_layer(edge_weights="argmax")
    with pytest.warns(UserWarning, match="fused kernel serves edge_weights=softmax"):
        make_layer(edge_weights="tree", impl="fused")


def test_encoder_regularisers_give_a_differentiable_loss_and_need_heads():
    h, mask, v, edges = make_inputs([5, 3], use_v=False, use_edges=False)
    heads = torch.tensor([[1, 1, 1, 2, 3], [0, 0, 1, -1, -1]])
    encoder = DynamicGraphEncoder(2, 5, energy_dim=7, parse_loss=1.0, hub_penalty=0.5).double()
    out, alphas, gates, loss = encoder.forward_regularised(h, mask, parse_heads=heads)
    torch.testing.assert_close(out, encoder(h, mask)[0])
    graph = encoder.layers[0](h, mask, return_graph=True)[3]
    second = encoder.layers[1](encoder.layers[0](h, mask)[0], mask, return_graph=True)[3]
    expected = (parse_loss(graph.energy[:, 0], graph.allowed[:, 0], heads)
                + 0.25 * hub_penalty(graph.alpha, mask, 2.0) + 0.25 * hub_penalty(second.alpha, mask, 2.0))
    torch.testing.assert_close(loss, expected)
    loss.backward()
    assert encoder.layers[0].u.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="needs the parse's heads"):
        encoder.forward_regularised(h, mask)


def test_a_run_saved_before_the_edge_weight_keys_reads_as_the_papers_layer():
    """A config written by the release before these keys (no ``edge_weights`` ... ``hub_penalty``) reads
    back as today's default, whose layer runs the unchanged softmax path (same parameters, same output)."""
    from cn3.config import from_dict, to_dict
    from cn3.sentence.config import RunConfig

    saved = to_dict(RunConfig())
    for key in ("edge_weights", "energy_form", "parse_loss", "hub_penalty"):
        del saved["model"][key]
    model = from_dict(RunConfig, saved).model
    assert (model.edge_weights, model.energy_form, model.parse_loss, model.hub_penalty) == ("softmax", "additive",
                                                                                            0.0, 0.0)
    h, mask, v, edges = make_inputs([5, 3])
    layer = make_layer()
    from cn3.layers.blockwise_energy import additive_attention

    query, key = layer.lin_hi(h) + layer.lin_vi(v), layer.lin_hk(h) + layer.lin_vk(v)
    context, alpha = additive_attention(query, key, layer.u, h, mask, mask, layer.lin_edge(layer.edge_emb.weight),
                                        edges)
    out, got_alpha, _ = layer(h, mask, v, edges)
    assert torch.equal(got_alpha, alpha)  # bit for bit the blockwise softmax path


@pytest.mark.parametrize("edge_weights", ["entmax15", "tree"])
def test_the_regularised_encoder_compiles_and_matches_eager(edge_weights):
    """The compiled training step traces the options (torch.compile on the CPU, aot_eager: what
    inductor would receive)."""
    h, mask, _, _ = make_inputs([5, 3], use_v=False, use_edges=False)
    h = h.float()
    heads = torch.tensor([[1, 1, 1, 2, 3], [0, 0, 1, -1, -1]])
    torch.manual_seed(0)
    encoder = DynamicGraphEncoder(1, 5, energy_dim=6, parse_loss=1.0, hub_penalty=0.5, edge_weights=edge_weights,
                                  energy_form="centered")

    def step(h):
        out, _, _, loss = encoder.forward_regularised(h, mask, parse_heads=heads)
        return out.sum() + loss

    compiled = torch.compile(step, backend="aot_eager")
    torch.testing.assert_close(compiled(h), step(h))
