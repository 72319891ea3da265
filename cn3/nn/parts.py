"""The parameters and node-wise maths that :class:`~cn3.nn.DenseCN3Conv` and :class:`~cn3.nn.CN3Conv`
share, so that one layer's ``state_dict`` loads into the other and both compute the same function.

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
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn.dense.linear import Linear
from torch_geometric.nn.inits import glorot, zeros

from cn3.layers.attention import gated_mix
from cn3.layers.edge_weights import EDGE_WEIGHTS, ENERGY_FORMS


class CN3Parts:
    """Mixin: builds the CN3 parameters on a :class:`torch.nn.Module` and applies the node-wise steps.

    Parameters (the same names in both layers): ``lin`` (``P``, or None when it is the identity),
    ``lin_query`` (``W_q``), ``lin_key`` (``W_k``), ``edge_emb`` (``E``, ``(T, e)``), ``lin_edge``
    (``W_a``), ``att`` (``u``, ``(H, e/H)``), ``lin_gate`` (``W_g``, ``b_g``), ``bias``.
    """

    def _build(self, in_channels: int, out_channels: int, heads: int, concat: bool, edge_types: int,
               edge_dim: int | None, energy_dim: int | None, gate: bool, dropout: float, bias: bool,
               project: bool | None, add_self_loops: bool, edge_weights: str = "softmax",
               energy_form: str = "additive") -> None:
        """Checks the arguments and creates the parameters (see the layers' Args). ``in_channels=-1``:
        lazy, the input projections take their width at the first call (PyG's convention)."""
        width = heads * out_channels  # H*C
        energy_dim = width if energy_dim is None else energy_dim
        if edge_weights not in EDGE_WEIGHTS or energy_form not in ENERGY_FORMS:
            raise ValueError(f"edge_weights must be one of {', '.join(EDGE_WEIGHTS)} and energy_form one of "
                             f"{', '.join(ENERGY_FORMS)}, got {edge_weights!r}, {energy_form!r}")
        if min(out_channels, heads) < 1 or (in_channels < 1 and in_channels != -1):
            raise ValueError(f"in_channels (or -1, lazy), out_channels and heads must be >= 1, got {in_channels}, "
                             f"{out_channels}, {heads}")
        if energy_dim < heads or energy_dim % heads:
            raise ValueError(f"energy_dim={energy_dim} must be a positive multiple of heads={heads}")
        if edge_types < 0 or (edge_dim is not None and edge_dim < 1):
            raise ValueError(f"edge_types must be >= 0 and edge_dim None or >= 1, got {edge_types}, {edge_dim}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.in_channels, self.out_channels, self.heads, self.concat = in_channels, out_channels, heads, concat
        self.edge_types, self.edge_dim, self.energy_dim = edge_types, edge_dim, energy_dim
        self.dropout, self.add_self_loops = dropout, add_self_loops
        self.edge_weights, self.energy_form = edge_weights, energy_form
        project = in_channels != width if project is None else project
        if not project and in_channels != width:  # a lazy layer (-1) always projects
            raise ValueError(f"project=False needs in_channels == heads * out_channels, got {in_channels} != {width}")
        self.lin = Linear(in_channels, width, bias=False, weight_initializer="glorot") if project else None
        self.lin_query = Linear(in_channels, energy_dim, bias=False, weight_initializer="glorot")
        self.lin_key = Linear(in_channels, energy_dim, bias=False, weight_initializer="glorot")
        self.edge_emb = nn.Embedding(edge_types, energy_dim) if edge_types else None
        self.lin_edge = Linear(edge_dim, energy_dim, bias=False, weight_initializer="glorot") if edge_dim else None
        self.att = nn.Parameter(torch.empty(heads, energy_dim // heads))
        self.lin_gate = Linear(in_channels, width, bias=True, weight_initializer="glorot") if gate else None
        self.bias = nn.Parameter(torch.empty(width if concat else out_channels)) if bias else None

    def _reset_parts(self) -> None:
        """Glorot for every weight, ``u`` and the edge-type table; zeros for the biases."""
        for lin in (self.lin, self.lin_query, self.lin_key, self.lin_edge, self.lin_gate):
            if lin is not None:
                lin.reset_parameters()
        if self.edge_emb is not None:
            glorot(self.edge_emb.weight)
        glorot(self.att)
        zeros(self.bias)

    def _node_terms(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """``(W_q x, W_k x, P x, W_g x + b_g)``: ``(..., e)``, ``(..., e)``, ``(..., H*C)``, ``(..., H*C)``
        (None without the gate), as one matrix product over the stacked weights: one pass over ``x``
        forward and backward instead of four (a lazy layer's first call runs them one by one)."""
        linears = [self.lin_query, self.lin_key, self.lin, self.lin_gate]
        present = [lin for lin in linears if lin is not None]
        if any(isinstance(lin.weight, nn.parameter.UninitializedParameter) for lin in present):
            outs = [lin(x) for lin in present]  # materialises the lazy weights
        else:
            stacked = torch.cat([lin.weight for lin in present])  # (2e + [H*C] + [H*C], F)
            outs = list(torch.matmul(x, stacked.T).split([lin.weight.shape[0] for lin in present], dim=-1))
        query, key = outs[0], outs[1]  # W_q x_i, W_k x_k
        values = x if self.lin is None else outs[2]  # (..., H*C)  h = P x
        gate = None if self.lin_gate is None else outs[-1] + self.lin_gate.bias  # (..., H*C)  W_g x + b_g
        return query, key, values, gate

    def _check_edges(self, edge_type: Tensor | None, edge_attr: Tensor | None) -> None:
        if (edge_type is not None) != bool(self.edge_types):
            raise ValueError(f"layer built with edge_types={self.edge_types}; edge_type is "
                             f"{'missing' if edge_type is None else 'unexpected'}")
        if (edge_attr is not None) != (self.edge_dim is not None):
            raise ValueError(f"layer built with edge_dim={self.edge_dim}; edge_attr is "
                             f"{'missing' if edge_attr is None else 'unexpected'}")

    def _update(self, gate: Tensor | None, values: Tensor, message: Tensor) -> Tensor:
        """The gated update, the heads' combination and the bias: ``W_g x + b_g`` (None without the
        gate), ``(..., H*C)``, ``(..., H*C)`` -> ``(..., H*C)`` (``concat``) or ``(..., C)`` (the heads' mean)."""
        message = F.dropout(message, self.dropout, self.training)  # h~ (dropout on the message)
        if gate is None:
            out = message  # x' = h~
        else:
            gate = torch.sigmoid(gate)  # (..., H*C)  g = sigmoid(W_g x + b_g)
            out = gated_mix(message, values, gate)  # (..., H*C)  g h~ + (1 - g) h
        if not self.concat:
            out = out.unflatten(-1, (self.heads, self.out_channels)).mean(dim=-2)  # (..., C)
        return out if self.bias is None else out + self.bias

    def __repr__(self) -> str:
        weights = f", edge_weights={self.edge_weights}" if self.edge_weights != "softmax" else ""
        form = f", energy_form={self.energy_form}" if self.energy_form != "additive" else ""
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, heads={self.heads}{weights}{form})"
