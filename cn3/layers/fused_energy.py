"""CN3's additive attention as one fused Triton kernel, forward and backward.

The same function as :func:`cn3.layers.blockwise_energy.additive_attention`, with ``H`` energy heads
in one launch::

    s^h_ik   = u_h^T tanh(q^h_i + k^h_k [+ E^h[t_ik]])     q^h, k^h, E^h: columns h e/H : (h+1) e/H
    alpha^h  = softmax_k(s^h_ik) over real keys k
    out_i    = concat_h sum_k alpha^h_ik v_k[h d/H : (h+1) d/H]

in FlashAttention's manner for an additive score. One program owns ``BM`` query rows of one
sentence and head; it walks the keys ``BN`` at a time and builds each ``(BM, BN)`` score tile from
``(BM, BN, BE)`` slabs of ``tanh(q_i + k_k + E[t_ik])``: no ``(B, N, N, e)`` tensor is written. The
softmax is online (running maximum ``m_i`` and sum ``l_i``); only the output and the row's
log-sum-exp ``lse_i = m_i + log l_i`` go back to memory: O(B N (d + e)). ``alpha`` (``(B, H, N, N)``)
is written only when asked for.

Backward (one program per key block, queries in an inner loop) recomputes each tile: the scores
(first pass over ``e``) give ``p_ik = exp(s_ik - lse_i)``; with ``D_i = <dout_i, out_i>`` (the
FlashAttention identity) ``ds_ik = p_ik (<dout_i, v_k> - D_i)``; a second pass over ``e`` recomputes
``tanh`` and forms ``G_ikj = ds_ik (1 - tanh_ikj^2)``, whose sums over ``k``, ``i`` and
``(i, k) : t_ik = t`` are ``dq / u``, ``dk / u`` and ``dE / u`` (``u`` is multiplied in once at the
end, as in the blockwise backward), and ``du_j = sum_ik ds_ik tanh_ikj``. When forward returned
``alpha`` its ``p`` is read back instead of recomputed. ``dv``, ``dk`` and ``du`` belong to the key
block's program; ``dq`` and ``dE`` (into ``SLOTS`` copies of the table) are added with atomics, so
the backward's float sums run in no fixed order: not bitwise reproducible (``auto`` picks the dense
path under ``torch.use_deterministic_algorithms``).

Precision: tiles are loaded in their dtype; the energy, softmax and every accumulator are fp32; the
products with the values run in the values' dtype (fp32 as torch's own matmuls: IEEE, or TF32 where
``torch.backends.cuda.matmul.allow_tf32``). ``tanh=`` picks ``"sigmoid"`` (``2 sigmoid(2x) - 1``, the
only form Triton's interpreter runs), ``"libdevice"`` (CUDA's ``tanhf``) or ``"approx"``
(``tanh.approx.f32``, relative error about ``2^-11``, below bf16's ``2^-8``); see :func:`default_tanh`.

Without a GPU, ``TRITON_INTERPRET=1`` set before ``triton`` is first imported (read once per process)
runs the kernels on CPU tensors in Triton's interpreter with :data:`INTERPRETER_TILES`
(``tests/fused_interpreter_cases.py``). On a GPU the tiles are :data:`FWD_TILE` and :data:`BWD_TILE`.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from torch import Tensor
from triton.language.extra import libdevice

#: True when Triton runs kernels in its interpreter (``TRITON_INTERPRET=1`` before import).
INTERPRETING = (triton.knobs.runtime.interpret if hasattr(triton, "knobs")
                else os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"))

#: Tile sizes in the interpreter: small, so that tests' short sentences span several tiles
#: (``N`` not a multiple of the tile), and tiles under 16 are fine there (not on a GPU).
INTERPRETER_TILES = {"BM": 4, "BN": 4, "BE": 4, "BMB": 4, "BNB": 4}

#: ``tanh=`` names and the kernel's ``TANH`` code.
TANH_FORMS = {"sigmoid": 0, "libdevice": 1, "approx": 2}

#: Copies of the ``(T, e)`` edge-gradient table that the backward's atomics spread over.
SLOTS = 16


@triton.jit
def _tanh(x, TANH: tl.constexpr):
    """``tanh(x)`` in the form ``TANH`` (see :data:`TANH_FORMS`)."""
    if TANH == 0:
        y = 2.0 * tl.sigmoid(2.0 * x) - 1.0  # tanh x = 2 sigmoid(2x) - 1
    elif TANH == 1:
        y = libdevice.tanh(x)
    else:
        y = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                      is_pure=True, pack=1)
    return y


@triton.jit
def _tanh_slab(j0, q_ptr, k_ptr, ev_ptr, types, offs_m, offs_n, row_ok, col_ok,
               stride_qm, stride_qe, stride_km, stride_ke, stride_evt, stride_eve,
               EH: tl.constexpr, BE: tl.constexpr, HAS_EDGE: tl.constexpr, TANH: tl.constexpr):
    """``tanh(q_i + k_k [+ E[t_ik]])`` over energy columns ``j0 : j0 + BE``: ``(BM, BN, BE)`` fp32,
    with the columns' offsets and validity."""
    offs_e = j0 + tl.arange(0, BE)
    e_ok = offs_e < EH
    q = tl.load(q_ptr + offs_m[:, None] * stride_qm + offs_e[None, :] * stride_qe,
                mask=row_ok[:, None] & e_ok[None, :], other=0.0).to(tl.float32)  # (BM, BE)
    k = tl.load(k_ptr + offs_n[:, None] * stride_km + offs_e[None, :] * stride_ke,
                mask=col_ok[:, None] & e_ok[None, :], other=0.0).to(tl.float32)  # (BN, BE)
    pre = q[:, None, :] + k[None, :, :]  # q_i + k_k  (BM, BN, BE)
    if HAS_EDGE:
        # + E[t_ik], gathered from the (T, e) table (small: it stays in cache)
        pre += tl.load(ev_ptr + types[:, :, None] * stride_evt + offs_e[None, None, :] * stride_eve,
                       mask=e_ok[None, None, :], other=0.0).to(tl.float32)
    return _tanh(pre, TANH), offs_e, e_ok


@triton.jit
def _scores(q_ptr, k_ptr, u_ptr, ev_ptr, types, offs_m, offs_n, row_ok, col_ok,
            stride_qm, stride_qe, stride_km, stride_ke, stride_evt, stride_eve,
            BM: tl.constexpr, BN: tl.constexpr, EH: tl.constexpr, BE: tl.constexpr,
            HAS_EDGE: tl.constexpr, TANH: tl.constexpr):
    """``s_ik = u^T tanh(q_i + k_k [+ E[t_ik]])`` for one ``(BM, BN)`` tile, fp32."""
    s = tl.zeros([BM, BN], dtype=tl.float32)
    for j0 in range(0, EH, BE):
        t, offs_e, e_ok = _tanh_slab(j0, q_ptr, k_ptr, ev_ptr, types, offs_m, offs_n, row_ok, col_ok,
                                     stride_qm, stride_qe, stride_km, stride_ke, stride_evt, stride_eve,
                                     EH, BE, HAS_EDGE, TANH)
        u = tl.load(u_ptr + offs_e, mask=e_ok, other=0.0).to(tl.float32)
        s += tl.sum(t * u[None, None, :], axis=2)  # u^T tanh(...)
    return s


@triton.jit
def _fwd_kernel(Q, K, U, EV, ET, V, KMASK, QMASK, KEND, QEND, OUT, LSE, S,
                N_Q, N_K, H,
                stride_qb, stride_qm, stride_qe, stride_kb, stride_km, stride_ke,
                stride_evt, stride_eve, stride_etb, stride_etm, stride_etn,
                stride_vb, stride_vn, stride_vd, stride_kmb, stride_qmb,
                stride_ob, stride_om, stride_od, stride_sb, stride_sh, stride_sm, stride_sn,
                EH: tl.constexpr, DH: tl.constexpr, DP: tl.constexpr,
                HAS_EDGE: tl.constexpr, HAS_KMASK: tl.constexpr, HAS_QMASK: tl.constexpr,
                NEED_ALPHA: tl.constexpr, TANH: tl.constexpr, DOT_PREC: tl.constexpr,
                BM: tl.constexpr, BN: tl.constexpr, BE: tl.constexpr):
    pid_m, pid_bh = tl.program_id(0), tl.program_id(1)
    b, h = pid_bh // H, pid_bh % H
    offs_m = pid_m * BM + tl.arange(0, BM)
    q_end = tl.load(QEND + b)  # rows past the sentence's last real query are padding
    row_ok = offs_m < q_end
    if HAS_QMASK:
        row_ok = row_ok & (tl.load(QMASK + b * stride_qmb + offs_m, mask=row_ok, other=0) != 0)
    # a block of padded queries skips the keys (its rows are written as empty below)
    n_end = tl.where(pid_m * BM < q_end, tl.load(KEND + b), 0)
    q_ptr = Q + b * stride_qb + h * EH * stride_qe
    k_ptr = K + b * stride_kb + h * EH * stride_ke
    ev_ptr = EV + h * EH * stride_eve
    v_ptr = V + b * stride_vb + h * DH * stride_vd
    offs_d = tl.arange(0, DP)
    d_ok = offs_d < DH
    m_i = tl.full([BM], float("-inf"), dtype=tl.float32)  # running row maximum
    l_i = tl.zeros([BM], dtype=tl.float32)  # running sum of exp(s - m_i)
    acc = tl.zeros([BM, DP], dtype=tl.float32)  # running sum_k exp(s_ik - m_i) v_k
    for n0 in range(0, n_end, BN):
        offs_n = n0 + tl.arange(0, BN)
        col_ok = offs_n < n_end
        if HAS_KMASK:
            col_ok = col_ok & (tl.load(KMASK + b * stride_kmb + offs_n, mask=col_ok, other=0) != 0)
        types = offs_m[:, None] * 0 + offs_n[None, :] * 0  # (BM, BN) zeros without edge types
        if HAS_EDGE:
            types = tl.load(ET + b * stride_etb + offs_m[:, None] * stride_etm + offs_n[None, :] * stride_etn,
                            mask=row_ok[:, None] & (offs_n < n_end)[None, :], other=0)
        s = _scores(q_ptr, k_ptr, U + h * EH, ev_ptr, types, offs_m, offs_n, row_ok, col_ok,
                    stride_qm, stride_qe, stride_km, stride_ke, stride_evt, stride_eve,
                    BM, BN, EH, BE, HAS_EDGE, TANH)
        s = tl.where(col_ok[None, :], s, float("-inf"))  # softmax over real keys only
        if NEED_ALPHA:  # raw scores; normalised by exp(s - lse) once lse is known
            tl.store(S + b * stride_sb + h * stride_sh + offs_m[:, None] * stride_sm + offs_n[None, :] * stride_sn,
                     s, mask=(offs_m < N_Q)[:, None] & (offs_n < N_K)[None, :])
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: exp(-inf) = 0
        p = tl.exp(s - m_safe[:, None])  # (BM, BN)
        rescale = tl.exp(m_i - m_safe)
        l_i = l_i * rescale + tl.sum(p, axis=1)
        v = tl.load(v_ptr + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                    mask=col_ok[:, None] & d_ok[None, :], other=0.0)  # (BN, DP)
        acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PREC)  # sum_k p_ik v_k
        m_i = m_new
    full = row_ok & (l_i > 0)  # a padded query, or one without any real key, is all zero
    out = acc / tl.where(full, l_i, 1.0)[:, None]  # h~_i = sum_k alpha_ik v_k
    tl.store(OUT + b * stride_ob + offs_m[:, None] * stride_om + (h * DH + offs_d)[None, :] * stride_od,
             tl.where(full[:, None], out, 0.0), mask=(offs_m < N_Q)[:, None] & d_ok[None, :])
    # lse = +inf on empty rows makes every exp(s - lse) of backward (and alpha) exactly 0
    tl.store(LSE + pid_bh * N_Q + offs_m, tl.where(full, m_i + tl.log(tl.where(full, l_i, 1.0)), float("inf")),
             mask=offs_m < N_Q)


@triton.jit
def _bwd_kernel(Q, K, U, EV, ET, V, KMASK, QEND, KEND, DOUT, LSE, DELTA, P,
                DQ, DK, DU, DE, DV,
                N_Q, N_K, H,
                stride_qb, stride_qm, stride_qe, stride_kb, stride_km, stride_ke,
                stride_evt, stride_eve, stride_etb, stride_etm, stride_etn,
                stride_vb, stride_vn, stride_vd, stride_kmb,
                stride_ob, stride_om, stride_od, stride_pb, stride_ph, stride_pm, stride_pn,
                stride_dub, stride_de_slot,
                EH: tl.constexpr, DH: tl.constexpr, DP: tl.constexpr,
                HAS_EDGE: tl.constexpr, HAS_KMASK: tl.constexpr, HAVE_P: tl.constexpr,
                TANH: tl.constexpr, DOT_PREC: tl.constexpr, SLOTS: tl.constexpr, DC: tl.constexpr,
                BMB: tl.constexpr, BNB: tl.constexpr, BE: tl.constexpr):
    pid_n, pid_bh = tl.program_id(0), tl.program_id(1)
    b, h = pid_bh // H, pid_bh % H
    offs_n = pid_n * BNB + tl.arange(0, BNB)
    k_end = tl.load(KEND + b)
    col_ok = offs_n < k_end
    if HAS_KMASK:
        col_ok = col_ok & (tl.load(KMASK + b * stride_kmb + offs_n, mask=col_ok, other=0) != 0)
    # a block of padded keys has no gradient: it skips the queries
    n_qblocks = tl.where(pid_n * BNB < k_end, tl.cdiv(tl.load(QEND + b), BMB), 0)
    q_ptr = Q + b * stride_qb + h * EH * stride_qe
    k_ptr = K + b * stride_kb + h * EH * stride_ke
    ev_ptr = EV + h * EH * stride_eve
    offs_d = tl.arange(0, DP)
    d_ok = offs_d < DH
    v_ptr = V + b * stride_vb + h * DH * stride_vd
    dout_base = DOUT + b * stride_ob + h * DH * stride_od
    dv = tl.zeros([BNB, DP], dtype=tl.float32)
    # this program's rows of the key gradient and its partial du (no other program writes them)
    dk_ptr = DK + b * stride_kb + h * EH * stride_ke
    du_ptr = DU + (b * tl.num_programs(0) + pid_n) * stride_dub + h * EH
    de_ptr = DE + (pid_bh * tl.num_programs(0) + pid_n) % SLOTS * stride_de_slot + h * EH * stride_eve
    dq_ptr = DQ + b * stride_qb + h * EH * stride_qe
    for step in range(0, n_qblocks):
        # start at a different query block in each key block, so dq's atomics rarely collide
        m0 = ((pid_n + step) % n_qblocks) * BMB
        offs_m = m0 + tl.arange(0, BMB)
        row_in = offs_m < N_Q
        lse = tl.load(LSE + pid_bh * N_Q + offs_m, mask=row_in, other=float("inf"))
        row_ok = lse != float("inf")  # rows with weights (real queries with a real key)
        types = offs_m[:, None] * 0 + offs_n[None, :] * 0
        if HAS_EDGE:
            types = tl.load(ET + b * stride_etb + offs_m[:, None] * stride_etm + offs_n[None, :] * stride_etn,
                            mask=row_in[:, None] & (offs_n < N_K)[None, :], other=0)
        if HAVE_P:  # forward's alpha: p without recomputing the scores
            p = tl.load(P + b * stride_pb + h * stride_ph + offs_m[:, None] * stride_pm + offs_n[None, :] * stride_pn,
                        mask=row_ok[:, None] & col_ok[None, :], other=0.0)
        else:
            s = _scores(q_ptr, k_ptr, U + h * EH, ev_ptr, types, offs_m, offs_n, row_ok, col_ok,
                        stride_qm, stride_qe, stride_km, stride_ke, stride_evt, stride_eve,
                        BMB, BNB, EH, BE, HAS_EDGE, TANH)
            # alpha_ik = exp(s_ik - lse_i); masked keys and empty rows give exactly 0
            p = tl.exp(tl.where(col_ok[None, :], s, float("-inf")) - lse[:, None])
        dout = tl.load(dout_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od,
                       mask=row_ok[:, None] & d_ok[None, :], other=0.0)  # (BMB, DP)
        dv += tl.dot(tl.trans(p).to(dout.dtype), dout, input_precision=DOT_PREC)  # dv_k = sum_i alpha_ik dout_i
        # <dout_i, v_k> over DC columns at a time, reloaded (cache hits): a (BMB, DP) x (DP, BNB)
        # product at once would hold both operands' rows in registers
        dp = tl.zeros([BMB, BNB], dtype=tl.float32)
        for c0 in range(0, DP, DC):
            offs_c = c0 + tl.arange(0, DC)
            c_ok = offs_c < DH
            dout_c = tl.load(dout_base + offs_m[:, None] * stride_om + offs_c[None, :] * stride_od,
                             mask=row_ok[:, None] & c_ok[None, :], other=0.0)  # (BMB, DC)
            v_c = tl.load(v_ptr + offs_n[:, None] * stride_vn + offs_c[None, :] * stride_vd,
                          mask=col_ok[:, None] & c_ok[None, :], other=0.0)  # (BNB, DC)
            dp += tl.dot(dout_c, tl.trans(v_c), input_precision=DOT_PREC)
        delta = tl.load(DELTA + pid_bh * N_Q + offs_m, mask=row_ok, other=0.0)
        ds = p * (dp - delta[:, None])  # dL/ds_ik = alpha_ik (<dout_i, v_k> - <dout_i, out_i>)
        for j0 in range(0, EH, BE):
            t, offs_e, e_ok = _tanh_slab(j0, q_ptr, k_ptr, ev_ptr, types, offs_m, offs_n, row_ok, col_ok,
                                         stride_qm, stride_qe, stride_km, stride_ke, stride_evt, stride_eve,
                                         EH, BE, HAS_EDGE, TANH)
            g = ds[:, :, None] * (1.0 - t * t)  # G_ikj = ds_ik (1 - tanh_ikj^2)
            tl.atomic_add(dq_ptr + offs_m[:, None] * stride_qm + offs_e[None, :] * stride_qe, tl.sum(g, axis=1),
                          mask=row_ok[:, None] & e_ok[None, :])  # sum_k G_ik
            dk_tile = dk_ptr + offs_n[:, None] * stride_km + offs_e[None, :] * stride_ke
            dk_ok = col_ok[:, None] & e_ok[None, :]
            tl.store(dk_tile, tl.load(dk_tile, mask=dk_ok, other=0.0) + tl.sum(g, axis=0), mask=dk_ok)  # sum_i G_ik
            du_c = tl.sum(tl.sum(ds[:, :, None] * t, axis=1), axis=0)  # sum_ik ds_ik tanh_ikj
            tl.store(du_ptr + offs_e, tl.load(du_ptr + offs_e, mask=e_ok, other=0.0) + du_c, mask=e_ok)
            if HAS_EDGE:
                # sum over the pairs of each type t_ik
                tl.atomic_add(de_ptr + types[:, :, None] * stride_evt + offs_e[None, None, :] * stride_eve, g,
                              mask=(row_ok[:, None] & col_ok[None, :])[:, :, None] & e_ok[None, None, :])
    tl.store(DV + b * stride_vb + offs_n[:, None] * stride_vn + (h * DH + offs_d)[None, :] * stride_vd,
             dv, mask=(offs_n < N_K)[:, None] & d_ok[None, :])


#: GPU tiles of the forward, ``(BM, BN, BE, warps, stages)``: ``BM`` queries x ``BN`` keys per tile,
#: ``BE`` energy columns per slab (``tl.dot`` needs ``BM, BN >= 16``). They compile for sm_90 without
#: register spills in every precision and option (32 x 32 tiles spill with IEEE fp32) and give one
#: long sentence a program for every SM (docs/benchmarks.md, "CN3 layer on a GPU"). Not autotuned:
#: compiling several tiles per dtype and option costs more than a short run saves.
FWD_TILE = (16, 16, 16, 8, 1)
#: GPU tiles of the backward, ``(BMB, BNB, BE, warps, stages)``: ``BNB`` keys per program, ``BMB``
#: queries per step of its loop; spill-free with TF32 and bf16, 76 bytes with IEEE fp32, 34 KB.
BWD_TILE = (16, 16, 4, 8, 1)


def _tiles(tile: tuple[int, ...], names: tuple[str, str, str]) -> dict:
    """Launch options: :data:`INTERPRETER_TILES` in the interpreter, else ``tile``."""
    if INTERPRETING:
        return {name: INTERPRETER_TILES[name] for name in names}
    return {**dict(zip(names, tile[:3])), "num_warps": tile[3], "num_stages": tile[4]}


def _ends(mask: Tensor | None, batch: int, n: int, device: torch.device) -> Tensor:
    """``(B,)`` int32: one past each row's last True (``n`` without a mask), so that kernels stop
    at the padding instead of masking it tile by tile."""
    if mask is None or n == 0:  # (amax refuses an empty axis)
        return torch.full((batch,), n, dtype=torch.int32, device=device)
    position = torch.arange(1, n + 1, dtype=torch.int32, device=device)
    return (mask.to(torch.int32) * position).amax(dim=-1).to(torch.int32)


def _mask_bytes(mask: Tensor | None, device: torch.device) -> Tensor:
    """The bool mask as uint8 (what the kernel loads), or a one-byte placeholder."""
    if mask is None:
        return torch.ones(1, 1, dtype=torch.uint8, device=device)
    return mask.contiguous().view(torch.uint8)


def _dot_precision(dtype: torch.dtype) -> str:
    """``tl.dot``'s input precision for values of ``dtype``: fp32 as torch's own matmuls (TF32 only
    where ``torch.backends.cuda.matmul.allow_tf32``, e.g. ``set_float32_matmul_precision("high")``),
    fp64 exact; 16-bit operands ignore it."""
    if dtype == torch.float64 or (dtype == torch.float32 and not torch.backends.cuda.matmul.allow_tf32):
        return "ieee"
    return "tf32"


def default_tanh(dtype: torch.dtype) -> str:
    """``sigmoid`` in the interpreter (the only form it runs), ``approx`` for 16-bit inputs (its
    error is below their resolution), ``libdevice`` for fp32."""
    if INTERPRETING:
        return "sigmoid"
    return "approx" if dtype in (torch.bfloat16, torch.float16) else "libdevice"


class FusedAdditiveAttention(torch.autograd.Function):
    """:class:`cn3.layers.blockwise_energy.BlockwiseAdditiveAttention` with ``H`` heads in one kernel.

    ``apply(query, key, u, edge_vecs, edge_type, values, key_mask, query_mask, need_alpha, tanh)``:

    - query ``(B, Nq, e)``, key ``(B, Nk, e)``, u ``(H, e/H)``: differentiable
    - edge_vecs ``(T, e)`` (differentiable) and edge_type ``(B, Nq, Nk)`` integer, or both None
    - values ``(B, Nk, d)``, ``H`` divides ``d``: differentiable
    - key_mask ``(B, Nk)``, query_mask ``(B, Nq)``: bool or None
    - need_alpha: also return the weights; tanh: a key of :data:`TANH_FORMS`

    Returns ``context (B, Nq, d)`` in the query's dtype and ``alpha (B, H, Nq, Nk)`` fp32 (not
    differentiable), or None without ``need_alpha``.
    """

    @staticmethod
    def forward(ctx, query: Tensor, key: Tensor, u: Tensor, edge_vecs: Tensor | None, edge_type: Tensor | None,
                values: Tensor, key_mask: Tensor | None, query_mask: Tensor | None, need_alpha: bool,
                tanh: str) -> tuple[Tensor, Tensor | None]:
        device = query.device
        if device.type == "cpu" and not INTERPRETING:
            raise ValueError("the fused kernel runs on CUDA, or on CPU tensors in Triton's interpreter "
                             "(TRITON_INTERPRET=1 set before triton is imported)")
        ctx.dtypes = (query.dtype, key.dtype, u.dtype, None if edge_vecs is None else edge_vecs.dtype,
                      values.dtype)
        compute = query.dtype  # the autocast dtype under autocast, as in the blockwise path
        u = u.contiguous()  # (H, e/H), fp32 in the kernel
        q, k, v = query.contiguous(), key.to(compute).contiguous(), values.to(compute).contiguous()
        batch, n_q, dim = q.shape
        n_k, width, heads = k.shape[1], v.shape[-1], u.shape[0]
        has_edge = edge_vecs is not None
        ev = edge_vecs.to(compute).contiguous() if has_edge else q.new_zeros(1, 1)
        et = edge_type if has_edge else torch.zeros(1, 1, 1, dtype=torch.int32, device=device)
        kmask, qmask = _mask_bytes(key_mask, device), _mask_bytes(query_mask, device)
        k_end = _ends(key_mask, batch, n_k, device)
        # the layer passes one mask as both: one pass over it
        q_end = k_end if query_mask is key_mask and n_q == n_k else _ends(query_mask, batch, n_q, device)
        out = q.new_empty(batch, n_q, width)
        lse = torch.empty(batch * heads, n_q, dtype=torch.float32, device=device)
        # unvisited tiles (padding) keep -inf: weight exactly 0 after normalising
        scores = (torch.full((batch, heads, n_q, n_k), float("-inf"), device=device) if need_alpha
                  else lse.new_empty(1, 1, 1, 1))
        shape = dict(EH=dim // heads, DH=width // heads, DP=triton.next_power_of_2(max(width // heads, 16)),
                     HAS_EDGE=has_edge, TANH=TANH_FORMS[tanh], DOT_PREC=_dot_precision(compute))
        tiles = _tiles(FWD_TILE, ("BM", "BN", "BE"))
        if batch and n_q:
            _fwd_kernel[(triton.cdiv(n_q, tiles["BM"]), batch * heads)](
                q, k, u, ev, et, v, kmask, qmask, k_end, q_end, out, lse, scores, n_q, n_k, heads,
                *q.stride(), *k.stride(), *ev.stride(), *et.stride(), *v.stride(), kmask.stride(0),
                qmask.stride(0), *out.stride(), *scores.stride(), HAS_KMASK=key_mask is not None,
                HAS_QMASK=query_mask is not None, NEED_ALPHA=need_alpha, **shape, **tiles)
        alpha = scores.sub_(lse.view(batch, heads, n_q, 1)).exp_() if need_alpha else None  # exp(s - lse)
        ctx.save_for_backward(q, k, u, ev if has_edge else None, edge_type, v, kmask, k_end, q_end, out, lse, alpha)
        ctx.shape, ctx.has_kmask = shape, key_mask is not None
        if need_alpha:
            ctx.mark_non_differentiable(alpha)
        ctx.set_materialize_grads(False)
        return out, alpha

    @staticmethod
    def backward(ctx, grad_out: Tensor | None, _grad_alpha: None):
        if grad_out is None:
            return (None,) * 10
        q, k, u, ev, edge_type, v, kmask, k_end, q_end, out, lse, alpha = ctx.saved_tensors
        batch, n_q, dim = q.shape
        n_k, heads, device = k.shape[1], u.shape[0], q.device
        has_edge = ev is not None
        grad_out = grad_out.to(v.dtype).contiguous()
        # D_i = <dout_i, out_i> per head, the softmax backward's row term
        delta = (grad_out.float() * out.float()).view(batch, n_q, heads, -1).sum(-1).transpose(1, 2).contiguous()
        dq = torch.zeros(q.shape, dtype=torch.float32, device=device)  # sum_k G_ik, atomics
        dk = torch.zeros(k.shape, dtype=torch.float32, device=device)  # sum_i G_ik
        dv = torch.empty(v.shape, dtype=torch.float32, device=device)
        tiles = _tiles(BWD_TILE, ("BMB", "BNB", "BE"))
        n_blocks = triton.cdiv(n_k, tiles["BNB"])
        du = torch.zeros(batch * n_blocks, dim, dtype=torch.float32, device=device)  # one row per program
        de = (torch.zeros(SLOTS, *ev.shape, dtype=torch.float32, device=device) if has_edge
              else dq.new_zeros(1, 1, 1))
        ev_arg = ev if has_edge else q.new_zeros(1, 1)
        et = edge_type if has_edge else torch.zeros(1, 1, 1, dtype=torch.int32, device=device)
        p = alpha if alpha is not None else lse.new_empty(1, 1, 1, 1)
        if batch and n_k:
            _bwd_kernel[(n_blocks, batch * heads)](
                q, k, u, ev_arg, et, v, kmask, q_end, k_end, grad_out, lse, delta, p, dq, dk, du, de, dv,
                n_q, n_k, heads, *q.stride(), *k.stride(), *ev_arg.stride(), *et.stride(), *v.stride(),
                kmask.stride(0), *out.stride(), *p.stride(), du.stride(0), de.stride(0),
                HAS_KMASK=ctx.has_kmask, HAVE_P=alpha is not None, SLOTS=SLOTS, DC=min(32, ctx.shape["DP"]),
                **ctx.shape, **tiles)
        u_flat = u.reshape(-1).float()  # dq, dk, dE are u times the sums of G
        dtype_q, dtype_k, dtype_u, dtype_e, dtype_v = ctx.dtypes
        need = ctx.needs_input_grad
        return (dq.mul_(u_flat).to(dtype_q) if need[0] else None,
                dk.mul_(u_flat).to(dtype_k) if need[1] else None,
                du.sum(0).view(u.shape).to(dtype_u) if need[2] else None,
                de.sum(0).mul_(u_flat).to(dtype_e) if has_edge and need[3] else None, None,
                dv.to(dtype_v) if need[5] else None, None, None, None, None)


def fused_additive_attention(query: Tensor, key: Tensor, u: Tensor, values: Tensor,
                             key_mask: Tensor | None = None, query_mask: Tensor | None = None,
                             edge_vecs: Tensor | None = None, edge_type: Tensor | None = None,
                             need_alpha: bool = True, tanh: str | None = None) -> tuple[Tensor, Tensor | None]:
    """:func:`cn3.layers.blockwise_energy.additive_attention` in one fused kernel, with energy heads.

    Args:
        query, key: ``(B, Nq, e)``, ``(B, Nk, e)`` per-node projections ``q_i``, ``k_k``.
        u: ``(e,)``, or ``(H, e/H)`` for ``H`` heads (head ``h``: columns ``h e/H : (h+1) e/H`` of
            the projections and of ``edge_vecs``, slice ``h d/H : (h+1) d/H`` of the values).
        values: ``(B, Nk, d)``.
        key_mask, query_mask: ``(B, Nk)``, ``(B, Nq)`` bool, True at real nodes, or None.
        edge_vecs, edge_type: ``(T, e)`` and ``(B, Nq, Nk)`` integer in ``[0, T)``, or both None.
        need_alpha: return the weights (``(B, Nq, Nk)`` fp32, ``(B, H, Nq, Nk)`` with heads); False
            keeps the memory O(B N (d + e)).
        tanh: ``sigmoid``, ``libdevice`` or ``approx``; None: :func:`default_tanh`.

    Shapes:
        returns ``out (B, Nq, d)`` and ``alpha`` or None.
    """
    if (edge_vecs is None) != (edge_type is None):
        raise ValueError("edge_vecs and edge_type go together")
    tanh = tanh or default_tanh(query.dtype)
    if tanh not in TANH_FORMS or (INTERPRETING and tanh != "sigmoid"):
        raise ValueError(f"tanh must be one of {sorted(TANH_FORMS)} (only 'sigmoid' in the interpreter), got {tanh!r}")
    heads_u = u if u.dim() == 2 else u.unsqueeze(0)  # (H, e/H)
    out, alpha = FusedAdditiveAttention.apply(query, key, heads_u, edge_vecs, edge_type, values, key_mask,
                                              query_mask, need_alpha, tanh)
    if alpha is not None and u.dim() == 1:
        alpha = alpha.squeeze(1)  # (B, Nq, Nk)
    return out, alpha
