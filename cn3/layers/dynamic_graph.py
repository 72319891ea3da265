"""The CN3 dynamic-graph layer (Liu et al., "Contextualized Non-local Neural Networks for
Sequence Learning", AAAI 2019): every sentence becomes a fully connected graph over its words
whose edge weights are learned per input, messages flow along them, and a gate decides how much
of each node is rewritten.

For node ``i`` and every node ``k`` of the same sentence::

    s_ik    = u^T tanh(W [h_k, h_i, v_i, v_k, e_ik])     energy
    alpha_ik = softmax_k(s_ik)                            soft adjacency, real nodes only
    h~_i    = sum_k alpha_ik h_k                          message passing
    g_i     = sigmoid(W_g h_i + b)                        gate (one value per hidden unit)
    h'_i    = g_i * h~_i + (1 - g_i) * h_i                gated update

``W`` is applied block by block, ``W_1 h_k + W_2 h_i + W_3 v_i + W_4 v_k + W_5 e_ik``, so
the ``[B, N, N, 2d + ...]`` concatenation never exists: the node terms are projected once per
node and broadcast-added, and the edge term is one projected vector per edge type, gathered
inside the blockwise attention (:mod:`cn3.layers.blockwise_energy`), which never keeps an
``(N, N)`` or larger tensor for backward.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from cn3.attention import gated_mix
from cn3.layers.blockwise_energy import additive_attention


class DynamicGraphLayer(nn.Module):
    """One CN3 layer: learn a soft graph over the sentence, pass messages, gate the update.

    Args:
        hidden: node state size ``d``.
        attr_dim: node attribute size ``a`` (POS/char/spelling embeddings, ...); 0 = none.
        n_edge_types: number of edge types ``T`` (e.g. dependency relation x direction);
            0 = no edge attributes. Type 0 means "no arc"; it has its own learned embedding,
            so the energy can tell arcs from non-arcs.
        edge_dim: size of the edge-type embedding ``e_ik``.
        energy_dim: rows of ``W``, the width of the ``tanh`` layer. The energy costs
            ``O(B N^2 energy_dim)`` time, so this is the layer's main speed knob.
        block_rows: query rows per block of the energy; None picks by size.
        init_range: every parameter is drawn from ``U(-init_range, init_range)``; the paper
            uses 0.1.

    Shapes:
        - h: ``(B, N, d)``; mask: ``(B, N)`` bool, True at real nodes
        - v: ``(B, N, a)`` or None; edge_type: ``(B, N, N)`` long in ``[0, T)`` or None
          (pairs that involve padding must still hold a valid type, e.g. 0)
        - returns ``h' (B, N, d)``, ``alpha (B, N, N)``, ``gate (B, N, d)``; all three are
          zero at padded nodes, and ``alpha`` is zero on padded keys. Use ``gate.mean(-1)``
          for one number per node.
    """

    def __init__(self, hidden: int, attr_dim: int = 0, n_edge_types: int = 0,
                 edge_dim: int = 32, energy_dim: int = 100, block_rows: int | None = None,
                 init_range: float = 0.1) -> None:
        super().__init__()
        self.hidden, self.attr_dim, self.n_edge_types = hidden, attr_dim, n_edge_types
        self.block_rows, self.init_range = block_rows, init_range
        # W = [W_1 | W_2 | W_3 | W_4 | W_5], one column block per part of the concatenation.
        self.lin_hk = nn.Linear(hidden, energy_dim, bias=False)  # W_1
        self.lin_hi = nn.Linear(hidden, energy_dim, bias=False)  # W_2
        self.lin_vi = nn.Linear(attr_dim, energy_dim, bias=False) if attr_dim else None  # W_3
        self.lin_vk = nn.Linear(attr_dim, energy_dim, bias=False) if attr_dim else None  # W_4
        self.edge_emb = nn.Embedding(n_edge_types, edge_dim) if n_edge_types else None
        self.lin_edge = nn.Linear(edge_dim, energy_dim, bias=False) if n_edge_types else None  # W_5
        self.u = nn.Parameter(torch.empty(energy_dim))
        self.lin_gate = nn.Linear(hidden, hidden)  # W_g, b
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform ``[-init_range, init_range]`` for every weight, bias and embedding (paper)."""
        for param in self.parameters():
            nn.init.uniform_(param, -self.init_range, self.init_range)

    def energy_weight(self) -> Tensor:
        """The paper's single ``W``: ``(energy_dim, 2d [+ 2a] [+ edge_dim])``."""
        blocks = [self.lin_hk, self.lin_hi, self.lin_vi, self.lin_vk, self.lin_edge]
        return torch.cat([lin.weight for lin in blocks if lin is not None], dim=1)

    def forward(self, h: Tensor, mask: Tensor, v: Tensor | None = None,
                edge_type: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        self._check(v, edge_type)
        query = self.lin_hi(h)  # (B, N, e)  W_2 h_i
        key = self.lin_hk(h)  # (B, N, e)  W_1 h_k
        if v is not None:
            query = query + self.lin_vi(v)  # + W_3 v_i
            key = key + self.lin_vk(v)  # + W_4 v_k
        edge_vecs = None
        if edge_type is not None:
            # W_5 e_t once per edge type t; gathered per pair inside the blocks
            edge_vecs = self.lin_edge(self.edge_emb.weight)  # (T, e)
        # s_ik = u^T tanh(W [h_k, h_i, v_i, v_k, e_ik]);  alpha_ik = softmax_k(s_ik) over real k;
        # h~_i = sum_k alpha_ik h_k
        context, alpha = additive_attention(query, key, self.u, h, key_mask=mask, query_mask=mask,
                                            edge_vecs=edge_vecs, edge_type=edge_type,
                                            block_rows=self.block_rows)  # (B, N, d), (B, N, N)
        # g_i = sigmoid(W_g h_i + b)
        gate = torch.sigmoid(self.lin_gate(h))  # (B, N, d)
        # h'_i = g_i * h~_i + (1 - g_i) * h_i
        h_new = gated_mix(context, h, gate)  # (B, N, d)
        padded = ~mask.unsqueeze(-1)  # (B, N, 1)
        return h_new.masked_fill(padded, 0.0), alpha, gate.masked_fill(padded, 0.0)

    def _check(self, v: Tensor | None, edge_type: Tensor | None) -> None:
        if (v is not None) != bool(self.attr_dim):
            raise ValueError(f"layer built with attr_dim={self.attr_dim}; v is "
                             f"{'missing' if v is None else 'unexpected'}")
        if (edge_type is not None) != bool(self.n_edge_types):
            raise ValueError(f"layer built with n_edge_types={self.n_edge_types}; edge_type is "
                             f"{'missing' if edge_type is None else 'unexpected'}")

    def extra_repr(self) -> str:
        return (f"hidden={self.hidden}, attr_dim={self.attr_dim}, "
                f"n_edge_types={self.n_edge_types}, energy_dim={self.u.numel()}")


class DynamicGraphEncoder(nn.Module):
    """``num_layers`` stacked :class:`DynamicGraphLayer` s; each layer sees the same ``v`` and
    edge types and the previous layer's states.

    Args:
        num_layers: ``L``.
        hidden: node state size ``d``.
        **layer_kwargs: passed to every :class:`DynamicGraphLayer`.

    Shapes:
        returns ``h (B, N, d)``, a list of ``L`` alphas ``(B, N, N)`` and ``L`` gates ``(B, N, d)``.
    """

    def __init__(self, num_layers: int, hidden: int, **layer_kwargs) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DynamicGraphLayer(hidden, **layer_kwargs)
                                    for _ in range(num_layers))

    def reset_parameters(self) -> None:
        for layer in self.layers:
            layer.reset_parameters()

    def forward(self, h: Tensor, mask: Tensor, v: Tensor | None = None,
                edge_type: Tensor | None = None) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        alphas, gates = [], []
        for layer in self.layers:
            h, alpha, gate = layer(h, mask, v, edge_type)
            alphas.append(alpha)
            gates.append(gate)
        return h, alphas, gates
