"""CN3's energies taken apart: why do its learned graphs come out as stars?

CN3's additive energy (Liu et al., eq. 1; :mod:`cn3.layers.dynamic_graph`)::

    z_ik = W_2 h_i [+ W_3 v_i]  +  W_1 h_k [+ W_4 v_k]  [+ W_5 e_ik]      query + key (+ edge) terms
    s_ik = u^T tanh(z_ik)                                                 energy
    alpha_ik = softmax_k(s_ik)

A softmax over ``k`` ignores what is added to a whole row, so decomposing a sentence's energy as
``s_ik = m + r_i + c_k + E_ik`` (rows and columns centred), only the key effect ``c_k`` and the
interaction ``E_ik`` shape the weights. The *query share* ``|E|^2 / (|E|^2 + n |c|^2)`` is the
part that depends on the query: 0 means every word reads alike (static attention, Brody et al.
2022; a star when ``c`` has one large entry), 1 means no key is preferred by all.

WHY CN3 can be static: where ``tanh`` is near-linear the energy is a sum of a row, a column and an
edge part, so without an edge attribute the query enters the weights only through ``tanh``'s
curvature. :func:`sentence_energy_statistics` therefore also reports how much of ``z`` sits in
``tanh``'s near-linear range and how large each term is.

The energies are recomputed in full ``(B, N, N, e)`` form from each layer's inputs, caught by a
forward hook (the layer never keeps them).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch
from torch import Tensor

from cn3.config import ConfigError

#: what each statistic is, in the order reports list them.
ENERGY_STATISTICS = {
    "query_share": "query share (0 = static)",
    "energy_spread": "std_k s_ik (row spread)",
    "linear_share": "|z| < 0.5 (tanh linear)",
    "saturated_share": "|z| > 2 (tanh saturated)",
    "query_term": "RMS query term",
    "key_term": "RMS key term",
    "edge_term": "RMS edge term",
}
#: ``tanh(z) / z`` is above 0.92 for ``|z| < LINEAR`` and ``tanh`` is within 4% of 1 past ``SATURATED``.
LINEAR, SATURATED = 0.5, 2.0


def energy_parts(S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The key effect ``c (n,)`` and interaction ``E (rows, n)`` of an energy matrix ``S (rows, n)``:
    ``S = m + r_i + c_k + E_ik`` with ``sum_k c_k = 0`` and every row and column of ``E`` summing to 0."""
    R = S - S.mean(axis=1, keepdims=True)  # drop the row effect m + r_i: the softmax ignores it
    c = R.mean(axis=0)  # (n,)
    return c, R - c[None, :]


def query_share(S: np.ndarray) -> float:
    """``|E|^2 / (|E|^2 + rows |c|^2)`` (module docstring); NaN when the energy is constant per row."""
    c, E = energy_parts(S)
    interaction, key = float((E ** 2).sum()), float(S.shape[0] * (c ** 2).sum())
    total = interaction + key
    return interaction / total if total > 0 else float("nan")


def _rms(x: Tensor) -> float:
    return float(x.double().pow(2).mean().sqrt())


def energies(query: Tensor, key: Tensor, u: Tensor, edge: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """``(z (n, n, e), s (n, n))`` of one sentence and one energy head: ``z_ik = query_i + key_k
    [+ edge_ik]``, ``s_ik = u^T tanh(z_ik)``.

    Args:
        query: ``(n, e)`` the query terms ``W_2 h_i [+ W_3 v_i]`` of the sentence's ``n`` words.
        key: ``(n, e)`` the key terms ``W_1 h_k [+ W_4 v_k]``.
        u: ``(e,)`` the head's scoring vector.
        edge: ``(n, n, e)`` the edge terms ``W_5 e_ik``, or None.
    """
    z = query[:, None, :] + key[None, :, :]  # (n, n, e)
    if edge is not None:
        z = z + edge
    return z, torch.tanh(z) @ u  # (n, n, e), (n, n)


def sentence_energy_statistics(query: Tensor, key: Tensor, u: Tensor, edge: Tensor | None = None) -> dict[str, float]:
    """The statistics of one sentence and one energy head (arguments as :func:`energies`)."""
    z, s = energies(query, key, u, edge)
    S = s.double().cpu().numpy()  # (n, n)
    mag = z.abs()
    stats = {"query_share": query_share(S), "energy_spread": float(S.std(axis=1).mean()),
             "linear_share": float((mag < LINEAR).double().mean()),
             "saturated_share": float((mag > SATURATED).double().mean()),
             "query_term": _rms(query), "key_term": _rms(key)}
    if edge is not None:
        stats["edge_term"] = _rms(edge)
    return stats


class EnergyStatistics:
    """Per ``(layer, head)``, the statistics of every sentence; :meth:`summary` gives their means."""

    def __init__(self) -> None:
        self._values: dict[tuple[int, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))

    def add(self, layer: int, head: int, stats: dict[str, float]) -> None:
        for name, value in stats.items():
            if not np.isnan(value):
                self._values[(layer, head)][name].append(value)

    def summary(self) -> list[dict]:
        """``[{"layer", "head" (1-based), "sentences", "stats": {name: mean}}]`` by layer, then head."""
        out = []
        for (layer, head), values in sorted(self._values.items()):
            out.append({"layer": layer + 1, "head": head + 1, "sentences": len(values["key_term"]),
                        "stats": {name: float(np.mean(values[name])) for name in ENERGY_STATISTICS if values[name]}})
        return out


def graph_layers(model) -> list:
    """The model's CN3 graph layers, bottom up; a ConfigError for a model without any."""
    from cn3.layers.dynamic_graph import DynamicGraphLayer

    layers = [m for m in model.modules() if isinstance(m, DynamicGraphLayer)]
    if not layers:
        raise ConfigError("this run has no CN3 graph layers: analyze energy takes apart CN3's additive energy "
                          "(model.encoder: cn3); for any attention encoder use `cn3 analyze graphs`")
    return layers


def sentence_terms(layer, h: Tensor, mask: Tensor, v: Tensor | None, edge_type: Tensor | None):
    """The terms of each sentence's energy in one forward call of a
    :class:`~cn3.layers.dynamic_graph.DynamicGraphLayer` (its inputs): yields ``(b, head, query,
    key, u, edge)`` per sentence ``b`` of at least two words and energy head, arguments of
    :func:`energies` cut to the sentence's words."""
    query, key = layer.lin_hi(h), layer.lin_hk(h)  # (B, N, e) each
    if v is not None:
        query, key = query + layer.lin_vi(v), key + layer.lin_vk(v)
    edge_vecs = layer.lin_edge(layer.edge_emb.weight) if edge_type is not None else None  # (T, e)
    heads, rows = layer.energy_heads, layer.u.shape[-1]
    u = layer.u.reshape(heads, rows)
    lengths = mask.sum(dim=1).tolist()
    for b, n in enumerate(lengths):
        if n < 2:
            continue
        edge = edge_vecs[edge_type[b, :n, :n]] if edge_vecs is not None else None  # (n, n, e)
        for head in range(heads):
            cols = slice(head * rows, (head + 1) * rows)
            yield b, head, query[b, :n, cols], key[b, :n, cols], u[head], None if edge is None else edge[..., cols]


def _layer_statistics(layer, args: tuple, stats: EnergyStatistics, index: int) -> None:
    """Recompute the energies of one forward call of a graph layer and add each sentence's statistics."""
    for _, head, *terms in sentence_terms(layer, *args[:4]):
        stats.add(index, head, sentence_energy_statistics(*terms))


def analyze_energy(model, dataset, device: torch.device, batch_size: int = 32) -> EnergyStatistics:
    """The energy statistics of every sentence of ``dataset`` (both sides of a pair), per graph layer
    and energy head, from a loaded CN3 :class:`~cn3.sentence.model.SentenceGraphModel` (eval mode)."""
    from cn3.sentence.inference import scored_batches

    stats = EnergyStatistics()
    layers = graph_layers(model)
    hooks = [layer.register_forward_hook(lambda mod, args, out, i=i: _layer_statistics(mod, args, stats, i))
             for i, layer in enumerate(layers)]
    try:
        for _ in scored_batches(model, dataset, device, batch_size):
            pass
    finally:
        for hook in hooks:
            hook.remove()
    return stats


def reinitialised(model, seed: int):
    """A copy of ``model`` whose encoder (context layer and graph layers) is back at an initial
    draw of its own init with ``seed``; the node inputs (word vectors, attributes) stay as trained,
    so the copy reads the same words as the trained model."""
    import copy

    fresh = copy.deepcopy(model)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        fresh.encoder.reset_parameters()
    return fresh.eval()
