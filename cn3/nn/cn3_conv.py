"""The CN3 layer over ``edge_index``, a :class:`torch_geometric.nn.MessagePassing` layer in the
conventions of PyG's ``GATv2Conv``."""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn import MessagePassing
from torch_geometric.typing import Adj
from torch_geometric.utils import (
    add_self_loops,
    is_sparse,
    is_torch_sparse_tensor,
    remove_self_loops,
    scatter,
    softmax,
    to_dense_batch,
    to_edge_index,
)

from cn3.layers.edge_weights import _FORBIDDEN
from cn3.nn.dense_cn3_conv import declare_parameters
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
        \tilde{\mathbf{h}}_i = \Vert_{h=1}^{H} \sum_{j \in \mathcal{N}(i)} \alpha^h_{ij}\,
            \mathbf{h}_j^{(h)},\qquad
        \mathbf{g}_i = \sigma(\mathbf{W}_g \mathbf{x}_i + \mathbf{b}_g),\qquad
        \mathbf{x}'_i = \mathbf{g}_i \odot \tilde{\mathbf{h}}_i + (1 - \mathbf{g}_i) \odot \mathbf{h}_i

    ``N(i)``: the sources of the edges ``j -> i`` (``edge_index[0] -> edge_index[1]``); the softmax is
    :func:`torch_geometric.utils.softmax` over each target's incoming edges. ``h = P x`` (``P`` the
    identity when ``in_channels == heads * out_channels``). A node without incoming edges gets a zero
    message: ``x'_i = (1 - g_i) h_i``.

    Self-loops as ``GATv2Conv``: with ``add_self_loops`` the graph's own self-loops are removed and one
    loop per node added (``min(N_s, N_t)`` for a bipartite graph), its ``edge_attr`` by ``fill_value``
    and its ``edge_type`` 0. Removing loops has a data-dependent size, so ``torch.compile`` breaks the
    graph there; compile with ``add_self_loops=False`` and add the loops beforehand (as PyG's compile
    tests do).

    On the CPU, eager, the edges' sums (``W_q x_i + W_k x_j`` per edge, the weighted sum per target, and
    their gradients) run as :func:`torch.nn.functional.embedding_bag` sums over the edges grouped by
    target and by source, with no ``(E, H*C)`` messages; under ``torch.compile``, on other devices, with
    propagate / message / aggregate hooks, ``explain`` or another ``aggr`` the layer gathers and calls
    PyG's ``propagate``. Both compute the same function (tested to float64 precision, gradients included).

    Inputs as PyG's layers take them: ``edge_index`` a ``(2, E)`` tensor, or ``adj_t`` (targets by
    sources) as a ``torch_sparse.SparseTensor`` or a ``torch.sparse`` COO / CSR / CSC tensor; ``x`` one
    tensor or a bipartite pair ``(x_src, x_dst)`` of the same width ``F`` (keys and messages from the
    sources, queries, gate and residual from the targets) with ``size=(N_s, N_t)``; ``in_channels=-1``
    for lazy initialisation; under :func:`torch_geometric.nn.to_hetero` every edge type runs the
    bipartite path (node types of the same width). The returned attention weights carry autograd's
    graph: a loss on them trains the layer.

    ``edge_weights`` other than ``softmax`` normalise each target's incoming edges with the ``entmax``
    package's ``sparsemax`` / ``entmax15`` (the edges padded per target to the largest in-degree);
    ``energy_form="centered"`` subtracts from ``s_ij`` the mean of ``s`` over the edges leaving ``j``
    (the dense layer's mean over the queries of key ``j``). ``tree`` needs the complete graph's
    matrix-tree computation and is refused here (:class:`~cn3.nn.DenseCN3Conv` serves it).

    Args:
        in_channels, out_channels, heads, edge_types, edge_dim, energy_dim, concat, gate, dropout, bias, project: as
            :class:`~cn3.nn.DenseCN3Conv`.
        add_self_loops: replace the graph's self-loops by one per node (above).
        fill_value: the self-loops' ``edge_attr``: a float, a ``(edge_dim,)`` tensor or a reduction
            (``"mean"``, ``"add"``, ...) of each node's incoming edge features, as in
            :func:`torch_geometric.utils.add_self_loops`.
        edge_weights: ``softmax`` (the paper), ``sparsemax`` or ``entmax15``, over each target's edges.
        energy_form: ``additive`` (the paper) or ``centered`` (above).
        **kwargs: passed to :class:`~torch_geometric.nn.conv.MessagePassing`.

    Raises:
        ValueError: an argument out of range (as :class:`~cn3.nn.DenseCN3Conv`); ``edge_weights="tree"``.

    Shapes:
        - **input:** ``x (N, F)`` or ``(x_src (N_s, F), x_dst (N_t, F))``; ``edge_index (2, E)`` or
          ``adj_t (N_t, N_s)`` sparse; ``edge_attr (E, edge_dim)``,
          ``edge_type (E,)`` long in ``[0, edge_types)``
        - **output:** ``(N_t, H*C)`` (``(N_t, C)`` without ``concat``); with
          ``return_attention_weights``, also ``(edge_index (2, E'), alpha (E', H))`` for the edges
          used (self-loops included).
    """

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, edge_types: int = 0,
                 edge_dim: int | None = None, energy_dim: int | None = None, concat: bool = True,
                 gate: bool = True, dropout: float = 0.0, bias: bool = True, project: bool | None = None,
                 add_self_loops: bool = True, fill_value: float | Tensor | str = "mean",
                 edge_weights: str = "softmax", energy_form: str = "additive", **kwargs) -> None:
        kwargs.setdefault("aggr", "add")
        MessagePassing.__init__(self, node_dim=0, **kwargs)
        if edge_weights == "tree":
            raise ValueError("edge_weights='tree' (marginals over dependency trees) needs the complete graph's "
                             "dense matrix-tree computation: DenseCN3Conv serves it, CN3Conv does not")
        declare_parameters(self, in_channels=in_channels, out_channels=out_channels, heads=heads,
                           edge_types=edge_types, edge_dim=edge_dim, energy_dim=energy_dim, concat=concat, gate=gate,
                           dropout=dropout, bias=bias, project=project, add_self_loops=add_self_loops,
                           edge_weights=edge_weights, energy_form=energy_form)
        self.fill_value = fill_value
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot weights and zero biases, as PyG's attention layers."""
        MessagePassing.reset_parameters(self)
        self._reset_parts()

    def forward(self, x: Tensor | tuple[Tensor, Tensor], edge_index: Adj, edge_attr: Tensor | None = None,
                edge_type: Tensor | None = None, return_attention_weights: bool = False,
                size: tuple[int, int] | None = None) -> Tensor | tuple[Tensor, tuple[Tensor, Tensor]]:
        """The layer on one (possibly batched, disconnected, bipartite) graph (shapes: the class docstring).

        Args:
            x: ``(N, F)``, or ``(x_src (N_s, F), x_dst (N_t, F))`` for a bipartite graph.
            edge_index: ``(2, E)`` long (source, target), or ``adj_t`` (target by source, PyG's convention):
                a ``torch_sparse.SparseTensor`` or a ``torch.sparse`` COO / CSR / CSC tensor.
            edge_attr, edge_type: ``(E, edge_dim)`` (or ``(E,)``) and ``(E,)`` long, in ``edge_index``'s order
                (for ``adj_t``: its entries' row-major order; without ``edge_attr`` a layer with ``edge_dim``
                takes the sparse tensor's values).
            return_attention_weights: also return ``(edge_index, alpha)`` for the edges used (self-loops
                included), ``alpha`` differentiable.
            size: ``(N_s, N_t)``; None: from ``x`` (or ``adj_t``).

        Raises:
            ValueError: ``edge_type`` / ``edge_attr`` given without ``edge_types`` / ``edge_dim`` or
                missing with them; ``x`` of the wrong width or shape.
        """
        x_src, x_dst = (x, x) if isinstance(x, Tensor) else x
        if x_dst is None:
            raise ValueError("bipartite x must be (x_src, x_dst), both tensors")
        for side in (x_src, x_dst):
            if side.dim() != 2 or (self.in_channels != -1 and side.shape[-1] != self.in_channels):
                raise ValueError(f"x must be (N, {self.in_channels}) (or a pair of them), got {tuple(side.shape)}")
        edge_index, edge_attr, size = self._edge_index(edge_index, edge_attr, size)
        self._check_edges(edge_type, edge_attr)
        num_src, num_dst = (x_src.shape[0], x_dst.shape[0]) if size is None else size
        if self.add_self_loops:
            edge_index, edge_attr, edge_type = self._self_loops(edge_index, edge_attr, edge_type,
                                                                min(num_src, num_dst))
        query, key, values_src, gate = self._node_terms(x_src)  # (N_s, e) x 2, (N_s, H*C) x 2
        values_dst = values_src
        if x_dst is not x_src:  # bipartite: queries, gate and residual from the targets
            query, _, values_dst, gate = self._node_terms(x_dst)  # (N_t, e), (N_t, H*C), (N_t, H*C)
        edge_vecs = None  # (E, e): E_t + W_a a per edge
        if edge_type is not None:
            edge_vecs = self.edge_emb(edge_type)
        if edge_attr is not None:
            projected = self.lin_edge(edge_attr.view(edge_attr.shape[0], -1))  # (E, e)
            edge_vecs = projected if edge_vecs is None else edge_vecs + projected
        message, alpha = self._attend(query, key, values_src, edge_index, edge_vecs, (num_src, num_dst))
        out = self._update(gate, values_dst, message)  # (N_t, H*C) or (N_t, C)
        return (out, (edge_index, alpha)) if return_attention_weights else out

    def _edge_index(self, edge_index: Adj, edge_attr: Tensor | None,
                    size: tuple[int, int] | None) -> tuple[Tensor, Tensor | None, tuple[int, int] | None]:
        """``(2, E)`` source-target indices from an ``edge_index`` or a sparse ``adj_t`` (target by source),
        the sparse tensor's values as ``edge_attr`` when the layer takes features and none were given."""
        if isinstance(edge_index, Tensor) and not is_torch_sparse_tensor(edge_index):
            return edge_index, edge_attr, size
        if not isinstance(edge_index, Tensor) and not is_sparse(edge_index):
            raise ValueError(f"edge_index must be a (2, E) tensor, a SparseTensor or a torch.sparse adj_t, "
                             f"got {type(edge_index).__name__}")
        num_dst, num_src = edge_index.size(0), edge_index.size(1)  # adj_t: (N_t, N_s)
        index, values = to_edge_index(edge_index)  # (2, E) rows = targets, cols = sources
        if edge_attr is None and self.edge_dim is not None:
            edge_attr = values
        return index.flip(0), edge_attr, (num_src, num_dst) if size is None else size

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

    def _attend(self, query: Tensor, key: Tensor, values: Tensor, edge_index: Tensor, edge_vecs: Tensor | None,
                size: tuple[int, int]) -> tuple[Tensor, Tensor]:
        """The edges' part: the weighted sum ``(N_t, H*C)`` and ``alpha (E, H)`` from ``query (N_t, e)``,
        ``key (N_s, e)``, ``values (N_s, H*C)``. Eager on the CPU (:meth:`_bags_apply`): embedding-bag sums
        over the edges grouped by target and by source (:class:`_PairSum`, :class:`_WeightedSum`);
        otherwise gathers and PyG's ``propagate``."""
        (src, dst), (num_src, num_dst) = edge_index, size
        groups = None
        if self._bags_apply(values):
            src, dst = src.long(), dst.long()  # embedding_bag's indices and offsets: one integer type
            groups = (*_group(dst, num_dst), *_group(src, num_src))  # by target, by source: order (E,), ptr (N+1,)
            pre = _PairSum.apply(query, key, src, dst, *groups)  # (E, e)  W_q x_i + W_k x_j
        else:
            pre = query.index_select(0, dst) + key.index_select(0, src)  # (E, e)
        alpha = self.edge_updater(edge_index, pre=pre, edge_vecs=edge_vecs, src=src, num_src=num_src,
                                  size=size)  # (E, H)
        if groups is not None:
            return _WeightedSum.apply(values, alpha, src, dst, *groups), alpha  # (N_t, H*C), (E, H)
        heads = values.view(-1, self.heads, self.out_channels)  # (N_s, H, C)
        return self.propagate(edge_index, values=heads, alpha=alpha, size=size).flatten(1), alpha

    def edge_update(self, pre: Tensor, edge_vecs: Tensor | None, src: Tensor, num_src: int, index: Tensor,
                    ptr: Tensor | None, dim_size: int | None) -> Tensor:
        """``alpha (E, H)`` from ``pre = W_q x_i + W_k x_j (E, e)``: ``s^h_ij`` (``centered``: less each
        source's mean over its outgoing edges) normalised over each target's incoming edges."""
        if edge_vecs is not None:
            pre = pre.add_(edge_vecs)  # (E, e)  + E_t + W_a a, in place: the sum is not kept for backward
        energy = pre.tanh_()  # (E, e)
        heads, rows = self.att.shape  # H, e/H
        eye = torch.eye(heads, dtype=self.att.dtype, device=self.att.device)  # (H, H)
        blocks = (self.att.unsqueeze(-1) * eye.unsqueeze(1)).view(heads * rows, heads)  # (e, H) u_h in block h
        score = energy @ blocks  # (E, H)  u_h^T tanh(...)_h: one matrix product, no (E, e) product kept
        if self.energy_form == "centered":  # s_ij - c_j, c_j the mean over the targets j sends to
            score = score - scatter(score, src, dim=0, dim_size=num_src, reduce="mean")[src]  # (E, H)
        if self.edge_weights == "softmax":
            return softmax(score, index, ptr, dim_size)  # (E, H)
        return _sparse_normalise(score, index, dim_size, self.edge_weights)  # (E, H)

    def message(self, values_j: Tensor, alpha: Tensor) -> Tensor:
        """``alpha^h_ij h_j^(h)``: ``(E, H, C)``."""
        return values_j * alpha.unsqueeze(-1)

    def _bags_apply(self, values: Tensor) -> bool:
        """Whether the embedding-bag kernels may replace the gathers and ``propagate``: on the CPU, eager
        (``torch.compile`` fuses the gathers and scatters itself), and ``propagate`` would only sum
        ``alpha_ij h_j`` into each target (the ``add`` aggregation, ``source_to_target``, no explain mask,
        no hooks)."""
        hooks = (self._propagate_forward_pre_hooks, self._propagate_forward_hooks, self._message_forward_pre_hooks,
                 self._message_forward_hooks, self._aggregate_forward_pre_hooks, self._aggregate_forward_hooks)
        return (values.device.type == "cpu" and not torch.compiler.is_compiling() and self.aggr == "add"
                and self.flow == "source_to_target" and not self.explain
                and self._decomposed_layers == 1 and not any(hooks))


class _PairSum(torch.autograd.Function):
    """``query[dst] + key[src]`` ``(E, e)``: forward one embedding-bag sum of two rows per edge (one
    ``(E, e)`` write instead of two gathers and a sum); backward the gradient summed per target and per
    source by embedding-bag sums over the grouped edges (no scatter into the nodes)."""

    @staticmethod
    def forward(ctx, query: Tensor, key: Tensor, src: Tensor, dst: Tensor, order_t: Tensor, ptr_t: Tensor,
                order_s: Tensor, ptr_s: Tensor) -> Tensor:
        ctx.save_for_backward(order_t, ptr_t, order_s, ptr_s)
        rows = torch.stack([dst, src + query.shape[0]], dim=1)  # (E, 2) rows of [query; key]
        return F.embedding_bag(rows, torch.cat([query, key]), mode="sum")  # (E, e)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:
        order_t, ptr_t, order_s, ptr_s = ctx.saved_tensors
        grad = grad.contiguous()  # (E, e)
        sums = [F.embedding_bag(order, grad, ptr, mode="sum", include_last_offset=True) if needed else None
                for order, ptr, needed in ((order_t, ptr_t, ctx.needs_input_grad[0]),
                                           (order_s, ptr_s, ctx.needs_input_grad[1]))]  # (N_t, e), (N_s, e)
        return (*sums, None, None, None, None, None, None)


class _WeightedSum(torch.autograd.Function):
    """``sum_{j -> i} alpha^h_ij h_j^(h)`` for each target ``i`` and head ``h``, on the CPU without the
    ``(E, H*C)`` messages that gather-multiply-scatter writes and its backward reads again.

    Forward: one :func:`torch.nn.functional.embedding_bag` sum weighted by ``alpha``, a bag per (head,
    target) over the rows ``j * H + h`` of ``values`` seen as ``(N_s * H, C)``. Backward, in two named
    passes: the values' gradient is the same weighted sum on the reversed edges (a bag per (head,
    source)); the weights' gradient is each edge's dot product ``<grad_i^(h), h_j^(h)>``, computed by
    :func:`torch.sparse.sampled_addmm` at the edges only, or, under ``create_graph`` (a second derivative;
    ``sampled_addmm`` has none over a batch), by differentiable gathers.
    """

    @staticmethod
    def forward(ctx, values: Tensor, alpha: Tensor, src: Tensor, dst: Tensor, order_t: Tensor, ptr_t: Tensor,
                order_s: Tensor, ptr_s: Tensor) -> Tensor:
        """``values (N_s, H*C)``, ``alpha (E, H)``, ``src, dst (E,)``, the edges grouped by target and by
        source (:func:`_group`) -> ``(N_t, H*C)`` (zero rows for targets without incoming edges)."""
        ctx.save_for_backward(values, alpha, src, dst, order_t, ptr_t, order_s, ptr_s)
        return _bag_sum(values, alpha, src, order_t, ptr_t)  # (N_t, H*C)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:
        values, alpha, src, dst, order_t, ptr_t, order_s, ptr_s = ctx.saved_tensors
        grad = grad.contiguous()  # (N_t, H*C)
        grad_values = grad_alpha = None
        if ctx.needs_input_grad[0]:  # pass 1: d values_j = sum_{j -> i} alpha_ij grad_i
            grad_values = _bag_sum(grad, alpha, dst, order_s, ptr_s)  # (N_s, H*C)
        if ctx.needs_input_grad[1] and torch.is_grad_enabled():  # create_graph: a differentiable pass 2
            heads = alpha.shape[1]
            grad_alpha = (grad.index_select(0, dst).unflatten(1, (heads, -1))
                          * values.index_select(0, src).unflatten(1, (heads, -1))).sum(dim=-1)  # (E, H)
        elif ctx.needs_input_grad[1]:  # pass 2: d alpha_ij = <grad_i, values_j> per head
            grad_alpha = _edge_dots(grad, values, alpha.shape[1], src[order_t], ptr_t).T  # (E, H) target order
            grad_alpha = torch.empty_like(alpha).index_copy_(0, order_t, grad_alpha)  # (E, H) in edge order
        return grad_values, grad_alpha, None, None, None, None, None, None


def _group(index: Tensor, num_groups: int) -> tuple[Tensor, Tensor]:
    """``order (E,)``: the edges sorted (stably) by ``index``; ``ptr (G + 1,)``: where each group starts."""
    key, order = torch.sort(index, stable=True)  # (E,), (E,)
    return order, torch.searchsorted(key, torch.arange(num_groups + 1, device=key.device))  # (G + 1,)


def _bag_sum(table: Tensor, weights: Tensor, member: Tensor, order: Tensor, ptr: Tensor) -> Tensor:
    """``out_g = sum_{e in g} weights_e^h table[member_e]^(h)``: ``table (N, H*C)``, ``weights (E, H)``,
    ``member (E,)``; the groups given by ``order`` and ``ptr`` (:func:`_group`) -> ``(G, H*C)``."""
    (num_edges, heads), groups = weights.shape, ptr.shape[0] - 1  # E, H, G
    channels = table.shape[1] // heads  # C
    head = torch.arange(heads, device=table.device).unsqueeze(1)  # (H, 1)
    rows = member[order].unsqueeze(0) * heads + head  # (H, E) row (j, h) of table as (N * H, C)
    offsets = ptr[:-1].unsqueeze(0) + head * num_edges  # (H, G) start of bag (h, g)
    summed = F.embedding_bag(rows.reshape(-1), table.reshape(-1, channels), offsets.reshape(-1), mode="sum",
                             per_sample_weights=weights[order].T.reshape(-1))  # (H * G, C)
    return summed.view(heads, groups, channels).transpose(0, 1).reshape(groups, heads * channels)  # (G, H*C)


def _edge_dots(grad: Tensor, values: Tensor, heads: int, src_sorted: Tensor, ptr: Tensor) -> Tensor:
    """``(H, E)``: ``<grad_i^(h), values_j^(h)>`` for the edges in target order (``src_sorted`` their sources,
    ``ptr`` the targets' starts), in at least fp32 (``sampled_addmm`` takes no bf16)."""
    acc = torch.promote_types(grad.dtype, torch.float32)
    (num_dst, width), num_src, num_edges = grad.shape, values.shape[0], src_sorted.shape[0]
    queries = grad.to(acc).view(num_dst, heads, width // heads).transpose(0, 1).contiguous()  # (H, N_t, C)
    keys = values.to(acc).view(num_src, heads, width // heads).permute(1, 2, 0).contiguous()  # (H, C, N_s)
    with warnings.catch_warnings():  # torch's one-time note that sparse CSR is in beta
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        pattern = torch.sparse_csr_tensor(ptr.expand(heads, -1).contiguous(), src_sorted.expand(heads, -1).contiguous(),
                                          grad.new_zeros(heads, num_edges, dtype=acc),
                                          size=(heads, num_dst, num_src), check_invariants=False)  # (H, N_t, N_s)
    return torch.sparse.sampled_addmm(pattern, queries, keys, beta=0.0).values().to(grad.dtype)  # (H, E)


def _sparse_normalise(score: Tensor, index: Tensor, num_nodes: int, edge_weights: str) -> Tensor:
    """sparsemax / 1.5-entmax of ``score (E, H)`` over each target's incoming edges (``index (E,)``):
    the edges padded into a ``(N_t, max in-degree, H)`` block (``entmax`` normalises along a dense axis)."""
    import entmax  # the maintained implementation, as cn3.layers.edge_weights.normalise

    fn = entmax.sparsemax if edge_weights == "sparsemax" else entmax.entmax15
    order = index.argsort(stable=True)  # (E,) edges grouped by target
    acc = torch.promote_types(score.dtype, torch.float32)  # bf16 scores: thresholds in fp32
    block, real = to_dense_batch(score[order].to(acc), index[order], fill_value=_FORBIDDEN,
                                 batch_size=num_nodes)  # (N_t, D, H), (N_t, D)
    weights = fn(block, dim=1)[real].to(score.dtype)  # (E, H) in target order
    return torch.empty_like(weights).index_copy_(0, order, weights)  # (E, H) in edge order
