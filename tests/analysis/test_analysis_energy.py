"""CN3's energy taken apart (``cn3.analysis.energy``): the two-way decomposition on hand-made
matrices, the recomputed energies against the layer's own weights, and ``cn3 analyze energy``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cn3.analysis.energy import (
    EnergyStatistics,
    energies,
    energy_parts,
    query_share,
    reinitialised,
    sentence_energy_statistics,
    sentence_terms,
)
from cn3.layers.dynamic_graph import DynamicGraphEncoder


def test_query_share_on_hand_made_energies():
    # a row term plus a column term: the softmax sees only the column, every row reads alike
    row, col = np.array([[3.0], [-1.0], [0.5]]), np.array([[0.2, 2.0, -1.0]])
    assert query_share(row + col) == pytest.approx(0.0, abs=1e-12)
    # pure interaction: rows and columns of E sum to zero, no key is preferred by all
    E = np.array([[1.0, -1.0], [-1.0, 1.0]])
    assert query_share(E + row[:2]) == pytest.approx(1.0)
    # by hand: S = [[1, 0], [0, 0]] -> rows centred [[.5, -.5], [0, 0]], c = [.25, -.25],
    # E = [[.25, -.25], [-.25, .25]]: |E|^2 = .25 and rows * |c|^2 = 2 * .125 = .25
    c, E = energy_parts(np.array([[1.0, 0.0], [0.0, 0.0]]))
    np.testing.assert_allclose(c, [0.25, -0.25])
    np.testing.assert_allclose(E, [[0.25, -0.25], [-0.25, 0.25]])
    assert query_share(np.array([[1.0, 0.0], [0.0, 0.0]])) == pytest.approx(0.5)
    assert np.isnan(query_share(np.array([[2.0, 2.0], [5.0, 5.0]])))  # constant rows: nothing to shape


def test_statistics_of_a_linear_and_a_saturated_sentence():
    torch.manual_seed(0)
    q, k, u = torch.randn(4, 6) * 1e-3, torch.randn(4, 6) * 1e-3, torch.randn(6)
    s = sentence_energy_statistics(q, k, u)  # tanh ~ identity: s = u.q_i + u.k_k, separable
    assert s["linear_share"] == 1.0 and s["saturated_share"] == 0.0
    assert s["query_share"] < 1e-4 and "edge_term" not in s
    assert s["query_term"] == pytest.approx(float(q.double().pow(2).mean().sqrt()))
    s = sentence_energy_statistics(q * 1e4, k * 1e4, u, edge=torch.randn(4, 4, 6))
    assert s["saturated_share"] > 0.5 and s["query_share"] > 0.05 and "edge_term" in s


@pytest.mark.parametrize("heads,attrs,relative", [(1, False, 0), (2, True, 0), (1, True, 3), (2, False, 2)])
def test_recomputed_energies_give_the_layer_weights(heads, attrs, relative):
    torch.manual_seed(1)
    B, N, d, a = 3, 7, 8, 4
    enc = DynamicGraphEncoder(1, d, relative_positions=relative, attr_dim=a if attrs else 0,
                              n_edge_types=5 if attrs else 0, energy_dim=12, energy_heads=heads, init_range=0.5)
    h, v = torch.randn(B, N, d), torch.randn(B, N, a) if attrs else None
    edge = torch.randint(0, 5, (B, N, N)) if attrs else None
    mask = torch.arange(N)[None, :] < torch.tensor([[7], [4], [1]])  # a one-word sentence is skipped
    seen = []
    layer = enc.layers[0]
    hook = layer.register_forward_hook(lambda mod, args, out: seen.append((args, out)))
    with torch.no_grad():
        _, alphas, _ = enc(h, mask, v, edge, per_head=True)
    hook.remove()
    (args,), alpha = [s[0] for s in seen], alphas[0]  # (B, H, N, N)
    done = set()
    for b, head, *terms in sentence_terms(layer, *args[:4]):
        n = int(mask[b].sum())
        _, s = energies(*terms)
        torch.testing.assert_close(torch.softmax(s, dim=-1), alpha[b, head, :n, :n], atol=1e-6, rtol=1e-5)
        done.add((b, head))
    assert done == {(b, head) for b in (0, 1) for head in range(heads)}


def test_aggregate_skips_undefined_values_and_reinit_keeps_the_inputs():
    stats = EnergyStatistics()
    stats.add(0, 1, {"query_share": float("nan"), "key_term": 1.0})
    stats.add(0, 1, {"query_share": 0.2, "key_term": 3.0})
    (entry,) = stats.summary()
    assert (entry["layer"], entry["head"], entry["sentences"]) == (1, 2, 2)
    assert entry["stats"] == {"query_share": 0.2, "key_term": 2.0}

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.nodes = torch.nn.Embedding(5, 3)
            self.encoder = DynamicGraphEncoder(1, 3, energy_dim=4)

    model = Model()
    torch.nn.init.constant_(model.encoder.layers[0].u, 9.0)  # "trained"
    fresh = reinitialised(model, seed=3)
    assert torch.equal(fresh.nodes.weight, model.nodes.weight) and fresh.encoder.layers[0].u.abs().max() <= 0.1
    assert torch.equal(reinitialised(model, seed=3).encoder.layers[0].u, fresh.encoder.layers[0].u)
    assert model.encoder.layers[0].u.eq(9.0).all()  # the trained model is untouched
