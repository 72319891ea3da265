"""The CN3 layer over ``edge_index``, a :class:`torch_geometric.nn.MessagePassing` layer in the
conventions of PyG's ``GATv2Conv``."""

from __future__ import annotations

import torch
from torch import Tensor
from torch_geometric.nn import MessagePassing
from torch_geometric.utils import add_self_loops, remove_self_loops, softmax

from cn3.nn.parts import CN3Parts


class CN3Conv(CN3Parts, MessagePassing):
    r"""The CN3 layer (Liu et al., AAAI 2019) on a sparse graph: each node attends over its incoming
    edges with CN3's additive score, takes the weighted sum of its neighbours and gates its update.
    The same function as :class:`~cn3.nn.DenseCN3Conv` with ``adj`` the graph's adjacency, and the
    same parameters (one layer's ``state_dict`` loads into the other).

    .. math::
        s^h_{ij} = \mathbf{u}_h^\top \tanh\left(\mathbf{W}_q^h \mathbf{x}_i + \mathbf{W}_k^h \mathbf{x}_j
            + \mathbf{E}^h_{t_{ji}} + \mathbf{W}_a^h \mathbf{a}_{ji}\right),\qquad
        \alpha^h_{ij} = \frac{\exp s^h_{ij}}{\sum_{j' \in \mathcal{N}(i)} \exp s^h_{ij'}}

    .. math::
        \tilde{\mathbf{h}}_i = \big\Vert_{h=1}^{H} \sum_{j \in \mathcal{N}(i)} \alpha^h_{ij}\,
            \mathbf{h}_j^{(h)},\qquad
        \mathbf{g}_i = \sigma(\mathbf{W}_g \mathbf{x}_i + \mathbf{b}_g),\qquad
        \mathbf{x}'_i = \mathbf{g}_i \odot \tilde{\mathbf{h}}_i + (1 - \mathbf{g}_i) \odot \mathbf{h}_i

    ``N(i)``: the sources of the edges ``j -> i`` (``edge_index[0] -> edge_index[1]``); the softmax is
    :func:`torch_geometric.utils.softmax` over each target's incoming edges. ``h = P x`` (``P`` the
    identity when ``in_channels == heads * out_channels``). A node without incoming edges gets a zero
    message: ``x'_i = (1 - g_i) h_i``.

    Self-loops as ``GATv2Conv``: with ``add_self_loops`` the graph's own self-loops are removed and one
    loop per node added, its ``edge_attr`` by ``fill_value`` and its ``edge_type`` 0. Removing loops
    has a data-dependent size, so ``torch.compile`` breaks the graph there; compile with
    ``add_self_loops=False`` and add the loops beforehand (as PyG's compile tests do). Only a
    ``Tensor`` ``edge_index`` is accepted (no ``SparseTensor``), and no bipartite ``(x_src, x_dst)``.

    Args:
        in_channels, out_channels, heads, edge_types, edge_dim, energy_dim, concat, gate, dropout, bias, project: as
            :class:`~cn3.nn.DenseCN3Conv`.
        add_self_loops: replace the graph's self-loops by one per node (above).
        fill_value: the self-loops' ``edge_attr``: a float, a ``(edge_dim,)`` tensor or a reduction
            (``"mean"``, ``"add"``, ...) of each node's incoming edge features, as in
            :func:`torch_geometric.utils.add_self_loops`.
        **kwargs: passed to :class:`~torch_geometric.nn.conv.MessagePassing`.

    Raises:
        ValueError: an argument out of range (as :class:`~cn3.nn.DenseCN3Conv`).

    Shapes:
        - **input:** ``x (N, F)``, ``edge_index (2, E)``, ``edge_attr (E, edge_dim)``,
          ``edge_type (E,)`` long in ``[0, edge_types)``
        - **output:** ``(N, H*C)`` (``(N, C)`` without ``concat``); with
          ``return_attention_weights``, also ``(edge_index (2, E'), alpha (E', H))`` for the edges
          used (self-loops included).
    """

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, edge_types: int = 0,
                 edge_dim: int | None = None, energy_dim: int | None = None, concat: bool = True,
                 gate: bool = True, dropout: float = 0.0, bias: bool = True, project: bool | None = None,
                 add_self_loops: bool = True, fill_value: float | Tensor | str = "mean", **kwargs) -> None:
        kwargs.setdefault("aggr", "add")
        MessagePassing.__init__(self, node_dim=0, **kwargs)
        self._build(in_channels, out_channels, heads, concat, edge_types, edge_dim, energy_dim, gate, dropout,
                    bias, project, add_self_loops)
        self.fill_value = fill_value
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot weights and zero biases, as PyG's attention layers."""
        MessagePassing.reset_parameters(self)
        self._reset_parts()

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor | None = None,
                edge_type: Tensor | None = None,
                return_attention_weights: bool = False) -> Tensor | tuple[Tensor, tuple[Tensor, Tensor]]:
        """The layer on one (possibly batched, disconnected) graph (see the class docstring for shapes).

        Raises:
            ValueError: ``edge_type`` / ``edge_attr`` given without ``edge_types`` / ``edge_dim`` or
                missing with them.
        """
        self._check_edges(edge_type, edge_attr)
        if self.add_self_loops:
            edge_index, edge_attr, edge_type = self._self_loops(edge_index, edge_attr, edge_type, x.shape[0])
        query, key, values = self._node_terms(x)  # (N, e), (N, e), (N, H*C)
        edge_vecs = None  # (E, e): E_t + W_a a per edge
        if edge_type is not None:
            edge_vecs = self.edge_emb(edge_type)
        if edge_attr is not None:
            projected = self.lin_edge(edge_attr.view(edge_attr.shape[0], -1))  # (E, e)
            edge_vecs = projected if edge_vecs is None else edge_vecs + projected
        alpha = self.edge_updater(edge_index, query=query, key=key, edge_vecs=edge_vecs)  # (E, H)
        heads = values.view(-1, self.heads, self.out_channels)  # (N, H, C)
        message = self.propagate(edge_index, values=heads, alpha=alpha).flatten(1)  # (N, H*C)
        out = self._update(x, values, message)  # (N, H*C) or (N, C)
        return (out, (edge_index, alpha)) if return_attention_weights else out

    def _self_loops(self, edge_index: Tensor, edge_attr: Tensor | None, edge_type: Tensor | None,
                    num_nodes: int) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """One self-loop per node in place of the graph's own: ``edge_attr`` by ``fill_value``,
        ``edge_type`` 0; the loops come last, in node order."""
        keep = edge_index[0] != edge_index[1]  # (E,)
        if edge_type is not None:
            edge_type = torch.cat([edge_type[keep], edge_type.new_zeros(num_nodes)])  # (E' ,)
        edge_index, edge_attr = remove_self_loops(edge_index, edge_attr)
        edge_index, edge_attr = add_self_loops(edge_index, edge_attr, fill_value=self.fill_value,
                                               num_nodes=num_nodes)  # loops appended after the edges
        return edge_index, edge_attr, edge_type

    def edge_update(self, query_i: Tensor, key_j: Tensor, edge_vecs: Tensor | None, index: Tensor,
                    ptr: Tensor | None, dim_size: int | None) -> Tensor:
        """``alpha (E, H)``: the softmax of ``s^h_ij`` over each target's incoming edges."""
        pre = query_i + key_j if edge_vecs is None else query_i + key_j + edge_vecs  # (E, e)
        score = (torch.tanh(pre).view(-1, self.heads, self.att.shape[-1]) * self.att).sum(dim=-1)  # (E, H)
        return softmax(score, index, ptr, dim_size)  # (E, H)

    def message(self, values_j: Tensor, alpha: Tensor) -> Tensor:
        """``alpha^h_ij h_j^(h)``: ``(E, H, C)``."""
        return values_j * alpha.unsqueeze(-1)
