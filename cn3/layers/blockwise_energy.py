"""Additive attention ``softmax_k(u^T tanh(q_i + k_k + E[t_ik]))`` in bounded memory.

WHY: broadcasting materialises ``tanh(q_i + k_k + E[t_ik])`` as a ``(B, N, N, e)`` tensor that
autograd keeps with its input (3.75 GB each at N = 2,500, e = 150).
:class:`BlockwiseAdditiveAttention` walks blocks of whole query rows instead, so energy and
masked softmax finish inside a block and one block of ``tanh`` exists at a time. Backward
recomputes ``tanh`` block by block from the saved ``q``, ``k`` (``(B, N, e)``), ``u``, edge
vectors and types, values, output and the ``(B, N, N)`` weights (``e`` times smaller than
``tanh``, and kept by callers as ``alpha`` anyway).

Mixed precision: under ``torch.autocast`` the per-block work (``tanh``, energy GEMV, context GEMM)
runs in the projections' dtype; the softmax, saved weights and gradient accumulators stay fp32, and
each gradient is returned in its input's dtype.

The dense path (the layer's ``impl="dense"``, its CUDA choice without Triton) is this function with
blocks of :data:`DENSE_ELEMENTS` instead of :data:`BLOCK_ELEMENTS`: few, large blocks, because on
a GPU each block costs kernel launches (figures: docs/benchmarks.md).
"""

from __future__ import annotations

import torch
from torch import Tensor

from cn3.layers.attention import attend, masked_softmax

#: Elements of the ``(B, rows, Nk, e)`` block buffer (8 MB in float32): blocks as large as the
#: 64 MB per-layer budget at N = 2,500 allows (each block has a fixed dispatch cost).
BLOCK_ELEMENTS = 1 << 21


#: Elements of one block on the dense path (256 MB in float32): one block per batch up to
#: ``B N^2 e`` = 2^26, while leaving a GPU's memory to the model.
DENSE_ELEMENTS = 1 << 26


def default_block_rows(batch: int, n_keys: int, energy_dim: int, budget: int = BLOCK_ELEMENTS) -> int:
    """Query rows per block so that one block holds about ``budget`` elements (default
    :data:`BLOCK_ELEMENTS`; the dense path passes :data:`DENSE_ELEMENTS`)."""
    return max(1, budget // max(1, batch * n_keys * energy_dim))


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
