"""CN3Conv: against the loops of its equations over each node's incoming edges, self-loops as GATv2Conv,
attention weights, gradients, torch.compile, and the KarateClub example learning."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
import torch
from torch_geometric.utils import add_self_loops

from cn3.nn import CN3Conv
from tests.gradients import assert_gradients_match_finite_differences
from tests.nn.cn3_loops import edge_loops

REPO = Path(__file__).resolve().parents[2]
#: 6 nodes: node 5 has no incoming edge, node 1 two parallel ones, node 3 a self-loop.
EDGE_INDEX = torch.tensor([[0, 2, 2, 3, 4, 1, 3, 0], [1, 1, 1, 2, 2, 3, 3, 4]])


def _inputs(seed: int = 0, features: int = 6, edge_dim: int = 2, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(6, features, generator=gen, dtype=dtype)
    edge_attr = torch.randn(EDGE_INDEX.shape[1], edge_dim, generator=gen, dtype=dtype)
    edge_type = torch.randint(0, 3, (EDGE_INDEX.shape[1],), generator=gen)
    return x, edge_attr, edge_type


@pytest.mark.parametrize("heads", [1, 2])
@pytest.mark.parametrize("concat", [True, False])
def test_repr_and_shapes(heads, concat):
    conv = CN3Conv(16, 32, heads=heads, concat=concat)
    assert str(conv) == f"CN3Conv(16, 32, heads={heads})"
    x = torch.randn(6, 16)
    out, (edge_index, alpha) = conv(x, EDGE_INDEX, return_attention_weights=True)
    assert out.shape == (6, heads * 32 if concat else 32)
    assert edge_index.shape == (2, 7 + 6) and alpha.shape == (13, heads)  # the self-loop replaced by 6 loops
    assert torch.allclose(torch.zeros(6, heads).index_add_(0, edge_index[1], alpha), torch.ones(6, heads))


@pytest.mark.parametrize("heads, concat, gate, edges", [
    (1, True, True, "none"), (2, True, True, "both"), (2, False, True, "types"), (3, True, False, "attr")])
def test_matches_the_loops(heads, concat, gate, edges):
    """Without added self-loops: output and weights equal the equations summed over each node's
    incoming edges one scalar at a time; node 5, with no incoming edge, keeps its gated input."""
    torch.manual_seed(0)
    conv = CN3Conv(6, 4, heads=heads, concat=concat, gate=gate, energy_dim=3 * heads, add_self_loops=False,
                   edge_types=3 if edges in ("types", "both") else 0,
                   edge_dim=2 if edges in ("attr", "both") else None).double()
    torch.nn.init.normal_(conv.bias)
    x, edge_attr, edge_type = _inputs()
    edge_attr = edge_attr if conv.edge_dim else None
    edge_type = edge_type if conv.edge_types else None
    out, (edge_index, alpha) = conv(x, EDGE_INDEX, edge_attr, edge_type, return_attention_weights=True)
    ref_out, ref_alpha = edge_loops(conv, x, EDGE_INDEX, edge_attr, edge_type)
    assert torch.equal(edge_index, EDGE_INDEX)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(alpha, ref_alpha)


@pytest.mark.parametrize("fill_value", ["mean", 0.5])
def test_self_loops_as_gatv2(fill_value):
    """``add_self_loops``: the graph's own loops removed, one per node appended with type 0 and
    ``fill_value`` features; the same as adding them by hand with PyG's utilities."""
    torch.manual_seed(0)
    conv = CN3Conv(6, 4, heads=2, edge_types=3, edge_dim=2, fill_value=fill_value).double()
    x, edge_attr, edge_type = _inputs()
    out = conv(x, EDGE_INDEX, edge_attr, edge_type)
    keep = EDGE_INDEX[0] != EDGE_INDEX[1]
    by_hand, attr = add_self_loops(EDGE_INDEX[:, keep], edge_attr[keep], fill_value=fill_value, num_nodes=6)
    types = torch.cat([edge_type[keep], torch.zeros(6, dtype=torch.long)])
    conv.add_self_loops = False
    torch.testing.assert_close(out, conv(x, by_hand, attr, types))
    ref_out, _ = edge_loops(conv, x, by_hand, attr, types)
    torch.testing.assert_close(out, ref_out)


def test_one_dimensional_edge_attr():
    conv = CN3Conv(6, 4, edge_dim=1).double()
    x, edge_attr, _ = _inputs(edge_dim=1)
    torch.testing.assert_close(conv(x, EDGE_INDEX, edge_attr[:, 0]), conv(x, EDGE_INDEX, edge_attr))


def test_gradcheck():
    torch.manual_seed(0)
    conv = CN3Conv(6, 2, heads=2, edge_types=3, edge_dim=2, energy_dim=4).double()
    x, edge_attr, edge_type = _inputs()
    x.requires_grad_(True)
    edge_attr.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x_, a_: conv(x_, EDGE_INDEX, a_, edge_type), (x, edge_attr))
    assert_gradients_match_finite_differences(
        conv, lambda: (conv(x.detach(), EDGE_INDEX, edge_attr.detach(), edge_type) ** 2).sum())


@pytest.mark.parametrize("heads, bipartite", [(1, False), (3, True)])
def test_bag_kernels_equal_pyg_propagate(heads, bipartite):
    """The eager CPU path (embedding-bag sums over the edges grouped by target and by source, backward by
    hand) against the gathers and PyG's ``propagate`` it replaces, which a propagate hook brings back: the
    same output, attention weights and gradients (a loss on both) of every parameter and input, on a graph
    with parallel edges, edges in no target order and a target without incoming edges (node 5, or node 0
    of the bipartite targets)."""
    torch.manual_seed(0)
    conv = CN3Conv(6, 2, heads=heads, edge_types=3, edge_dim=2, add_self_loops=False).double()
    torch.nn.init.normal_(conv.bias)
    x, edge_attr, edge_type = _inputs()
    x_dst = x[:5].clone() if bipartite else x  # targets 1..4 of EDGE_INDEX, target 0 without edges
    leaves = [x, edge_attr] + ([x_dst] if bipartite else [])
    for leaf in leaves:
        leaf.requires_grad_(True)
    mix = torch.randn(EDGE_INDEX.shape[1], heads, dtype=torch.float64)
    edge_index = EDGE_INDEX[:, [5, 2, 7, 0, 3, 6, 1, 4]]  # targets 3 1 4 1 2 3 1 2

    def run():
        out, (_, alpha) = conv((x, x_dst) if bipartite else x, edge_index, edge_attr, edge_type,
                               return_attention_weights=True)
        loss = out.square().sum() + (alpha * mix).sum()
        return out, alpha, torch.autograd.grad(loss, [*conv.parameters(), *leaves])

    assert conv._bags_apply(x)
    bags = run()
    handle = conv.register_propagate_forward_pre_hook(lambda module, inputs: None)
    assert not conv._bags_apply(x)
    reference = run()
    handle.remove()
    torch.testing.assert_close(bags[0], reference[0])
    torch.testing.assert_close(bags[1], reference[1])
    for grad, expected in zip(bags[2], reference[2], strict=True):
        torch.testing.assert_close(grad, expected)
    assert reference[0][0 if bipartite else 5].abs().sum() > 0  # a target without edges keeps (1 - g) h + b


@pytest.mark.parametrize("bipartite", [False, True])
def test_bag_kernels_second_derivatives(bipartite):
    """The hand-written backward of the eager CPU path is itself differentiable (gradient penalties):
    gradgradcheck on unsorted, parallel edges."""
    torch.manual_seed(0)
    conv = CN3Conv(6, 2, heads=2, edge_types=3, edge_dim=2, energy_dim=4, add_self_loops=False).double()
    x, edge_attr, edge_type = _inputs()
    x.requires_grad_(True)
    edge_attr.requires_grad_(True)
    edge_index = EDGE_INDEX[:, [5, 2, 7, 0, 3, 6, 1, 4]]
    assert conv._bags_apply(x)
    assert torch.autograd.gradgradcheck(
        lambda x_, a_: conv((x_, x_[:5]) if bipartite else x_, edge_index, a_, edge_type), (x, edge_attr))


def _compile_inputs():
    """Self-loops added outside the layer: removing the graph's own has a data-dependent size."""
    x, edge_attr, edge_type = _inputs(dtype=torch.float32)
    keep = EDGE_INDEX[0] != EDGE_INDEX[1]
    edge_index, edge_attr = add_self_loops(EDGE_INDEX[:, keep], edge_attr[keep], fill_value="mean", num_nodes=6)
    return x, edge_index, edge_attr, torch.cat([edge_type[keep], torch.zeros(6, dtype=torch.long)])


def test_compiles_without_graph_breaks():
    torch.manual_seed(0)
    conv = CN3Conv(6, 4, heads=2, edge_types=3, edge_dim=2, add_self_loops=False).eval()
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(conv)(*_compile_inputs())
    assert explanation.graph_break_count == 0, explanation.break_reasons
    torch._dynamo.reset()


@pytest.mark.slow  # inductor compiles forward and backward: ~20-40 s on two cores
def test_inductor_gives_the_same_output_and_gradients():
    torch.manual_seed(0)
    conv = CN3Conv(6, 4, heads=2, edge_types=3, edge_dim=2, add_self_loops=False).eval()
    inputs = _compile_inputs()
    torch._dynamo.reset()
    compiled = torch.compile(conv, fullgraph=True)
    expected, out = conv(*inputs), compiled(*inputs)
    torch.testing.assert_close(out, expected)
    grad = torch.autograd.grad(out.sum(), conv.att)[0]
    torch.testing.assert_close(grad, torch.autograd.grad(expected.sum(), conv.att)[0])
    torch._dynamo.reset()


def test_errors():
    with pytest.raises(ValueError, match="heads must be >= 1"):
        CN3Conv(4, 4, heads=0)
    with pytest.raises(ValueError, match="dropout must be in"):
        CN3Conv(4, 4, dropout=1.0)
    conv = CN3Conv(4, 4, edge_dim=2)
    with pytest.raises(ValueError, match="edge_dim=2; edge_attr is missing"):
        conv(torch.randn(6, 4), EDGE_INDEX)


def test_karate_example_learns():
    """``examples/cn3_karate.py`` (the docs' example): from 4 labelled members it labels most of the
    other 30 (0.80 with seed 0; an untrained model gets about a quarter)."""
    example = runpy.run_path(str(REPO / "examples" / "cn3_karate.py"))
    assert example["train"](epochs=0, verbose=False) < 0.5
    assert example["train"](epochs=200, seed=0, verbose=False) >= 0.75
