"""What :class:`~cn3.nn.CN3Conv` shares with :class:`~cn3.nn.DenseCN3Conv`, so that one layer's
``state_dict`` loads into the other and both compute the same function: the same checked arguments,
the same parameters (names and shapes) and the same node-wise steps, taken from the dense layer
(:mod:`cn3.nn.dense_cn3_conv`, where the equations are).

For node ``i`` with input ``x_i`` and a key (neighbour) ``k``, with ``H`` heads of ``C`` channels::

    h_i      = P x_i                                       values and residual, H*C wide
    s^h_ik   = u_h^T tanh(W_q^h x_i + W_k^h x_k + E^h[t_ik] + W_a^h a_ik)
    alpha^h  = softmax_k(s^h_ik)                           over the keys i may attend
    h~_i     = concat_h sum_k alpha^h_ik h_k[slice_h]      slice_h: channels h*C : (h+1)*C
    g_i      = sigmoid(W_g x_i + b_g)
    x'_i     = g_i * h~_i + (1 - g_i) * h_i  (+ bias)
"""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric.nn.dense.linear import Linear

from cn3.nn.dense_cn3_conv import DenseCN3Conv, check_arguments


class CN3Parts:
    """Mixin for :class:`~cn3.nn.CN3Conv`: :meth:`_build` declares :class:`~cn3.nn.DenseCN3Conv`'s parameters
    on a :class:`torch.nn.Module` (``lin`` ``P`` or None, ``lin_query`` ``W_q``, ``lin_key`` ``W_k``,
    ``edge_emb`` ``E (T, e)``, ``lin_edge`` ``W_a``, ``att`` ``u (H, e/H)``, ``lin_gate`` ``W_g, b_g``,
    ``bias``); the node-wise steps are the dense layer's own methods."""

    _reset_parts = DenseCN3Conv.reset_parameters
    _node_terms = DenseCN3Conv._node_terms
    _update = DenseCN3Conv._update
    _check_edges = DenseCN3Conv._check_edges
    __repr__ = DenseCN3Conv.__repr__

    def _build(self, in_channels: int, out_channels: int, heads: int, concat: bool, edge_types: int,
               edge_dim: int | None, energy_dim: int | None, gate: bool, dropout: float, bias: bool,
               project: bool | None, add_self_loops: bool, edge_weights: str = "softmax",
               energy_form: str = "additive") -> None:
        """Checks the arguments (:func:`~cn3.nn.dense_cn3_conv.check_arguments`) and declares the parameters
        exactly as :class:`~cn3.nn.DenseCN3Conv`'s constructor does (see its Args)."""
        energy_dim, project = check_arguments(
            in_channels=in_channels, out_channels=out_channels, heads=heads, edge_types=edge_types,
            edge_dim=edge_dim, energy_dim=energy_dim, dropout=dropout, project=project, edge_weights=edge_weights,
            energy_form=energy_form)
        self.in_channels, self.out_channels, self.heads, self.concat = in_channels, out_channels, heads, concat
        self.edge_types, self.edge_dim, self.energy_dim = edge_types, edge_dim, energy_dim
        self.dropout, self.add_self_loops = dropout, add_self_loops
        self.edge_weights, self.energy_form = edge_weights, energy_form
        width = heads * out_channels  # H*C
        self.lin = Linear(in_channels, width, bias=False, weight_initializer="glorot") if project else None  # P
        self.lin_query = Linear(in_channels, energy_dim, bias=False, weight_initializer="glorot")  # W_q
        self.lin_key = Linear(in_channels, energy_dim, bias=False, weight_initializer="glorot")  # W_k
        self.edge_emb = nn.Embedding(edge_types, energy_dim) if edge_types else None  # E: (T, e)
        self.lin_edge = (Linear(edge_dim, energy_dim, bias=False, weight_initializer="glorot")
                         if edge_dim else None)  # W_a
        self.att = nn.Parameter(torch.empty(heads, energy_dim // heads))  # u: (H, e/H)
        self.lin_gate = Linear(in_channels, width, bias=True, weight_initializer="glorot") if gate else None  # W_g, b_g
        self.bias = nn.Parameter(torch.empty(width if concat else out_channels)) if bias else None
