"""cn3.nn as a PyG user calls it: DenseGATConv's argument order, every adjacency layout PyG accepts
(checked with PyG's own ``torch_geometric.testing`` helpers), bipartite and lazy layers, ``to_hetero``,
the edge-weight options of both layers against each other, attention weights a loss can train, node
permutations, ``torch.compile(fullgraph=True)`` and bf16."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch_geometric.nn import to_hetero
from torch_geometric.testing import assert_module, onlyLinux, withCUDA
from torch_geometric.typing import WITH_TORCH_SPARSE
from torch_geometric.utils import to_dense_adj

from cn3.nn import CN3Conv, DenseCN3Conv

#: 6 nodes, no duplicate edges (a sparse layout would merge them), node 5 without incoming edges.
EDGE_INDEX = torch.tensor([[0, 2, 3, 4, 1, 3, 0, 5], [1, 1, 2, 2, 3, 3, 4, 0]])
MASK = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])


def _graph(dtype=torch.float64):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 8, generator=gen, dtype=dtype)
    adj = (torch.rand(2, 5, 5, generator=gen) > 0.4).to(dtype)
    return x, adj


# ---------------------------------------------------------------- DenseCN3Conv's signature


def test_dense_takes_dense_gat_conv_order_and_add_loop():
    torch.manual_seed(0)
    conv = DenseCN3Conv(8, 4, heads=2).double()
    x, adj = _graph()
    out = conv(x, adj, MASK)
    assert torch.equal(out, conv(x, adj=adj, mask=MASK))  # the old keyword names
    assert torch.equal(out, conv(x, adj, MASK, True))  # add_loop=True is the constructor's default
    no_loops = conv(x, adj, MASK, add_loop=False)
    conv.add_self_loops = False
    assert torch.equal(no_loops, conv(x, adj, MASK))
    assert not torch.allclose(no_loops, out)


def test_dense_detects_the_old_order_and_refuses_bad_shapes():
    torch.manual_seed(0)
    conv = DenseCN3Conv(8, 4, heads=2).double()
    x, adj = _graph()
    with pytest.warns(FutureWarning, match=r"old order \(x, mask, adj\)"):
        assert torch.equal(conv(x, MASK, adj), conv(x, adj, MASK))
    with pytest.warns(FutureWarning):
        assert torch.equal(conv(x, MASK), conv(x, mask=MASK))  # what made (N, N, C) tensors before
    with pytest.warns(FutureWarning):
        assert torch.equal(conv(x[1], MASK[1]), conv(x[1], mask=MASK[1]))  # one graph: (N,) mask
    with pytest.raises(ValueError, match=r"adj must be \(2, 5, 5\) or \(5, 5\) .* got \(2, 5\)"):
        conv(x, MASK.double())  # a float (B, N) second argument is neither
    with pytest.raises(ValueError, match=r"mask must be \(2, 5\) .* got \(5,\)"):
        conv(x, adj, MASK[0])
    with pytest.raises(ValueError, match=r"x has 7 features, the layer was built with in_channels=8"):
        conv(x[..., :7])
    with pytest.raises(ValueError, match=r"x must be \(B, N, F\) or \(N, F\)"):
        conv(x[None])
    with pytest.raises(ValueError, match="keyword-only"):
        conv(x, adj, MASK, torch.zeros(2, 5, 5, dtype=torch.long))
    square = torch.randn(5, 5, 8, dtype=torch.float64)  # B == N: a bool (N, N) is read as adj
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        conv(square, adj[0].bool())


def test_dense_edge_options_and_tree_needs_the_complete_graph():
    torch.manual_seed(0)
    x, adj = _graph()
    for weights in ("sparsemax", "entmax15", "tree"):
        for form in ("additive", "centered"):
            conv = DenseCN3Conv(8, 4, heads=2, edge_weights=weights, energy_form=form).double()
            assert weights in repr(conv)
            _, alpha = conv(x, mask=MASK, return_attention_weights=True)
            torch.testing.assert_close(alpha.sum(-1)[:, :, :3], torch.ones(2, 2, 3, dtype=torch.float64))
    tree = DenseCN3Conv(8, 4, edge_weights="tree").double()
    with pytest.raises(ValueError, match="edge_weights='tree' takes the complete graph"):
        tree(x, adj, MASK)
    tree(x, torch.ones(5, 5, dtype=torch.float64), MASK)  # complete: fine
    with pytest.raises(ValueError, match="edge_weights must be one of"):
        DenseCN3Conv(8, 4, edge_weights="relu")


# ---------------------------------------------------------------- CN3Conv's inputs


@pytest.mark.parametrize("edges", ["none", "attr"])
def test_sparse_layouts_with_pyg_assert_module(edges):
    """PyG's helper: output size, edge-permutation invariance and torch_sparse / CSC / COO ``adj_t``
    (torch_sparse when installed) giving the output of ``edge_index``."""
    torch.manual_seed(0)
    x = torch.randn(6, 8, dtype=torch.float64)
    conv = CN3Conv(8, 4, heads=2, edge_dim=1 if edges == "attr" else None).double()
    if edges == "attr":  # the sparse tensors' values (ones, as assert_module builds them) are the features
        kwargs = {"edge_attr": torch.ones(EDGE_INDEX.shape[1], 1, dtype=torch.float64)}
        x_exp = conv(x, EDGE_INDEX, **kwargs)
        adj_t = torch.sparse_coo_tensor(EDGE_INDEX.flip(0), torch.ones(8, 1, dtype=torch.float64), (6, 6, 1))
        torch.testing.assert_close(conv(x, adj_t.coalesce()), x_exp)
        return
    assert_module(conv, x, EDGE_INDEX, expected_size=(6, 8))


def test_sparse_layouts_torch_sparse():
    if not WITH_TORCH_SPARSE:
        pytest.skip("torch_sparse is not installed (the optional SparseTensor layout)")
    from torch_geometric.typing import SparseTensor

    conv = CN3Conv(8, 4, heads=2).double()
    x = torch.randn(6, 8, dtype=torch.float64)
    adj_t = SparseTensor.from_edge_index(EDGE_INDEX, sparse_sizes=(6, 6)).t()
    torch.testing.assert_close(conv(x, adj_t), conv(x, EDGE_INDEX))


def test_sparse_refuses_what_it_cannot_read():
    conv = CN3Conv(8, 4)
    with pytest.raises(ValueError, match=r"x must be \(N, 8\)"):
        conv(torch.randn(6, 7), EDGE_INDEX)
    with pytest.raises(ValueError, match="edge_index must be a"):
        conv(torch.randn(6, 8), [[0, 1], [1, 0]])
    with pytest.raises(ValueError, match="DenseCN3Conv serves it"):
        CN3Conv(8, 4, edge_weights="tree")


def test_bipartite_and_lazy_with_pyg_assert_module():
    """``(x_src, x_dst)`` with ``size``, ``in_channels=-1``: the same as the dense layer on the
    ``(N_t, N_s)`` block of the adjacency with sources and targets as separate nodes."""
    torch.manual_seed(0)
    conv = CN3Conv(-1, 4, heads=2, add_self_loops=False).double()
    x_src, x_dst = torch.randn(6, 8, dtype=torch.float64), torch.randn(3, 8, dtype=torch.float64)
    edge_index = EDGE_INDEX[:, EDGE_INDEX[1] < 3]
    out = assert_module(conv, (x_src, x_dst), edge_index, size=(6, 3), expected_size=(3, 8))
    assert conv.lin_query.weight.shape == (8, 8)  # materialised at the first call
    dense = DenseCN3Conv(8, 4, heads=2, project=True).double()  # a lazy layer always projects
    dense.load_state_dict(conv.state_dict())
    nodes = torch.cat([x_dst, x_src])  # targets 0..2, then sources 3..8
    adj = torch.zeros(9, 9, dtype=torch.float64)
    adj[edge_index[1], edge_index[0] + 3] = 1
    torch.testing.assert_close(dense(nodes, adj, add_loop=False)[:3], out)


def test_to_hetero():
    """A two-type graph (papers cite papers, authors write papers) through ``to_hetero``: the bipartite
    edge type runs the bipartite path; outputs of the right shapes, gradients to every parameter."""
    from torch_geometric.data import HeteroData

    torch.manual_seed(0)
    data = HeteroData()
    data["paper"].x, data["author"].x = torch.randn(5, 8), torch.randn(4, 8)
    data["paper", "cites", "paper"].edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])
    data["author", "writes", "paper"].edge_index = torch.tensor([[0, 1, 2, 3, 3], [0, 1, 2, 3, 4]])
    data["paper", "rev_writes", "author"].edge_index = data["author", "writes", "paper"].edge_index.flip(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = CN3Conv(-1, 4, heads=2, add_self_loops=False)

        def forward(self, x, edge_index):
            return self.conv(x, edge_index)

    model = to_hetero(Net(), data.metadata(), aggr="sum")
    out = model(data.x_dict, data.edge_index_dict)
    assert out["paper"].shape == (5, 8) and out["author"].shape == (4, 8)
    sum(o.sum() for o in out.values()).backward()
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("weights", ["softmax", "sparsemax", "entmax15"])
@pytest.mark.parametrize("form", ["additive", "centered"])
def test_sparse_options_equal_the_dense_layer(weights, form):
    """Each option of ``CN3Conv`` per target's incoming edges = ``DenseCN3Conv`` on the adjacency,
    weights included; sparsemax gives exact zeros, softmax none."""
    torch.manual_seed(0)
    dense = DenseCN3Conv(8, 4, heads=2, edge_weights=weights, energy_form=form).double()
    sparse = CN3Conv(8, 4, heads=2, edge_weights=weights, energy_form=form).double()
    sparse.load_state_dict(dense.state_dict())
    x = torch.randn(6, 8, dtype=torch.float64)
    out, (edge_index, alpha) = sparse(x, EDGE_INDEX, return_attention_weights=True)
    adj = to_dense_adj(EDGE_INDEX, max_num_nodes=6)[0].T  # adj[i, j]: i attends j (edge j -> i)
    dense_out, dense_alpha = dense(x, adj, return_attention_weights=True)
    torch.testing.assert_close(out, dense_out)
    torch.testing.assert_close(alpha, dense_alpha[:, edge_index[1], edge_index[0]].T)
    assert bool((alpha == 0).any()) == (weights == "sparsemax")
    softmax = DenseCN3Conv(8, 4, heads=2).double()
    softmax.load_state_dict(dense.state_dict())
    assert (weights, form) == ("softmax", "additive") or not torch.allclose(softmax(x, adj), dense_out)


# ---------------------------------------------------------------- trainable attention weights


@pytest.mark.parametrize("impl", ["blockwise", "dense"])
def test_dense_attention_weights_train(impl):
    """A loss on the returned weights reaches the parameters (and the input): their gradient is the
    finite difference of the loss."""
    torch.manual_seed(0)
    conv = DenseCN3Conv(8, 4, heads=2, edge_dim=2, impl=impl).double()
    x, adj = _graph()
    attr = torch.randn(2, 5, 5, 2, dtype=torch.float64)
    x.requires_grad_(True)
    _, alpha = conv(x, adj, MASK, edge_attr=attr, return_attention_weights=True)
    assert alpha.requires_grad
    target = torch.rand_like(alpha)

    def loss(x_, att):
        _, alpha_ = torch.func.functional_call(conv, {"att": att}, (x_, adj, MASK),
                                               {"edge_attr": attr, "return_attention_weights": True})
        return ((alpha_ - target) ** 2).sum()

    assert torch.autograd.gradcheck(loss, (x, conv.att.detach().clone().requires_grad_(True)))
    with torch.no_grad():
        _, plain = conv(x, adj, MASK, edge_attr=attr, return_attention_weights=True)  # the blockwise path
    torch.testing.assert_close(alpha, plain)


def test_sparse_attention_weights_train():
    torch.manual_seed(0)
    conv = CN3Conv(8, 4, heads=2).double()
    x = torch.randn(6, 8, dtype=torch.float64, requires_grad=True)
    _, (_, alpha) = conv(x, EDGE_INDEX, return_attention_weights=True)
    assert alpha.requires_grad
    target = torch.rand_like(alpha)
    assert torch.autograd.gradcheck(
        lambda x_: ((conv(x_, EDGE_INDEX, return_attention_weights=True)[1][1] - target) ** 2).sum(), (x,))


# ---------------------------------------------------------------- invariances, compile, dtypes


def test_node_permutation_invariance():
    torch.manual_seed(0)
    perm = torch.randperm(6)
    inverse = perm.argsort()
    sparse = CN3Conv(8, 4, heads=2).double()
    x = torch.randn(6, 8, dtype=torch.float64)
    torch.testing.assert_close(sparse(x[perm], inverse[EDGE_INDEX])[inverse], sparse(x, EDGE_INDEX))
    dense = DenseCN3Conv(8, 4, heads=2).double()
    adj = to_dense_adj(EDGE_INDEX, max_num_nodes=6)[0]
    torch.testing.assert_close(dense(x[perm], adj[perm][:, perm])[inverse], dense(x, adj))


def test_compile_fullgraph_without_breaks():
    """Both layers trace into one graph (eager backend: the trace, not the code generation)."""
    torch.manual_seed(0)
    dense, sparse = DenseCN3Conv(8, 4, heads=2), CN3Conv(8, 4, heads=2, add_self_loops=False)
    x, adj = _graph(torch.float32)
    torch._dynamo.reset()
    try:
        out = torch.compile(dense, fullgraph=True, backend="eager")(x, adj, MASK, add_loop=False)
        torch.testing.assert_close(out, dense(x, adj, MASK, add_loop=False))
        xs = torch.randn(6, 8)
        out = torch.compile(sparse, fullgraph=True, backend="eager")(xs, EDGE_INDEX)
        torch.testing.assert_close(out, sparse(xs, EDGE_INDEX))
    finally:
        torch._dynamo.reset()


@withCUDA
@onlyLinux
def test_bf16(device):
    """bf16 inputs and parameters: the outputs close to fp32's at bf16's precision, on every device."""
    torch.manual_seed(0)
    dense, sparse = DenseCN3Conv(8, 4, heads=2).to(device), CN3Conv(8, 4, heads=2).to(device)
    x, adj = (t.float().to(device) for t in _graph())
    xs = torch.randn(6, 8, device=device)
    edge_index = EDGE_INDEX.to(device)
    expected = dense(x, adj, MASK.to(device)), sparse(xs, edge_index)
    dense, sparse = dense.bfloat16(), sparse.bfloat16()
    got = dense(x.bfloat16(), adj, MASK.to(device)), sparse(xs.bfloat16(), edge_index)
    for out, ref in zip(got, expected):
        assert out.dtype == torch.bfloat16
        torch.testing.assert_close(out.float(), ref, atol=3e-2, rtol=3e-2)
