"""The CN3 dynamic-graph layer (Liu et al., "Contextualized Non-local Neural Networks for
Sequence Learning", AAAI 2019) and its attention: every sentence becomes a fully connected graph
over its words whose edge weights are learned per input, messages flow along them, and a gate
decides how much of each node is rewritten.

For node ``i`` and every node ``k`` of the same sentence::

    s_ik    = u^T tanh(W [h_k, h_i, v_i, v_k, e_ik])     energy
    alpha_ik = softmax_k(s_ik)                            soft adjacency, real nodes only
    h~_i    = sum_k alpha_ik h_k                          message passing
    g_i     = sigmoid(W_g h_i + b)                        gate (one value per hidden unit)
    h'_i    = g_i * h~_i + (1 - g_i) * h_i                gated update

``W`` is applied block by block, ``W_1 h_k + W_2 h_i + W_3 v_i + W_4 v_k + W_5 e_ik``, so the
``[B, N, N, 2d + ...]`` concatenation never exists: node terms are projected once per node, the
edge term once per edge type and gathered per pair.

Two options beyond the paper (the learned graphs are stars: one head cannot attend to two places),
both off by default (the paper's layer):

* ``energy_heads = H``: ``H`` energies, each its own soft graph over its own slice of the states::

      s^h_ik   = u_h^T tanh(W_h [h_k, h_i, v_i, v_k, e_ik])     W_h: energy_dim / H rows
      alpha^h  = softmax_k(s^h_ik)
      h~_i     = concat_h( sum_k alpha^h_ik h_k[slice_h] )      slice_h: the h-th of H equal slices

  No value projection is added and the gate is unchanged; the energy costs what one head of
  ``energy_dim`` rows costs.
* relative positions (:class:`DynamicGraphEncoder`, ``relative_positions = C``): the clipped offset
  ``clip(k - i, -C, C)`` joins the edge type, so ``e_ik`` also says where ``k`` lies from ``i``.

One function, :func:`cn3_attention`, computes energy, weights and messages for
:class:`DynamicGraphLayer` and :class:`cn3.nn.DenseCN3Conv`, on the path the layer's ``impl`` picks
(``model.attention_impl`` on sentence tasks, ``model.cn3.attention_impl`` on translation; ``auto``:
:func:`choose_impl`), the same function to rounding:

* ``blockwise`` (:class:`BlockwiseAdditiveAttention`, below): blocks of query rows of about 8 MB, one
  head at a time (why a loop over heads: :func:`cn3_attention`).
* ``dense``: the same autograd Function with blocks of :data:`DENSE_ELEMENTS`.
* ``fused`` (:mod:`cn3.layers.fused_energy`): one Triton kernel forward and two backward passes for
  all heads (a ``torch.library`` op: ``torch.compile`` traces through it), memory O(B N (d + e)); on
  CPU tensors only under Triton's interpreter.

Options beyond the paper's softmax (``edge_weights``, ``energy_form``) run
:func:`cn3.layers.edge_weights.graph_attention`. ``alpha`` is the only O(B N^2) output:
``need_alpha=False`` returns None in its place, which lets the fused path skip writing it.

Why blocks: broadcasting materialises ``tanh(q_i + k_k + E[t_ik])`` as a ``(B, N, N, e)`` tensor that
autograd keeps with its input (3.75 GB each at N = 2,500, e = 150). The blockwise Function walks blocks
of whole query rows, so energy and masked softmax finish inside a block and one block of ``tanh``
exists at a time; its backward recomputes ``tanh`` block by block from the saved ``q``, ``k``
(``(B, N, e)``), ``u``, edge vectors and types, values, output and the ``(B, N, N)`` weights (``e``
times smaller than ``tanh``, and kept by callers as ``alpha`` anyway). Under ``torch.autocast`` the
per-block work (``tanh``, energy, context GEMM) runs in the projections' dtype; the softmax, saved
weights and gradient accumulators stay fp32, and each gradient is returned in its input's dtype.
"""

from __future__ import annotations

import importlib.util
import warnings

import torch
from torch import Tensor, nn

from cn3.layers.attention import attend, gated_mix, masked_softmax
from cn3.layers.edge_weights import (
    EDGE_WEIGHTS,
    ENERGY_FORMS,
    HUB_BOUND,
    GraphParts,
    graph_attention,
    hub_penalty,
    parse_loss,
)

#: Values of ``impl``: ``auto`` picks by device (:func:`choose_impl`), the others force a path.
IMPLS = ("auto", "blockwise", "dense", "fused")
#: The widest value slice per head (``hidden / energy_heads``) ``auto`` gives the fused kernel: its
#: ``(rows, width)`` accumulators live in registers (the width padded to a power of two).
FUSED_MAX_WIDTH = 512
#: The longest sentence (keys per row) ``auto`` gives the fused kernel; the dense path was measured
#: the faster above it (docs/benchmarks.md, "Measured on one NVIDIA H200").
FUSED_MAX_LENGTH = 512
#: Elements of the ``(B, rows, Nk, e)`` block buffer (8 MB in float32): blocks as large as the
#: 64 MB per-layer budget at N = 2,500 allows (each block has a fixed dispatch cost).
BLOCK_ELEMENTS = 1 << 21
#: Elements of one block on the dense path (256 MB in float32): one block per batch up to
#: ``B N^2 e`` = 2^26, while leaving a GPU's memory to the model (each block costs kernel launches).
DENSE_ELEMENTS = 1 << 26


def fused_available() -> bool:
    """Triton is installed: what the fused kernel needs beyond a CUDA device."""
    return importlib.util.find_spec("triton") is not None


def choose_impl(impl: str, device: torch.device, width: int = 0, length: int = 0) -> str:
    """The path ``impl`` (one of :data:`IMPLS`) runs on ``device`` for value slices of ``width``
    and sentences of ``length`` words (padded).

    ``auto``: ``fused`` on CUDA with Triton; ``dense`` on CUDA without it, under
    ``torch.use_deterministic_algorithms`` (the fused backward sums with atomics, in no fixed
    order), or above :data:`FUSED_MAX_WIDTH` or :data:`FUSED_MAX_LENGTH`; ``blockwise`` off CUDA.
    Other values are returned as they are.

    Raises:
        ValueError: ``impl`` is not one of :data:`IMPLS`.
    """
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {', '.join(IMPLS)}, got {impl!r}")
    if impl != "auto":
        return impl
    if device.type != "cuda":
        return "blockwise"
    if (fused_available() and not torch.are_deterministic_algorithms_enabled() and width <= FUSED_MAX_WIDTH
            and length <= FUSED_MAX_LENGTH):
        return "fused"
    return "dense"


def default_block_rows(batch: int, n_keys: int, energy_dim: int, budget: int = BLOCK_ELEMENTS) -> int:
    """Query rows per block so that one block holds about ``budget`` elements (default
    :data:`BLOCK_ELEMENTS`; the dense path passes :data:`DENSE_ELEMENTS`)."""
    return max(1, budget // max(1, batch * n_keys * energy_dim))


def cn3_attention(query: Tensor, key: Tensor, u: Tensor, values: Tensor, mask: Tensor,
                  edge_vecs: Tensor | None = None, edge_type: Tensor | None = None,
                  pair_vecs: Tensor | None = None, keys: Tensor | None = None, impl: str = "auto",
                  need_alpha: bool = True, block_rows: int | None = None, edge_weights: str = "softmax",
                  energy_form: str = "additive") -> tuple[Tensor, Tensor | None]:
    """CN3's energy, softmax and messages for ``H`` heads on the path :func:`choose_impl` picks: the
    one function behind :class:`DynamicGraphLayer` and :mod:`cn3.nn`'s dense layer.

    ``s^h_ik = u_h^T tanh(q^h_i + k^h_k [+ edge_vecs^h[t_ik]] [+ pair_vecs^h_ik])``,
    ``alpha^h_ik = softmax_k(s^h_ik)`` over the allowed keys (``mask_k`` and ``keys_ik``),
    ``out_i = concat_h sum_k alpha^h_ik values_k[slice_h]``; head ``h`` owns columns
    ``h e/H : (h+1) e/H`` of the projections and slice ``h d/H : (h+1) d/H`` of the values.

    The PyTorch paths loop over the heads, one :func:`additive_attention` call each on that head's
    columns. Folding the heads into a tensor dimension (one ``(B, r, N, e)`` block of ``tanh`` for all
    heads, the scores one product with a block-diagonal ``(e, H)`` matrix, ``(B, H, r, N)`` softmax
    blocks, a ``(B H)``-batched context) was written and measured slower on the CPU, for one head as well
    as several: a skinny ``(e, H)`` product is slower than ``H`` matrix-vector products, the ``(B, H)``
    batches are smaller GEMMs, and the per-block reshapes cost dispatches (docs/design.md, "The CN3
    layer in two files"). Each head's copy of its columns (``(B, N, e/H)``) is ``N`` times smaller than
    one block of ``tanh``.

    Args:
        query, key: ``(B, N, e)`` per-node projections ``q_i``, ``k_k``.
        u: ``(H, e/H)``.
        values: ``(B, N, d)``; ``H`` divides ``d``.
        mask: ``(B, N)`` bool, True at real nodes (padded queries get zero weights).
        edge_vecs, edge_type: ``(T, e)`` one vector per edge type and ``(B, N, N)`` long in ``[0, T)``,
            or both None.
        pair_vecs: ``(B, N, N, e)`` float, one energy term per pair (projected edge features), or None.
        keys: ``(B, N, N)`` bool, True where query ``i`` may attend key ``k``, or None (every real key).
            A query with no allowed key gets all-zero weights and a zero output.
        impl: one of :data:`IMPLS`. The fused kernel serves neither ``pair_vecs`` nor ``keys``: with
            either, ``fused`` (given or chosen) runs the dense path instead.
        need_alpha: the fused path returns None for ``alpha`` without it (the others always return it).
        block_rows: query rows per block on the PyTorch paths; None picks by size.
        edge_weights, energy_form: one of :data:`~cn3.layers.edge_weights.EDGE_WEIGHTS` and of
            :data:`~cn3.layers.edge_weights.ENERGY_FORMS`. Anything but ``softmax`` + ``additive`` runs
            :func:`cn3.layers.edge_weights.graph_attention` (PyTorch, on every device; the fused kernel
            serves the paper's softmax only) and returns differentiable weights.

    Shapes:
        returns ``out (B, N, d)`` and ``alpha (B, H, N, N)`` (or None, see ``need_alpha``).
    """
    heads = u.shape[0]
    if edge_weights != "softmax" or energy_form != "additive":
        if pair_vecs is not None:
            edge_vecs, edge_type = pair_table(pair_vecs, edge_vecs, edge_type)
        if block_rows is None:
            budget = BLOCK_ELEMENTS if query.device.type != "cuda" else DENSE_ELEMENTS
            block_rows = default_block_rows(query.shape[0], query.shape[1], query.shape[-1], budget=budget)
        out, alpha, _, _ = graph_attention(query, key, u, values, mask, edge_vecs, edge_type, keys, edge_weights,
                                           energy_form, block_rows)
        return out, alpha if need_alpha else None
    path = choose_impl(impl, query.device, values.shape[-1] // heads, query.shape[1])
    if path == "fused" and pair_vecs is None and keys is None:
        from cn3.layers.fused_energy import fused_additive_attention  # needs triton: only on this path

        return fused_additive_attention(query, key, u, values, mask, mask, edge_vecs, edge_type, need_alpha)
    if pair_vecs is not None:
        edge_vecs, edge_type = pair_table(pair_vecs, edge_vecs, edge_type)
    if block_rows is None and (path != "blockwise" or keys is not None):
        budget = BLOCK_ELEMENTS if path == "blockwise" else DENSE_ELEMENTS
        block_rows = default_block_rows(query.shape[0], query.shape[1], query.shape[-1] // heads, budget=budget)
    allowed = None if keys is None else keys & mask.unsqueeze(1)  # (B, N, N)
    return _attend_heads(query, key, u, values, mask, allowed, edge_vecs, edge_type, block_rows)


def _attend_heads(query: Tensor, key: Tensor, u: Tensor, values: Tensor, mask: Tensor, allowed: Tensor | None,
                  edge_vecs: Tensor | None, edge_type: Tensor | None, block_rows: int | None) -> tuple[Tensor, Tensor]:
    """:func:`cn3_attention`'s PyTorch paths: one :func:`_attend_rows` call per head on that head's columns
    (shapes and arguments as there; ``allowed`` the keys each query may read, or None).
    Returns ``out (B, N, d)`` and ``alpha (B, H, N, N)``."""
    heads = u.shape[0]
    contexts, alphas = [], []
    for head in range(heads):
        if heads == 1:  # the projections as they are: no slicing, no copies
            cols, vcols = slice(None), slice(None)
        else:
            rows, width = u.shape[-1], values.shape[-1] // heads
            cols, vcols = slice(head * rows, (head + 1) * rows), slice(head * width, (head + 1) * width)
        context, alpha = _attend_rows(
            query[..., cols].contiguous(), key[..., cols].contiguous(), u[head], values[..., vcols].contiguous(),
            mask, allowed, None if edge_vecs is None else edge_vecs[:, cols].contiguous(), edge_type,
            block_rows)  # (B, N, d/H), (B, N, N)
        contexts.append(context)
        alphas.append(alpha)
    if heads == 1:
        return contexts[0], alphas[0].unsqueeze(1)
    return torch.cat(contexts, dim=-1), torch.stack(alphas, dim=1)  # (B, N, d), (B, H, N, N)


def pair_table(pair_vecs: Tensor, edge_vecs: Tensor | None, edge_type: Tensor | None) -> tuple[Tensor, Tensor]:
    """Per-pair energy terms as an edge-type table: one "type" per pair, ``(B N N, e)`` and its
    ``(B, N, N)`` index, so :func:`additive_attention` gathers them as it gathers edge types."""
    batch, n_query, n_key, dim = pair_vecs.shape
    table = pair_vecs.reshape(-1, dim)  # (B N N, e)
    if edge_vecs is not None:
        table = table + edge_vecs[edge_type.reshape(-1)]  # + E[t_ik]
    index = torch.arange(batch * n_query * n_key, device=pair_vecs.device).view(batch, n_query, n_key)
    return table, index


def _attend_rows(query: Tensor, key: Tensor, u: Tensor, values: Tensor, mask: Tensor, allowed: Tensor | None,
                 edge_vecs: Tensor | None, edge_type: Tensor | None,
                 block_rows: int | None) -> tuple[Tensor, Tensor]:
    """One head of :func:`cn3_attention` on the PyTorch path. A per-pair key mask (``allowed``,
    ``(B, N, N)``) is cut into blocks of query rows here, one :func:`additive_attention` call each,
    because that function takes one key mask for all its blocks."""
    if allowed is None:
        return additive_attention(query, key, u, values, key_mask=mask, query_mask=mask, edge_vecs=edge_vecs,
                                  edge_type=edge_type, block_rows=block_rows)  # (B, N, d), (B, N, N)
    contexts, alphas = [], []
    for start in range(0, query.shape[1], block_rows):
        rows = slice(start, start + block_rows)
        context, alpha = additive_attention(
            query[:, rows], key, u, values, key_mask=allowed[:, rows], query_mask=mask[:, rows],
            edge_vecs=edge_vecs, edge_type=None if edge_type is None else edge_type[:, rows],
            block_rows=block_rows)  # (B, r, d), (B, r, N)
        contexts.append(context)
        alphas.append(alpha)
    return torch.cat(contexts, dim=1), torch.cat(alphas, dim=1)  # (B, N, d), (B, N, N)


def _block_tanh(buffer: Tensor, query: Tensor, key: Tensor, edge_vecs: Tensor | None,
                edge_type: Tensor | None, rows: slice) -> Tensor:
    """``tanh(q_i + k_k [+ E[t_ik]])`` for the query rows ``rows``, written into ``buffer``.

    Every block reuses one flat buffer: a fresh multi-megabyte tensor per block costs more in
    page faults than the arithmetic.
    """
    batch, n_rows, n_keys, dim = query.shape[0], query[:, rows].shape[1], *key.shape[1:]
    # the last block may be shorter: a contiguous prefix of the flat buffer
    out = buffer[: batch * n_rows * n_keys * dim].view(batch, n_rows, n_keys, dim)
    if edge_vecs is None:
        torch.add(query[:, rows, None, :], key[:, None, :, :], out=out)  # (B, r, Nk, e)
    else:
        torch.index_select(edge_vecs, 0, edge_type[:, rows].reshape(-1), out=out.view(-1, dim))
        out += query[:, rows, None, :]
        out += key[:, None, :, :]
    return out.tanh_()


class BlockwiseAdditiveAttention(torch.autograd.Function):
    """The autograd Function behind :func:`additive_attention` (same tensors, positional):
    ``apply(query, key, u, edge_vecs, edge_type, values, key_mask, query_mask, block_rows)`` ->
    ``context (B, Nq, d)`` and ``weights (B, Nq, Nk)`` (not differentiable).
    """

    @staticmethod
    def forward(ctx, query: Tensor, key: Tensor, u: Tensor, edge_vecs: Tensor | None,
                edge_type: Tensor | None, values: Tensor, key_mask: Tensor | None,
                query_mask: Tensor | None, block_rows: int) -> tuple[Tensor, Tensor]:
        ctx.dtypes = (query.dtype, key.dtype, u.dtype, None if edge_vecs is None else edge_vecs.dtype,
                      values.dtype)
        compute = query.dtype  # the autocast dtype under autocast (see the module docstring)
        key, u, values = key.to(compute), u.to(compute), values.to(compute)
        edge_vecs = None if edge_vecs is None else edge_vecs.to(compute)
        batch, n_query, dim = query.shape
        acc = torch.promote_types(compute, torch.float32)  # fp32, or fp64 for gradcheck
        weights = values.new_empty(batch, n_query, key.shape[1], dtype=acc)  # (B, Nq, Nk)
        buffer = query.new_empty(batch * min(block_rows, n_query) * key.shape[1] * dim)
        for rows in _blocks(n_query, block_rows):
            tanh = _block_tanh(buffer, query, key, edge_vecs, edge_type, rows)  # (B, r, Nk, e)
            weights[:, rows] = masked_softmax((tanh @ u).to(acc), key_mask,
                                              query_mask=_rows(query_mask, rows))  # (B, r, Nk)
        context = attend(weights.to(compute), values)  # (B, Nq, d), one large GEMM
        # The weights are saved rather than recomputed (saves ~10% of the time): they are the
        # output callers keep for inspection anyway, and (B, N, N) is e times smaller than tanh.
        ctx.save_for_backward(query, key, u, edge_vecs, edge_type, values, weights, context)
        ctx.block_rows = block_rows
        ctx.mark_non_differentiable(weights)
        ctx.set_materialize_grads(False)  # else backward gets a (B, N, N) zero grad for weights
        return context, weights

    @staticmethod
    def backward(ctx, grad_context: Tensor | None, _grad_weights: None):
        if grad_context is None:
            return (None,) * 9
        query, key, u, edge_vecs, edge_type, values, weights, context = ctx.saved_tensors
        need_q, need_k, need_u, need_e, _, need_v = ctx.needs_input_grad[:6]
        batch, n_query, dim = query.shape
        compute, acc = query.dtype, weights.dtype  # block work in ``compute``, sums in fp32 (or fp64)
        grad_context = grad_context.to(acc)
        values_acc = values.to(acc)
        # The gradient w.r.t. the tanh input is u * G, G = dL/ds * (1 - tanh^2); q_i, k_k and
        # E[t_ik] all receive sums of it, so sum G and multiply by u once at the end.
        grad_q = query.new_zeros(query.shape, dtype=acc)  # (B, Nq, e): sum_k G_ik
        grad_k = key.new_zeros(key.shape, dtype=acc)  # (B, Nk, e): sum_i G_ik
        grad_u = u.new_zeros(u.shape, dtype=acc)  # (e,): sum_ik dL/ds_ik tanh_ik
        grad_e = edge_vecs.new_zeros(edge_vecs.shape, dtype=acc) if need_e else None  # (T, e)
        grad_v = values.new_zeros(values.shape, dtype=acc)  # (B, Nk, d)
        # softmax backward needs <dL/dw_i, w_i> = sum_k w_ik <dL/dh~_i, v_k> = <dL/dh~_i, h~_i>
        # (the FlashAttention identity): one number per row, from the saved output.
        row_dot = (grad_context * context.to(acc)).sum(dim=-1, keepdim=True)  # (B, Nq, 1)
        buffer = query.new_empty(batch * min(ctx.block_rows, n_query) * key.shape[1] * dim)
        for rows in _blocks(n_query, ctx.block_rows):
            tanh = _block_tanh(buffer, query, key, edge_vecs, edge_type, rows)  # (B, r, Nk, e)
            w = weights[:, rows]  # (B, r, Nk), in ``acc``
            grad_out = grad_context[:, rows]  # (B, r, d)
            if need_v:
                grad_v.baddbmm_(w.transpose(1, 2), grad_out)  # h~ = w v  =>  dv = w^T dh~
            # dL/ds = w * (dL/dw - <dL/dw, w>), dL/dw = dL/dh~ v^T
            grad_s = torch.bmm(grad_out, values_acc.transpose(1, 2))  # (B, r, Nk)
            grad_s.sub_(row_dot[:, rows]).mul_(w)
            grad_s = grad_s.to(compute)
            if need_u:
                grad_u += torch.mv(tanh.reshape(-1, dim).t(), grad_s.reshape(-1))
            # tanh_backward(g, t) = g (1 - t^2) in one pass, in place over the tanh block
            g_pre = torch.ops.aten.tanh_backward.grad_input(grad_s.unsqueeze(-1), tanh,
                                                            grad_input=tanh)
            if need_q:
                grad_q[:, rows] = g_pre.sum(dim=2)
            if need_k:
                # the sum over the block's rows as a batched GEMV: ~2x faster than .sum(dim=1)
                ones = g_pre.new_ones(batch, 1, g_pre.shape[1])  # (B, 1, r)
                rows_view = g_pre.view(batch, g_pre.shape[1], -1)  # (B, r, Nk*e)
                if g_pre.dtype == grad_k.dtype:  # fp32: accumulate in place, no temporary per block
                    grad_k.view(batch, 1, -1).baddbmm_(ones, rows_view)
                else:  # bf16 block, fp32 sum (baddbmm_ needs one dtype)
                    grad_k.view(batch, 1, -1).add_(torch.bmm(ones, rows_view))
            if need_e:
                grad_e.index_add_(0, edge_type[:, rows].reshape(-1), g_pre.reshape(-1, dim).to(acc))
        u_acc = u.to(acc)
        dq, dk, du, de, dv = ctx.dtypes
        return (grad_q.mul_(u_acc).to(dq) if need_q else None, grad_k.mul_(u_acc).to(dk) if need_k else None,
                grad_u.to(du) if need_u else None, grad_e.mul_(u_acc).to(de) if need_e else None, None,
                grad_v.to(dv) if need_v else None, None, None, None)


def _blocks(n: int, block_rows: int) -> list[slice]:
    return [slice(start, start + block_rows) for start in range(0, n, block_rows)]


def _rows(mask: Tensor | None, rows: slice) -> Tensor | None:
    return None if mask is None else mask[:, rows]


def additive_attention(query: Tensor, key: Tensor, u: Tensor, values: Tensor,
                       key_mask: Tensor | None = None, query_mask: Tensor | None = None,
                       edge_vecs: Tensor | None = None, edge_type: Tensor | None = None,
                       block_rows: int | None = None) -> tuple[Tensor, Tensor]:
    """Additive attention in memory bounded by one block of query rows.

    ``s_ik = u^T tanh(q_i + k_k [+ edge_vecs[edge_type_ik]])``, ``alpha = masked_softmax(s)``,
    ``out_i = sum_k alpha_ik values_k``.

    Args:
        query: ``(B, Nq, e)`` per-node query-side projections ``q_i``.
        key: ``(B, Nk, e)`` per-node key-side projections ``k_k``.
        u: ``(e,)`` energy vector.
        values: ``(B, Nk, d)``.
        key_mask: ``(B, Nk)`` bool, True at keys that may be attended.
        query_mask: ``(B, Nq)`` bool, True at real queries (other rows get zero weights).
        edge_vecs: ``(T, e)`` one vector per edge type, or None.
        edge_type: ``(B, Nq, Nk)`` long in ``[0, T)``, with ``edge_vecs``.
        block_rows: query rows per block; default :func:`default_block_rows`.

    Shapes:
        returns ``out (B, Nq, d)`` and ``alpha (B, Nq, Nk)`` (not differentiable).
    """
    if (edge_vecs is None) != (edge_type is None):
        raise ValueError("edge_vecs and edge_type go together")
    if block_rows is None:
        block_rows = default_block_rows(query.shape[0], key.shape[1], query.shape[-1])
    return BlockwiseAdditiveAttention.apply(query, key, u, edge_vecs, edge_type, values,
                                            key_mask, query_mask, block_rows)


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
        energy_heads: ``H`` energy heads (1 = the paper's layer); must divide ``hidden`` and
            ``energy_dim``. Head ``h`` owns rows ``h*e/H : (h+1)*e/H`` of every block of ``W`` (the
            same modules and shapes as one head) and row ``h`` of ``u``, which is ``(H, e/H)``
            (``(e,)`` for one head, so one-head checkpoints keep their keys). The edge-type
            embedding is shared.
        impl: one of :data:`IMPLS` (:func:`choose_impl`); an attribute, so it may be changed after
            construction.
        edge_weights: how energies become weights, one of
            :data:`~cn3.layers.edge_weights.EDGE_WEIGHTS` (``softmax`` = the paper; ``sparsemax``,
            ``entmax15``, ``tree``: :mod:`cn3.layers.edge_weights`).
        energy_form: ``additive`` (the paper) or ``centered`` (each key's mean energy over the queries
            removed, so what is left depends on the query).

    Raises:
        ValueError: ``impl``, ``edge_weights`` or ``energy_form`` is unknown, or ``energy_heads`` does not
            divide ``hidden`` and ``energy_dim``.

    Shapes:
        - h: ``(B, N, d)``; mask: ``(B, N)`` bool, True at real nodes
        - v: ``(B, N, a)`` or None; edge_type: ``(B, N, N)`` long in ``[0, T)`` or None
          (pairs that involve padding must still hold a valid type, e.g. 0)
        - returns ``h' (B, N, d)``, ``alpha (B, N, N)``, ``gate (B, N, d)``, all zero at padded
          nodes (``alpha`` on padded keys too). With ``H > 1`` ``alpha`` is the heads' mean, or with
          ``per_head=True`` each head's, ``(B, H, N, N)``; None with ``need_alpha=False``.
        - with ``return_graph=True`` a fourth output, :class:`~cn3.layers.edge_weights.GraphParts`: each
          head's differentiable ``alpha`` and ``energy`` ``(B, H, N, N)`` and ``allowed``, for the
          regularisers (this runs :func:`~cn3.layers.edge_weights.graph_attention`, whatever the options).
    """

    def __init__(self, hidden: int, attr_dim: int = 0, n_edge_types: int = 0,
                 edge_dim: int = 32, energy_dim: int = 100, block_rows: int | None = None,
                 init_range: float = 0.1, energy_heads: int = 1, impl: str = "auto",
                 edge_weights: str = "softmax", energy_form: str = "additive") -> None:
        super().__init__()
        if impl not in IMPLS:  # now, not at the first batch
            raise ValueError(f"impl must be one of {', '.join(IMPLS)}, got {impl!r}")
        if edge_weights not in EDGE_WEIGHTS or energy_form not in ENERGY_FORMS:
            raise ValueError(f"edge_weights must be one of {', '.join(EDGE_WEIGHTS)} and energy_form one of "
                             f"{', '.join(ENERGY_FORMS)}, got {edge_weights!r}, {energy_form!r}")
        if impl == "fused" and (edge_weights, energy_form) != ("softmax", "additive"):
            warnings.warn(f"the fused kernel serves edge_weights=softmax with energy_form=additive only: "
                          f"{edge_weights} + {energy_form} runs the PyTorch path", stacklevel=2)
        self.impl, self.edge_weights, self.energy_form = impl, edge_weights, energy_form
        if energy_heads < 1 or hidden % energy_heads or energy_dim % energy_heads:
            raise ValueError(f"energy_heads={energy_heads} must be >= 1 and divide hidden={hidden} and "
                             f"energy_dim={energy_dim}")
        self.hidden, self.attr_dim, self.n_edge_types = hidden, attr_dim, n_edge_types
        self.block_rows, self.init_range, self.energy_heads = block_rows, init_range, energy_heads
        # W = [W_1 | W_2 | W_3 | W_4 | W_5], one column block per part of the concatenation.
        self.lin_hk = nn.Linear(hidden, energy_dim, bias=False)  # W_1
        self.lin_hi = nn.Linear(hidden, energy_dim, bias=False)  # W_2
        self.lin_vi = nn.Linear(attr_dim, energy_dim, bias=False) if attr_dim else None  # W_3
        self.lin_vk = nn.Linear(attr_dim, energy_dim, bias=False) if attr_dim else None  # W_4
        self.edge_emb = nn.Embedding(n_edge_types, edge_dim) if n_edge_types else None
        self.lin_edge = nn.Linear(edge_dim, energy_dim, bias=False) if n_edge_types else None  # W_5
        # u_h: row h of u (H > 1); one head keeps the paper's vector
        self.u = nn.Parameter(torch.empty(energy_dim) if energy_heads == 1
                              else torch.empty(energy_heads, energy_dim // energy_heads))
        self.lin_gate = nn.Linear(hidden, hidden)  # W_g, b
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform ``[-init_range, init_range]`` for every weight, bias and embedding (paper)."""
        for param in self.parameters():
            nn.init.uniform_(param, -self.init_range, self.init_range)

    def energy_weight(self) -> Tensor:
        """The paper's single ``W``: ``(energy_dim, 2d [+ 2a] [+ edge_dim])``; with ``H`` heads,
        the heads' ``W_h`` stacked row-wise (rows ``h*e/H : (h+1)*e/H`` are ``W_h``)."""
        blocks = [self.lin_hk, self.lin_hi, self.lin_vi, self.lin_vk, self.lin_edge]
        return torch.cat([lin.weight for lin in blocks if lin is not None], dim=1)

    def forward(self, h: Tensor, mask: Tensor, v: Tensor | None = None, edge_type: Tensor | None = None,
                per_head: bool = False, need_alpha: bool = True, return_graph: bool = False) -> tuple:
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
        # s^h_ik = u_h^T tanh(W_h [h_k, h_i, v_i, v_k, e_ik]);  alpha^h_ik = softmax_k(s^h_ik) over real k;
        # h~_i = concat_h sum_k alpha^h_ik h_k[slice_h]
        u = self.u.view(self.energy_heads, -1)  # (H, e/H)
        graph = None
        if return_graph:  # everything differentiable, for the regularisers
            block_rows = self.block_rows or default_block_rows(h.shape[0], h.shape[1], query.shape[-1])
            context, alpha, energy, allowed = graph_attention(query, key, u, h, mask, edge_vecs, edge_type, None,
                                                              self.edge_weights, self.energy_form, block_rows)
            graph = GraphParts(alpha, energy, allowed)
        else:
            context, alpha = cn3_attention(query, key, u, h, mask, edge_vecs, edge_type, impl=self.impl,
                                           need_alpha=need_alpha, block_rows=self.block_rows,
                                           edge_weights=self.edge_weights,
                                           energy_form=self.energy_form)  # (B, N, d), (B, H, N, N)
        if need_alpha and not per_head:
            # one head: the (B, N, N) weights themselves, no copy
            alpha = alpha.squeeze(1) if self.energy_heads == 1 else alpha.mean(dim=1)  # (B, N, N)
        # g_i = sigmoid(W_g h_i + b)
        gate = torch.sigmoid(self.lin_gate(h))  # (B, N, d)
        # h'_i = g_i * h~_i + (1 - g_i) * h_i
        h_new = gated_mix(context, h, gate)  # (B, N, d)
        padded = ~mask.unsqueeze(-1)  # (B, N, 1)
        out = h_new.masked_fill(padded, 0.0), alpha if need_alpha else None, gate.masked_fill(padded, 0.0)
        return (*out, graph) if return_graph else out

    def _check(self, v: Tensor | None, edge_type: Tensor | None) -> None:
        if (v is not None) != bool(self.attr_dim):
            raise ValueError(f"layer built with attr_dim={self.attr_dim}; v is "
                             f"{'missing' if v is None else 'unexpected'}")
        if (edge_type is not None) != bool(self.n_edge_types):
            raise ValueError(f"layer built with n_edge_types={self.n_edge_types}; edge_type is "
                             f"{'missing' if edge_type is None else 'unexpected'}")

    def extra_repr(self) -> str:
        heads = f", energy_heads={self.energy_heads}" if self.energy_heads > 1 else ""
        impl = f", impl={self.impl}" if self.impl != "auto" else ""
        weights = f", edge_weights={self.edge_weights}" if self.edge_weights != "softmax" else ""
        form = f", energy_form={self.energy_form}" if self.energy_form != "additive" else ""
        return (f"hidden={self.hidden}, attr_dim={self.attr_dim}, "
                f"n_edge_types={self.n_edge_types}, energy_dim={self.u.numel()}{heads}{impl}{weights}{form}")


def relative_position_types(n: int, clip: int, device: torch.device | str | None = None) -> Tensor:
    """``(N, N)`` long: ``clip(k - i, -C, C) + C`` at ``[i, k]``, in ``[0, 2C]``.

    For ``N = 4``, ``C = 1``: ``[[1, 2, 2, 2], [0, 1, 2, 2], [0, 0, 1, 2], [0, 0, 0, 1]]``.
    """
    index = torch.arange(n, device=device)
    return (index[None, :] - index[:, None]).clamp(-clip, clip) + clip


def combined_edge_types(edge_type: Tensor | None, n: int, clip: int, batch: int,
                        device: torch.device | str | None = None) -> Tensor:
    """Relative position folded into the edge type: ``dep * (2C + 1) + clip(k - i, -C, C) + C``
    (``dep = 0`` everywhere without dependency types). ``(B, N, N)`` long; every pair, padded or
    not, holds a valid type below ``max(T, 1) * (2C + 1)`` when ``edge_type`` is in ``[0, T)``."""
    relative = relative_position_types(n, clip, device)  # (N, N)
    if edge_type is None:
        return relative.expand(batch, n, n)
    return edge_type * (2 * clip + 1) + relative  # (B, N, N)


class DynamicGraphEncoder(nn.Module):
    """``num_layers`` stacked :class:`DynamicGraphLayer` s; each layer sees the same ``v`` and
    edge types and the previous layer's states.

    Args:
        num_layers: ``L``.
        hidden: node state size ``d``.
        relative_positions: ``C > 0`` folds ``clip(k - i, -C, C)`` into the edge type
            (:func:`combined_edge_types`; the layers get ``max(n_edge_types, 1) * (2C + 1)`` types).
            0 = off (the paper).
        parse_loss: ``lambda`` of :func:`~cn3.layers.edge_weights.parse_loss` on the first layer's first
            head (0 = off, the paper); :meth:`regularised` needs the parse's heads when it is on.
        hub_penalty: weight of :func:`~cn3.layers.edge_weights.hub_penalty` on every layer and head (0 = off).
        hub_bound: the column mass (queries' worth of weight) a key may hold before the penalty counts.
        **layer_kwargs: passed to every :class:`DynamicGraphLayer`.

    Shapes:
        returns ``h (B, N, d)``, a list of ``L`` alphas ``(B, N, N)`` (with ``per_head=True``:
        ``(B, H, N, N)``; None with ``need_alpha=False``) and ``L`` gates ``(B, N, d)``.
    """

    def __init__(self, num_layers: int, hidden: int, relative_positions: int = 0, parse_loss: float = 0.0,
                 hub_penalty: float = 0.0, hub_bound: float = HUB_BOUND, **layer_kwargs) -> None:
        super().__init__()
        if relative_positions < 0:
            raise ValueError(f"relative_positions must be >= 0, got {relative_positions}")
        if parse_loss < 0 or hub_penalty < 0 or hub_bound < 0:
            raise ValueError(f"parse_loss, hub_penalty and hub_bound must be >= 0, got {parse_loss}, "
                             f"{hub_penalty}, {hub_bound}")
        self.relative_positions = relative_positions
        self.parse_loss, self.hub_penalty, self.hub_bound = parse_loss, hub_penalty, hub_bound
        self.n_dep_types = layer_kwargs.get("n_edge_types", 0)
        if relative_positions:
            layer_kwargs["n_edge_types"] = max(self.n_dep_types, 1) * (2 * relative_positions + 1)
        self.layers = nn.ModuleList(DynamicGraphLayer(hidden, **layer_kwargs)
                                    for _ in range(num_layers))

    def reset_parameters(self) -> None:
        for layer in self.layers:
            layer.reset_parameters()

    def edge_types(self, h: Tensor, edge_type: Tensor | None) -> Tensor | None:
        """The edge types the layers see: the dependency types, with the relative position folded in."""
        if (edge_type is not None) != bool(self.n_dep_types):
            raise ValueError(f"encoder built with n_edge_types={self.n_dep_types}; edge_type is "
                             f"{'missing' if edge_type is None else 'unexpected'}")
        if not self.relative_positions:
            return edge_type
        return combined_edge_types(edge_type, h.shape[1], self.relative_positions, h.shape[0], h.device)

    def forward(self, h: Tensor, mask: Tensor, v: Tensor | None = None, edge_type: Tensor | None = None,
                per_head: bool = False, need_alpha: bool = True) -> tuple[Tensor, list[Tensor] | None, list[Tensor]]:
        edge_type = self.edge_types(h, edge_type)
        alphas, gates = [], []
        for layer in self.layers:
            h, alpha, gate = layer(h, mask, v, edge_type, per_head=per_head, need_alpha=need_alpha)
            alphas.append(alpha)
            gates.append(gate)
        return h, alphas if need_alpha else None, gates

    @property
    def regularised(self) -> bool:
        """A graph regulariser is on (``parse_loss`` or ``hub_penalty`` above 0)."""
        return self.parse_loss > 0 or self.hub_penalty > 0

    def forward_regularised(self, h: Tensor, mask: Tensor, v: Tensor | None = None, edge_type: Tensor | None = None,
                            parse_heads: Tensor | None = None,
                            per_head: bool = False) -> tuple[Tensor, list[Tensor], list[Tensor], Tensor]:
        """:meth:`forward` plus the graph regularisers' loss
        ``parse_loss * L_parse(layer 1, head 1) + hub_penalty * mean_layers L_hub``.

        Args:
            parse_heads: ``(B, N)`` long, each word's parse head (the word itself for the root, -1 at
                padding; :func:`~cn3.layers.edge_weights.heads_from_edge_types`); needed when
                ``parse_loss > 0``.

        Raises:
            ValueError: ``parse_loss > 0`` without ``parse_heads``.
        """
        if self.parse_loss > 0 and parse_heads is None:
            raise ValueError("parse_loss > 0 needs the parse's heads (a dataset prepared with a parser)")
        edge_type = self.edge_types(h, edge_type)
        alphas, gates, loss = [], [], h.new_zeros(())
        for index, layer in enumerate(self.layers):
            h, alpha, gate, graph = layer(h, mask, v, edge_type, per_head=per_head, return_graph=True)
            alphas.append(alpha)
            gates.append(gate)
            if index == 0 and self.parse_loss > 0:  # every head is a real word: an allowed key
                loss = loss + self.parse_loss * parse_loss(graph.energy[:, 0], graph.allowed[:, 0], parse_heads)
            if self.hub_penalty > 0:
                loss = loss + self.hub_penalty / len(self.layers) * hub_penalty(graph.alpha, mask, self.hub_bound)
        return h, alphas, gates, loss

