"""DenseCN3Conv: against the loops of its equations, against CN3Conv (complete and sparse graphs, edge
types and features), against DynamicGraphLayer, padding, gradients, torch.compile, the fused kernel's
routing, and learning on KarateClub."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.datasets import KarateClub
from torch_geometric.utils import to_dense_adj

from cn3.layers import dynamic_graph
from cn3.layers.dynamic_graph import DynamicGraphLayer
from cn3.nn import CN3Conv, DenseCN3Conv
from tests.gradients import assert_gradients_match_finite_differences
from tests.nn.cn3_loops import dense_loops
from tests.triton_interpreter import run_interpreter_cases

MASK = torch.tensor([[True] * 5, [True, True, True, False, False]])  # (2, 5): the second graph has 3 nodes


def _inputs(seed: int = 0, features: int = 6, edge_types: int = 3, edge_dim: int = 2, dtype=torch.float64):
    """x (2, 5, F), adj (2, 5, 5) without self-loops, edge_type (2, 5, 5), edge_attr (2, 5, 5, edge_dim)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 5, features, generator=gen, dtype=dtype)
    adj = (torch.rand(2, 5, 5, generator=gen) > 0.5).float() * (1 - torch.eye(5))
    adj[0, 2] = 0.0  # node 2 of graph 0 has no neighbour
    edge_type = torch.randint(0, edge_types, (2, 5, 5), generator=gen)
    edge_attr = torch.randn(2, 5, 5, edge_dim, generator=gen, dtype=dtype)
    return x, adj, edge_type, edge_attr


@pytest.mark.parametrize("heads", [1, 2])
@pytest.mark.parametrize("concat", [True, False])
def test_repr_and_shapes(heads, concat):
    conv = DenseCN3Conv(16, 32, heads=heads, concat=concat)
    assert str(conv) == f"DenseCN3Conv(16, 32, heads={heads})"
    width = heads * 32 if concat else 32
    assert conv(torch.randn(3, 7, 16)).shape == (3, 7, width)
    out, alpha = conv(torch.randn(7, 16), return_attention_weights=True)  # one graph: 2-D in, 2-D out
    assert out.shape == (7, width) and alpha.shape == (heads, 7, 7)
    assert torch.allclose(alpha.sum(-1), torch.ones(heads, 7))


@pytest.mark.parametrize("heads, concat, gate, project, use_adj, self_loops", [
    (1, True, True, None, False, True), (2, True, True, None, True, True), (2, False, True, True, True, False),
    (3, True, False, None, True, True), (1, True, True, False, True, False)])
def test_matches_the_loops(heads, concat, gate, project, use_adj, self_loops):
    """Output and weights equal the equations computed one scalar at a time, padding included."""
    torch.manual_seed(0)
    out_channels = 6 if project is False else 4  # no projection: in = heads * out
    conv = DenseCN3Conv(6, out_channels, heads=heads, edge_types=3, edge_dim=2, energy_dim=3 * heads,
                        concat=concat, gate=gate, project=project, add_self_loops=self_loops).double()
    torch.nn.init.normal_(conv.bias)  # a nonzero bias, so that padded nodes' zeros mean something
    x, adj, edge_type, edge_attr = _inputs()
    adj = adj if use_adj else None
    out, alpha = conv(x, adj, MASK, edge_type=edge_type, edge_attr=edge_attr, return_attention_weights=True)
    ref_out, ref_alpha = dense_loops(conv, x, MASK, adj, edge_type, edge_attr)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(alpha, ref_alpha)


def test_padded_nodes_give_zero_and_do_not_change_real_ones():
    torch.manual_seed(0)
    conv = DenseCN3Conv(6, 4, heads=2, edge_types=3, edge_dim=2).double()
    torch.nn.init.normal_(conv.bias)
    x, adj, edge_type, edge_attr = _inputs()
    out = conv(x, adj, MASK, edge_type=edge_type, edge_attr=edge_attr)
    assert out[1, 3:].abs().sum() == 0
    alone = conv(x[1, :3], adj[1, :3, :3], edge_type=edge_type[1, :3, :3], edge_attr=edge_attr[1, :3, :3])  # (3, 8)
    torch.testing.assert_close(out[1, :3], alone)
    garbage = x.clone()
    garbage[1, 3:] = 1e3  # padded features must not leak into real nodes
    torch.testing.assert_close(conv(garbage, adj, MASK, edge_type=edge_type, edge_attr=edge_attr), out)


def test_a_node_without_keys_keeps_its_gated_input():
    """``x'_i = (1 - g_i) h_i + bias`` when ``adj`` gives node ``i`` no key and no self-loop."""
    torch.manual_seed(0)
    conv = DenseCN3Conv(8, 8, add_self_loops=False).double()
    x = torch.randn(4, 8, dtype=torch.float64)
    adj = torch.ones(4, 4)
    adj[2] = 0.0
    out, alpha = conv(x, adj=adj, return_attention_weights=True)
    gate = torch.sigmoid(conv.lin_gate(x[2]))
    torch.testing.assert_close(out[2], (1 - gate) * x[2] + conv.bias)
    assert alpha[:, 2].abs().sum() == 0


def test_no_adj_is_the_complete_graph():
    torch.manual_seed(0)
    conv = DenseCN3Conv(6, 3, heads=2, edge_types=3).double()
    x, _, edge_type, _ = _inputs(edge_dim=2)
    ones = torch.ones(2, 5, 5)
    torch.testing.assert_close(conv(x, mask=MASK, edge_type=edge_type), conv(x, ones, MASK, edge_type=edge_type))
    torch.testing.assert_close(conv(x, mask=MASK, edge_type=edge_type), conv(x, ones.bool(), MASK, edge_type=edge_type))


def _to_sparse(x, mask, adj, edge_type, edge_attr):
    """The dense batch as one PyG graph: node features, edge_index (sources k -> targets i where
    ``adj[b, i, k]``), edge_attr and edge_type per edge, and the real nodes' flat positions."""
    offsets = torch.cumsum(mask.sum(1), 0) - mask.sum(1)  # (B,)
    flat = (torch.cumsum(mask.flatten(), 0) - 1).view(mask.shape)  # (B, N) position among real nodes
    b, i, k = (adj != 0).nonzero(as_tuple=True)
    real = mask[b, i] & mask[b, k]
    b, i, k = b[real], i[real], k[real]
    edge_index = torch.stack([flat[b, k], flat[b, i]])
    assert torch.equal(flat[mask], torch.arange(int(mask.sum()))) and offsets.shape == (mask.shape[0],)
    return x[mask], edge_index, edge_attr[b, i, k], edge_type[b, i, k]


@pytest.mark.parametrize("heads, concat", [(1, True), (2, True), (2, False)])
@pytest.mark.parametrize("graph", ["complete", "sparse"])
def test_dense_equals_sparse(heads, concat, graph):
    """Copied weights, the same graph as ``adj`` and as ``edge_index``, edge types and features. The
    self-loops CN3Conv adds carry type 0 and the mean of the node's incoming features: the dense
    graph gets the same on its diagonal."""
    torch.manual_seed(0)
    dense = DenseCN3Conv(6, 4, heads=heads, edge_types=3, edge_dim=2, concat=concat).double().eval()
    sparse = CN3Conv(6, 4, heads=heads, edge_types=3, edge_dim=2, concat=concat).double().eval()
    sparse.load_state_dict(dense.state_dict())
    x, adj, edge_type, edge_attr = _inputs()
    if graph == "complete":
        adj = torch.ones(2, 5, 5) - torch.eye(5)
    adj = adj * MASK[:, :, None] * MASK[:, None, :]
    loops = torch.eye(5, dtype=torch.bool)
    edge_type = edge_type.masked_fill(loops, 0)
    mean = (edge_attr * adj[..., None]).sum(2) / adj.sum(2, keepdim=True).clamp(min=1)  # (B, N, D)
    edge_attr = torch.where(loops[..., None], mean[:, :, None, :], edge_attr)
    out = dense(x, None if graph == "complete" else adj, MASK, edge_type=edge_type, edge_attr=edge_attr)
    x_flat, edge_index, attr_flat, type_flat = _to_sparse(x, MASK, adj, edge_type, edge_attr)
    torch.testing.assert_close(sparse(x_flat, edge_index, attr_flat, type_flat), out[MASK])
    assert out[~MASK].abs().sum() == 0


def test_the_paper_layer_is_dynamic_graph_layer():
    """With ``in = out``, one head and no projection the layer is the sentence models'
    :class:`DynamicGraphLayer` (its edge embedding ``W_5 e_t`` folded into one table)."""
    torch.manual_seed(0)
    layer = DynamicGraphLayer(8, n_edge_types=3, edge_dim=5, energy_dim=6).double()
    conv = DenseCN3Conv(8, 8, edge_types=3, energy_dim=6, bias=False).double()
    with torch.no_grad():
        conv.lin_query.weight.copy_(layer.lin_hi.weight)
        conv.lin_key.weight.copy_(layer.lin_hk.weight)
        conv.edge_emb.weight.copy_(layer.lin_edge(layer.edge_emb.weight))
        conv.att.copy_(layer.u.view(1, -1))
        conv.lin_gate.load_state_dict(layer.lin_gate.state_dict())
    x, _, edge_type, _ = _inputs(features=8)
    h, alpha, _ = layer(x, MASK, edge_type=edge_type)
    out, conv_alpha = conv(x, mask=MASK, edge_type=edge_type, return_attention_weights=True)
    torch.testing.assert_close(out, h)
    torch.testing.assert_close(conv_alpha.squeeze(1), alpha)


def test_gradcheck():
    """Gradients w.r.t. the input and the edge features (torch.autograd.gradcheck) and every parameter
    (central differences), float64, with adj, padding, heads and edge types."""
    torch.manual_seed(0)
    conv = DenseCN3Conv(6, 2, heads=2, edge_types=3, edge_dim=2, energy_dim=4).double()
    x, adj, edge_type, edge_attr = _inputs()
    x.requires_grad_(True)
    edge_attr.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda x_, a_: conv(x_, adj, MASK, edge_type=edge_type, edge_attr=a_), (x, edge_attr))
    assert_gradients_match_finite_differences(
        conv, lambda: (conv(x.detach(), adj, MASK, edge_type=edge_type, edge_attr=edge_attr.detach()) ** 2).sum())


def test_compiles_without_graph_breaks():
    torch.manual_seed(0)
    conv = DenseCN3Conv(6, 4, heads=2, edge_types=3, edge_dim=2).eval()
    x, adj, edge_type, edge_attr = _inputs(dtype=torch.float32)
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(conv)(x, adj, MASK, edge_type=edge_type, edge_attr=edge_attr)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    torch._dynamo.reset()


@pytest.mark.slow  # inductor compiles forward and backward: ~20-40 s on two cores
def test_inductor_gives_the_same_output_and_gradients():
    torch.manual_seed(0)
    conv = DenseCN3Conv(6, 4, heads=2, edge_types=3, edge_dim=2).eval()
    x, adj, edge_type, edge_attr = _inputs(dtype=torch.float32)
    torch._dynamo.reset()
    compiled = torch.compile(conv, fullgraph=True)
    expected = conv(x, adj, MASK, edge_type=edge_type, edge_attr=edge_attr)
    out = compiled(x, adj, MASK, edge_type=edge_type, edge_attr=edge_attr)
    torch.testing.assert_close(out, expected)
    grad = torch.autograd.grad(out.sum(), conv.att)[0]
    torch.testing.assert_close(grad, torch.autograd.grad(expected.sum(), conv.att)[0])
    torch._dynamo.reset()


def test_fused_path_routes_to_the_kernel_and_falls_back(monkeypatch):
    """``fused`` (what ``auto`` picks on CUDA) calls :func:`fused_additive_attention` with the layer's
    tensors; with ``adj`` or ``edge_attr``, which the kernel does not take, the PyTorch path runs."""
    from cn3.layers import fused_energy

    calls = []

    def spy(query, key, u, values, key_mask, query_mask, edge_vecs, edge_type, need_alpha):
        calls.append((u.shape, edge_type is not None, key_mask is query_mask, need_alpha))
        return values.clone(), None

    monkeypatch.setattr(fused_energy, "fused_additive_attention", spy)
    conv = DenseCN3Conv(6, 3, heads=2, edge_types=3, impl="fused").double()
    x, adj, edge_type, edge_attr = _inputs()
    conv(x, mask=MASK, edge_type=edge_type)
    assert calls == [((2, 3), True, True, False)]
    reference = DenseCN3Conv(6, 3, heads=2, edge_types=3, impl="blockwise").double()
    reference.load_state_dict(conv.state_dict())
    torch.testing.assert_close(conv(x, adj, MASK, edge_type=edge_type), reference(x, adj, MASK, edge_type=edge_type))
    with_features = DenseCN3Conv(6, 3, heads=2, edge_dim=2, impl="fused").double()
    expected = with_features(x, mask=MASK, edge_attr=edge_attr)
    with_features.impl = "blockwise"
    torch.testing.assert_close(expected, with_features(x, mask=MASK, edge_attr=edge_attr))
    assert len(calls) == 1
    monkeypatch.setattr(dynamic_graph, "fused_available", lambda: True)
    assert dynamic_graph.choose_impl("auto", torch.device("cuda"), 3, 5) == "fused"


@pytest.mark.slow  # the fused kernel in Triton's interpreter, one program at a time
def test_fused_kernel_in_the_interpreter():
    """``tests/nn/fused_cases.py``: the layer on the fused kernel equals the blockwise path."""
    run_interpreter_cases("tests/nn/fused_cases.py")


def test_errors():
    with pytest.raises(ValueError, match="energy_dim=5 must be a positive multiple of heads=2"):
        DenseCN3Conv(4, 4, heads=2, energy_dim=5)
    with pytest.raises(ValueError, match="project=False"):
        DenseCN3Conv(4, 8, project=False)
    with pytest.raises(ValueError, match="impl must be one of"):
        DenseCN3Conv(4, 4, impl="cuda")
    conv = DenseCN3Conv(4, 4, edge_types=2)
    with pytest.raises(ValueError, match="edge_types=2; edge_type is missing"):
        conv(torch.randn(3, 4))
    with pytest.raises(ValueError, match="edge_dim=None; edge_attr is unexpected"):
        conv(torch.randn(3, 4), edge_type=torch.zeros(3, 3, dtype=torch.long), edge_attr=torch.randn(3, 3, 1))


def test_learns_karate_club_with_adj():
    """Two dense layers on KarateClub's adjacency, trained on its 4 labelled members, label most of
    the other 30 (0.83 with this seed; an untrained model gets about a quarter)."""
    torch.manual_seed(0)
    data = KarateClub()[0]
    adj = to_dense_adj(data.edge_index, max_num_nodes=data.num_nodes)[0]  # (34, 34)
    conv1, conv2 = DenseCN3Conv(data.num_features, 8, heads=2), DenseCN3Conv(16, 4)
    optimizer = torch.optim.Adam([*conv1.parameters(), *conv2.parameters()], lr=0.01, weight_decay=5e-4)

    def accuracy() -> float:
        with torch.no_grad():
            predicted = conv2(F.elu(conv1(data.x, adj=adj)), adj=adj).argmax(-1)
        return (predicted[~data.train_mask] == data.y[~data.train_mask]).float().mean().item()

    before = accuracy()
    for _ in range(200):
        optimizer.zero_grad()
        logits = conv2(F.elu(conv1(data.x, adj=adj)), adj=adj)
        F.cross_entropy(logits[data.train_mask], data.y[data.train_mask]).backward()
        optimizer.step()
    assert accuracy() >= 0.75 > before + 0.3


def test_parameter_names_and_shapes_are_the_checkpoint_layout():
    """The names and shapes a saved ``state_dict`` holds (older checkpoints load), the same in the sparse layer."""
    dense = DenseCN3Conv(6, 4, heads=2, edge_types=3, edge_dim=2, energy_dim=6)
    expected = [("att", (2, 3)), ("bias", (8,)), ("lin.weight", (8, 6)), ("lin_query.weight", (6, 6)),
                ("lin_key.weight", (6, 6)), ("edge_emb.weight", (3, 6)), ("lin_edge.weight", (6, 2)),
                ("lin_gate.weight", (8, 6)), ("lin_gate.bias", (8,))]
    assert [(name, tuple(t.shape)) for name, t in dense.state_dict().items()] == expected
    for kwargs in ({}, {"project": True}, {"gate": False, "bias": False}, {"concat": False, "heads": 4},
                   {"edge_types": 2, "edge_dim": 3}):
        args = {"in_channels": 8, "out_channels": 2, "heads": 4, **kwargs}
        dense_shapes = {name: t.shape for name, t in DenseCN3Conv(**args).state_dict().items()}
        sparse_shapes = {name: t.shape for name, t in CN3Conv(**args).state_dict().items()}
        assert dense_shapes == sparse_shapes, kwargs
