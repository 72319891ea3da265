"""Syntactic GCN on top of a BiLSTM (Marcheggiani & Titov, EMNLP 2017, "Encoding Sentences with
Graph Convolutional Networks for Semantic Role Labeling", section 3).

A layer updates every word ``v`` from its syntactic neighbours ``N(v)`` (its head, its dependents
and itself)::

    g_{u,v} = sigma(h_u . w^_{dir(u,v)} + b^_{L(u,v)})                          (gates)
    h'_v    = ReLU( sum_{u in N(v)} g_{u,v} (W_{dir(u,v)} h_u + b_{L(u,v)}) )

with three directions ``dir``: along the arc (``u`` is ``v``'s head, head -> dependent), opposite
(``u`` is ``v``'s dependent) and the self loop; ``L(u, v)`` is the dependency relation together with
the direction (the self loop is a label of its own). As in their SRL model, the GCN layers read the
states of a BiLSTM, not the word vectors.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from cn3.encoders.registry import SENTENCE_LEVELS, EncoderArgs, register
from cn3.layers.lstm import LSTM
from cn3.layers.packed import run_packed


class SyntacticGCNLayer(nn.Module):
    """One edge-wise gated syntactic GCN layer (Marcheggiani & Titov, 2017).

    Parameters: ``weight[k]`` is ``W_dir`` for ``k`` = along, opposite, self loop; ``bias[t - 1]`` is
    ``b_L`` of arc type ``t`` of :mod:`data_prep.graphs` (odd ``t = 1 + 2 r``: along, relation ``r``;
    even ``t = 2 + 2 r``: opposite, relation ``r``) and ``bias[2 * n_labels]`` the self loop's;
    ``gate_weight[k]`` is ``w^_dir`` and ``gate_bias`` is ``b^_L``, indexed as ``weight`` and ``bias``.

    Args:
        dim: input and output width.
        n_labels: dependency relations (``n_edge_types = 1 + 2 * n_labels``).

    Shapes:
        ``h (B, N, dim)``, ``mask (B, N)``, ``edge_type (B, N, N)`` -> ``(B, N, dim)`` and the gates
        ``(B, N, N)``, ``[b, v, u] = g_{u,v}`` (0 where ``u`` is not a neighbour of ``v``).
    """

    def __init__(self, dim: int, n_labels: int):
        super().__init__()
        self.n_labels = n_labels
        self.weight = nn.Parameter(torch.empty(3, dim, dim))  # W_along, W_opposite, W_self (in, out)
        self.bias = nn.Parameter(torch.empty(2 * n_labels + 1, dim))
        self.gate_weight = nn.Parameter(torch.empty(3, dim))
        self.gate_bias = nn.Parameter(torch.empty(2 * n_labels + 1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The authors' Lasagne init: Glorot-normal ``W``, zero ``b``, ``U(+-0.01)`` gate weights, arc
        gate biases 1 and self-loop gate bias 0 (their self loop has none)."""
        for w in self.weight:
            nn.init.xavier_normal_(w)
        nn.init.zeros_(self.bias)
        nn.init.uniform_(self.gate_weight, -0.01, 0.01)
        with torch.no_grad():
            self.gate_bias.fill_(1.0)
            self.gate_bias[-1] = 0.0

    def forward(self, h: Tensor, mask: Tensor, edge_type: Tensor) -> tuple[Tensor, Tensor]:
        n = h.shape[1]
        self_loop_label = 2 * self.n_labels
        eye = torch.eye(n, dtype=torch.bool, device=h.device)
        real = mask[:, :, None] & mask[:, None, :]  # (B, N, N)
        # The root's odd self-loop marks the root, it is no arc: every word gets one self loop below.
        arc = edge_type.masked_fill(eye | ~real, 0)  # (B, N, N), [b, v, u]: the arc linking u to v
        if (arc > self_loop_label).any():
            raise ValueError(f"edge_type holds arc types above {self_loop_label} = 2 * n_labels for "
                             f"n_labels = {self.n_labels}")
        along = arc % 2 == 1  # (B, N, N): u is v's head, the message follows the arc head -> dependent
        opposite = (arc > 0) & ~along  # u is v's dependent
        loop = eye & mask[:, :, None]  # (B, N, N): each real word's self loop
        adj = torch.stack([along, opposite, loop], 1).to(h.dtype)  # (B, 3, N, N), one per dir(u, v)
        label = torch.where(arc > 0, arc - 1, self_loop_label)  # (B, N, N): L(u, v) as an index of bias
        neighbour = (arc > 0) | loop  # (B, N, N): u in N(v)

        gate_logit = torch.einsum("bkvu,buk->bvu", adj, h @ self.gate_weight.T)  # h_u . w^_dir(u,v)
        gate = torch.sigmoid(gate_logit + self.gate_bias[label]) * neighbour  # (B, N, N): g_{u,v}
        hw = torch.einsum("bud,kde->bkue", h, self.weight)  # (B, 3, N, dim): W_dir h_u for each dir
        message = ((adj * gate[:, None]) @ hw).sum(1)  # (B, N, dim): sum_u g_{u,v} W_dir(u,v) h_u
        # sum_u g_{u,v} b_L(u,v): the gates gathered per label, then one product with the bias table.
        # (in gate's dtype: under autocast h may be fp32 while the gate came out of a bf16 product)
        gate_per_label = gate.new_zeros(*gate.shape[:2], self_loop_label + 1).scatter_add(2, label, gate)
        out = torch.relu(message + gate_per_label @ self.bias)  # (B, N, dim), zero at padding (no u)
        return out, gate


class SyntacticGCN(nn.Module):
    """BiLSTM then ``layers`` syntactic GCN layers, as in Marcheggiani & Titov's SRL model.

    A packed one-layer bidirectional LSTM (``hidden // 2`` per direction) gives the states the GCN
    layers refine; no residual connections (the paper has none). ``dropout`` is applied to the input
    of every GCN layer.

    Args:
        in_dim: width of ``x``.
        hidden: output width (even: the two LSTM directions are concatenated).
        n_edge_types: ``1 + 2 * n_labels`` arc types of :mod:`data_prep.graphs`.
        layers: GCN layers.
        dropout: rate on each GCN layer's input.

    Shapes:
        ``x (B, N, in_dim)``, ``mask (B, N)``, ``edge_type (B, N, N)`` -> ``h (B, N, hidden)``;
        ``info["gates"]``: one ``(B, N, N)`` gate matrix per layer.
    """

    def __init__(self, in_dim: int, hidden: int, n_edge_types: int, layers: int = 1, dropout: float = 0.0):
        super().__init__()
        if hidden % 2:
            raise ValueError(f"the syntactic GCN's width must be even (two LSTM directions), got {hidden}")
        if n_edge_types < 3 or n_edge_types % 2 == 0:
            raise ValueError(f"the syntactic GCN needs dependency arc types, n_edge_types = 1 + 2 * n_relations "
                             f">= 3, got {n_edge_types}")
        self.out_dim = hidden
        self.lstm = LSTM(in_dim, hidden // 2, batch_first=True, bidirectional=True)
        self.layers = nn.ModuleList(SyntacticGCNLayer(hidden, (n_edge_types - 1) // 2) for _ in range(layers))
        self.dropout = nn.Dropout(dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's LSTM init, the authors' GCN init."""
        self.lstm.reset_parameters()
        for layer in self.layers:
            layer.reset_parameters()

    def forward(self, x: Tensor, mask: Tensor, *, v: Tensor | None = None,
                edge_type: Tensor | None = None) -> tuple[Tensor, dict]:
        if edge_type is None:
            raise ValueError("the syntactic GCN needs dependency trees (edge_type)")
        h = run_packed(self.lstm, x, mask)  # (B, N, hidden)
        gates = []
        for layer in self.layers:
            h, gate = layer(self.dropout(h), mask, edge_type)  # (B, N, hidden), (B, N, N)
            gates.append(gate)
        return h, {"gates": gates}


@register("pdgraph", "Marcheggiani & Titov 2017 (syntactic GCN)", needs_trees=True, levels=SENTENCE_LEVELS,
          default_layers=1, table_order=5)
def _build(a: EncoderArgs) -> nn.Module:
    return SyntacticGCN(a.in_dim, a.d, a.n_edge_types, a.layers, a.dropout)
