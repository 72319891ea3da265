"""The dependency-tree encoders: child-sum Tree-LSTM (Tai et al., 2015) and the syntactic GCN
(Marcheggiani & Titov, 2017), each against a hand-run of the published equations."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from cn3.encoders import EncoderArgs, build_encoder, get_spec
from cn3.encoders.pdgraph import SyntacticGCN, SyntacticGCNLayer
from cn3.encoders.registry import SENTENCE_LEVELS
from cn3.encoders.treelstm import ChildSumTreeLSTM, heads_from_edge_types
from data_prep.graphs import edge_types_from_heads
from tests.gradients import assert_gradients_match_finite_differences

pytestmark = pytest.mark.usefixtures("one_thread")

N_REL = 3
N_EDGE_TYPES = 1 + 2 * N_REL


def tree(heads: list[int], rels: list[int], n: int | None = None) -> torch.Tensor:
    """``(n, n)`` dense arc types of one tree (0-based heads, -1 = root), padded to ``n``."""
    edge_index, types = edge_types_from_heads(torch.tensor(heads), torch.tensor(rels))
    n = n or len(heads)
    dense = torch.zeros(n, n, dtype=torch.long)
    dense[edge_index[0], edge_index[1]] = types
    return dense


def batch(*sentences: tuple[list[int], list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """``edge_type (B, N, N)`` and ``mask (B, N)`` of right-padded trees."""
    n = max(len(h) for h, _ in sentences)
    edge_type = torch.stack([tree(h, r, n) for h, r in sentences])
    mask = torch.stack([torch.arange(n) < len(h) for h, _ in sentences])
    return edge_type, mask


THREE = ([1, -1, 1], [0, 2, 1])  # root 1 with dependents 0 and 2
CHAIN = ([-1, 0, 1, 2], [2, 0, 1, 0])  # 0 <- 1 <- 2 <- 3: depth 3
BUSHY = ([2, 2, -1, 4, 2], [0, 1, 2, 1, 0])  # root 2 with dependents 0, 1, 4; 4 has dependent 3


# --------------------------------------------------------------------------- child-sum Tree-LSTM


def treelstm_reference(model: ChildSumTreeLSTM, x: torch.Tensor, heads: list[int]) -> torch.Tensor:
    """Tai et al.'s equations (2)-(8) node by node, recursively from the root. ``x (n, in_dim)``."""
    hd = model.hidden
    w, b = model.W_iou.weight, model.W_iou.bias
    wi, wo, wu = w[:hd], w[hd:2 * hd], w[2 * hd:]
    bi, bo, bu = b[:hd], b[hd:2 * hd], b[2 * hd:]
    ui, uo, uu = model.U_iou.weight[:hd], model.U_iou.weight[hd:2 * hd], model.U_iou.weight[2 * hd:]
    wf, bf, uf = model.W_f.weight, model.W_f.bias, model.U_f.weight
    h_of, c_of = {}, {}

    def node(j: int) -> None:
        children = [k for k, head in enumerate(heads) if head == j]
        for k in children:
            node(k)
        h_tilde = sum((h_of[k] for k in children), torch.zeros(hd, dtype=x.dtype))
        i = torch.sigmoid(wi @ x[j] + ui @ h_tilde + bi)
        o = torch.sigmoid(wo @ x[j] + uo @ h_tilde + bo)
        u = torch.tanh(wu @ x[j] + uu @ h_tilde + bu)
        c = i * u
        for k in children:
            f_jk = torch.sigmoid(wf @ x[j] + uf @ h_of[k] + bf)
            c = c + f_jk * c_of[k]
        h_of[j], c_of[j] = o * torch.tanh(c), c

    node(heads.index(-1))
    return torch.stack([h_of[j] for j in range(len(heads))])


def test_heads_from_edge_types_reads_heads_and_marks_root_and_padding():
    edge_type, mask = batch(THREE, CHAIN)
    head = heads_from_edge_types(edge_type, mask)
    assert head.tolist() == [[1, -1, 1, -1], [-1, 0, 1, 2]]


def test_treelstm_matches_hand_run_equations_on_a_forest_of_depths():
    torch.manual_seed(0)
    model = ChildSumTreeLSTM(5, 4).double()
    sentences = (THREE, CHAIN, BUSHY)  # depths 1, 3 and 2 in one batch
    edge_type, mask = batch(*sentences)
    x = torch.randn(3, 5, 5, dtype=torch.float64)
    h, info = model(x, mask, edge_type=edge_type)
    assert h.shape == (3, 5, 4)
    for b, (heads, _) in enumerate(sentences):
        n = len(heads)
        assert_close(h[b, :n], treelstm_reference(model, x[b, :n], heads))
        assert h[b, n:].abs().sum() == 0
    assert info["root"].tolist() == [1, 0, 2]
    assert_close(model.pool(h, mask, info), torch.stack([h[0, 1], h[1, 0], h[2, 2]]))


def _padded_and_alone(model):
    """``model`` on the 3-node tree batched with a 5-node one, and on the 3-node tree alone; the
    3-node tree's states must agree and be zero at its padding."""
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    edge_type, mask = batch(THREE, BUSHY)
    h, info = model(x, mask, edge_type=edge_type)
    alone_et, alone_mask = batch(THREE)
    h_alone, info_alone = model(x[:1, :3], alone_mask, edge_type=alone_et)
    assert_close(h[0, :3], h_alone[0])
    assert h[0, 3:].abs().max() == 0
    return mask, h, info, alone_mask, h_alone, info_alone


def test_treelstm_padding_invariance_and_zero_padding():
    torch.manual_seed(1)
    model = ChildSumTreeLSTM(3, 4).double()
    mask, h, info, alone_mask, h_alone, info_alone = _padded_and_alone(model)
    assert_close(model.pool(h, mask, info)[0], model.pool(h_alone, alone_mask, info_alone)[0])


def test_treelstm_rejects_a_sentence_without_root():
    edge_type, mask = batch(THREE, CHAIN)
    edge_type[1, 0, 0] = 0  # the chain's root loses its odd self-loop
    with pytest.raises(ValueError, match="sentence 1 has no root"):
        ChildSumTreeLSTM(3, 4)(torch.randn(2, 4, 3), mask, edge_type=edge_type)


def test_treelstm_on_a_forest_pools_the_mean_of_its_roots():
    """A tree cut at max_len (or a text of several parsed sentences) is a forest: each tree is
    computed on its own and the sentence vector is the mean of the roots' states."""
    torch.manual_seed(3)
    model = ChildSumTreeLSTM(3, 4).double().eval()
    forest = ([1, -1, -1, 2], [0, 2, 2, 1])  # trees {0 <- 1} and {2 -> 3}
    edge_type, mask = batch(forest)
    x = torch.randn(1, 4, 3, dtype=torch.float64)
    h, info = model(x, mask, edge_type=edge_type)
    edges_a, mask_a = batch(([1, -1], [0, 2]))
    edges_b, mask_b = batch(([-1, 0], [2, 1]))
    first, _ = model(x[:, :2], mask_a, edge_type=edges_a)
    second, _ = model(x[:, 2:], mask_b, edge_type=edges_b)
    assert_close(h[0], torch.cat([first[0], second[0]]))  # the trees do not see each other
    assert_close(model.pool(h, mask, info)[0], (h[0, 1] + h[0, 2]) / 2)


def test_treelstm_rejects_a_cycle():
    edge_type, mask = batch(CHAIN)
    edge_type[0, 1, 0] = 0  # 1's head becomes 2, whose head is still 1: a cycle cut off from the root
    edge_type[0, 1, 2] = 1
    with pytest.raises(ValueError, match="cycle"):
        ChildSumTreeLSTM(3, 4)(torch.randn(1, 4, 3), mask, edge_type=edge_type)


def test_treelstm_gradients_reach_every_parameter():
    torch.manual_seed(2)
    model = ChildSumTreeLSTM(3, 4).double()
    edge_type, mask = batch(THREE, CHAIN)
    x = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    h, info = model(x, mask, edge_type=edge_type)
    (x_grad,) = torch.autograd.grad(model.pool(h, mask, info).sum(), x, retain_graph=True)
    assert x_grad[mask].abs().sum(-1).gt(0).all()  # every word reaches the root
    assert x_grad[~mask].abs().sum() == 0
    h.pow(2).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


def test_treelstm_init_is_the_linear_default():
    torch.manual_seed(3)
    model = ChildSumTreeLSTM(16, 8)
    for linear in (model.W_iou, model.U_iou, model.W_f, model.U_f):
        bound = 1 / math.sqrt(linear.in_features)
        for p in linear.parameters():
            assert p.abs().max() <= bound and p.abs().max() > 0.8 * bound


def test_treelstm_from_the_registry():
    spec = get_spec("treelstm")
    assert spec.needs_trees and spec.levels == SENTENCE_LEVELS and spec.default_layers == 1
    assert "Tai" in spec.paper
    enc = build_encoder("treelstm", EncoderArgs(in_dim=3, d=6, n_edge_types=N_EDGE_TYPES))
    assert isinstance(enc, ChildSumTreeLSTM) and enc.out_dim == enc.pool_dim == 6
    edge_type, mask = batch(THREE, CHAIN)
    x = torch.randn(2, 4, 3)
    torch.manual_seed(3)
    enc = build_encoder("treelstm", EncoderArgs(in_dim=3, d=6, n_edge_types=N_EDGE_TYPES))
    torch.manual_seed(3)
    direct = ChildSumTreeLSTM(3, 6)
    h, info = enc(x, mask, edge_type=edge_type)
    h_direct, info_direct = direct(x, mask, edge_type=edge_type)
    assert_close(h, h_direct)  # the registry builds the model it names, with its own init
    assert_close(enc.pool(h, mask, info), direct.pool(h_direct, mask, info_direct))


# --------------------------------------------------------------------------- syntactic GCN


def gcn_reference(layer: SyntacticGCNLayer, h: torch.Tensor, neighbours: dict) -> tuple[torch.Tensor, dict]:
    """Marcheggiani & Titov's gated layer with explicit per-edge loops. ``neighbours[v]`` lists
    ``(u, direction, bias row)``; direction 0 = along (u is v's head), 1 = opposite, 2 = self loop."""
    out, gates = [], {}
    for v in range(h.shape[0]):
        total = torch.zeros(h.shape[1], dtype=h.dtype)
        for u, direction, row in neighbours[v]:
            g = torch.sigmoid(h[u] @ layer.gate_weight[direction] + layer.gate_bias[row])
            total = total + g * (h[u] @ layer.weight[direction] + layer.bias[row])
            gates[v, u] = g
        out.append(torch.relu(total))
    return torch.stack(out), gates


def test_gcn_layer_matches_per_edge_loops():
    torch.manual_seed(4)
    layer = SyntacticGCNLayer(4, N_REL).double()
    with torch.no_grad():  # the init zeroes the biases: draw every parameter so each one matters
        for p in layer.parameters():
            p.normal_()
    # THREE: 0 <-(rel 0)- 1 -(rel 1)-> 2, root 1 (its rel 2 self-loop is no second self loop).
    # Bias rows: along rel r = 2r, opposite rel r = 2r + 1, self loop = 2 * N_REL = 6.
    neighbours = {
        0: [(1, 0, 0), (0, 2, 6)],
        1: [(0, 1, 1), (2, 1, 3), (1, 2, 6)],
        2: [(1, 0, 2), (2, 2, 6)],
    }
    edge_type, mask = batch(THREE)
    h = torch.randn(1, 3, 4, dtype=torch.float64)
    out, gate = layer(h, mask, edge_type)
    expected, expected_gates = gcn_reference(layer, h[0], neighbours)
    assert_close(out[0], expected)
    want = torch.zeros(3, 3, dtype=torch.float64)
    for (v, u), g in expected_gates.items():
        want[v, u] = g
    assert_close(gate[0], want)


def test_gcn_direction_matters():
    torch.manual_seed(5)
    layer = SyntacticGCNLayer(4, N_REL).double()
    edge_type, mask = batch(BUSHY)
    flipped = edge_type.clone()
    off = ~torch.eye(5, dtype=torch.bool)[None] & (edge_type > 0)
    flipped[off] = torch.where(edge_type[off] % 2 == 1, edge_type[off] + 1, edge_type[off] - 1)  # head <-> dependent
    h = torch.randn(1, 5, 4, dtype=torch.float64)
    out, _ = layer(h, mask, edge_type)
    out_flipped, _ = layer(h, mask, flipped)
    assert (out - out_flipped).abs().max() > 1e-3
    with torch.no_grad():  # with the directions' parameters tied the flip changes nothing
        layer.weight[1] = layer.weight[0]
        layer.gate_weight[1] = layer.gate_weight[0]
        layer.bias.normal_()
        layer.bias[1:-1:2] = layer.bias[0:-1:2]
        layer.gate_bias[1:-1:2] = layer.gate_bias[0:-1:2]
    assert_close(layer(h, mask, edge_type)[0], layer(h, mask, flipped)[0])


def test_gcn_padding_invariance_and_zero_padding():
    torch.manual_seed(6)
    enc = SyntacticGCN(3, 6, N_EDGE_TYPES, layers=2).double()
    mask, h, info, alone_mask, h_alone, info_alone = _padded_and_alone(enc)
    assert len(info["gates"]) == 2
    assert_close(info["gates"][1][0, :3, :3], info_alone["gates"][1][0])
    assert info["gates"][0][0, 3:].abs().max() == 0 and info["gates"][0][0, :, 3:].abs().max() == 0


def test_gcn_gradients_match_finite_differences():
    torch.manual_seed(7)
    enc = SyntacticGCN(3, 6, N_EDGE_TYPES, layers=2).double()
    # the gates start near 0 (the authors' init): give them weights whose gradients are not all tiny
    for layer in enc.layers:
        torch.nn.init.normal_(layer.gate_weight, std=0.3)
    edge_type, mask = batch(THREE, BUSHY)
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    assert_gradients_match_finite_differences(enc, lambda: enc(x, mask, edge_type=edge_type)[0].pow(2).sum())


def test_gcn_init_as_the_authors_code():
    torch.manual_seed(8)
    layer = SyntacticGCNLayer(64, N_REL)
    for w in layer.weight:  # Glorot normal: std sqrt(2 / (fan_in + fan_out)) = 1/8
        assert abs(w.std().item() - 1 / 8) < 0.01
    assert layer.bias.abs().max() == 0
    assert layer.gate_weight.abs().max() <= 0.01
    assert layer.gate_bias[:-1].eq(1).all() and layer.gate_bias[-1] == 0


def test_gcn_from_the_registry():
    spec = get_spec("pdgraph")
    assert spec.needs_trees and spec.levels == SENTENCE_LEVELS and spec.default_layers == 1
    assert "Marcheggiani" in spec.paper
    enc = build_encoder("pdgraph", EncoderArgs(in_dim=3, d=6, layers=2, n_edge_types=N_EDGE_TYPES))
    assert isinstance(enc, SyntacticGCN) and enc.out_dim == 6 and len(enc.layers) == 2
    assert enc.layers[0].bias.shape == (N_EDGE_TYPES, 6)  # 2 directions x N_REL labels + the self loop
    edge_type, mask = batch(THREE, CHAIN)
    x = torch.randn(2, 4, 3)
    torch.manual_seed(3)
    enc = build_encoder("pdgraph", EncoderArgs(in_dim=3, d=6, layers=2, n_edge_types=N_EDGE_TYPES))
    torch.manual_seed(3)
    direct = SyntacticGCN(3, 6, N_EDGE_TYPES, layers=2)
    assert_close(enc(x, mask, edge_type=edge_type)[0], direct(x, mask, edge_type=edge_type)[0])
    with pytest.raises(ValueError, match="even"):
        SyntacticGCN(3, 5, N_EDGE_TYPES)
