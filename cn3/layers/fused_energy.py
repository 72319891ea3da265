"""CN3's additive attention as fused Triton kernels, forward and backward, with its plain reference.

The same function as :func:`cn3.layers.blockwise_energy.additive_attention`, with ``H`` energy heads
in one launch (:func:`reference_attention` writes it down in PyTorch)::

    s^h_ik   = u_h^T tanh(q^h_i + k^h_k [+ E^h[t_ik]])     q^h, k^h, E^h: columns h e/H : (h+1) e/H
    alpha^h  = softmax_k(s^h_ik) over real keys k
    out_i    = concat_h sum_k alpha^h_ik v_k[h d/H : (h+1) d/H]

in FlashAttention's manner for an additive score, laid out as Triton's fused-attention tutorial: the
reference, tile helpers (``_tanh_slab``, ``_scores``, ``_edge_types``, ``_key_ok``, ``_add_into``),
the forward (its key loop in ``_attn_fwd_inner``, each part of the value columns through
``_add_values`` / ``_store_values``), then the backward's two passes and the host side.

* ``_attn_fwd``: one program owns ``BM`` query rows of one sentence and head; ``_attn_fwd_inner`` walks
  the keys ``BN`` at a time and builds each ``(BM, BN)`` score tile from ``(BM, BN, BE)`` slabs of
  ``tanh(q_i + k_k + E[t_ik])``: no ``(B, N, N, e)`` tensor is written. The softmax is online
  (running maximum ``m_i`` and sum ``l_i``); only the output and each row's log-sum-exp
  ``lse_i = m_i + log l_i`` go to memory: O(B N (d + e)). ``alpha`` is written only when asked for.
* Backward, in two passes that each recompute the tiles (scores, then ``p_ik = exp(s_ik - lse_i)``,
  or forward's ``alpha`` when it was returned) and with ``D_i = <dout_i, out_i>`` form
  ``ds_ik = p_ik (<dout_i, v_k> - D_i)`` and ``G_ikj = ds_ik (1 - tanh_ikj^2)``:

  - ``_attn_bwd_kv`` (one program per key block, queries in its loop): ``dv_k = sum_i alpha_ik dout_i``,
    ``dk_k / u = sum_i G_ik`` and each key's share of ``du_j = sum_ik ds_ik tanh_ikj``;
  - ``_attn_bwd_q`` (one program per query block, keys in its loop): ``dq_i / u = sum_k G_ik`` and
    ``dE_t / u = sum_{(i, k): t_ik = t} G_ik``.

  Every row of ``dq``, ``dk``, ``dv`` and ``du`` has one owner: no atomics (a barrier ends each outer
  iteration, as the next one re-reads those rows in another thread layout). Only ``dE`` (a scatter by
  edge type) is added with atomics, into ``SLOTS`` copies of the table, so the edge table's gradient
  is not bitwise reproducible (``auto`` picks the dense path under ``torch.use_deterministic_algorithms``).
  The second pass costs a second recomputation of the ``tanh`` (the price of no atomics on ``dq``).

Products: ``alpha v``, ``alpha^T dout`` and ``dout v^T`` are ``tl.dot`` on the tensor cores: bf16 under
bf16 autocast, TF32 in fp32 where torch allows TF32 (:func:`cn3.layers.triton_common.dot_precision`),
IEEE fp32 otherwise. ``u^T tanh(.)`` stays a sum over ``e`` on the CUDA cores: a rank-one contraction
would use one column of a tensor-core tile. The energy, softmax and accumulators are fp32. A head's
value columns are held as two power-of-two parts (:func:`value_parts`: 300 = 256 + 64), so that the
forward's message sum takes 320 columns of registers rather than 512, which lets larger tiles
compile without spills. The backward holds no ``(rows, d)`` accumulator: ``dv``, ``dk`` and ``du``
are added into their fp32 outputs one query block at a time, ``dv`` ``DC`` columns at a time (in
IEEE fp32 the products run on the CUDA cores with their operands in registers, and a ``(BN, d)``
accumulator held across the loop spilled in every tile).

``tanh=`` (:data:`cn3.layers.triton_common.TANH_FORMS`): on CUDA by default the special-function
unit's ``tanh.approx.f32`` (``tanh.approx.bf16x2`` under bf16 from sm_90; the exact libdevice form for
bf16 below sm_90, where ptxas has no such instruction), one instruction through
``tl.inline_asm_elementwise``; the interpreter cannot run inline PTX, so there the kernels get the
exact ``2 sigmoid(2x) - 1`` (:func:`cn3.layers.triton_common.default_tanh`) and other forms are refused.

Tiles: :func:`cn3.layers.triton_common.autotune` times :data:`FWD_CONFIGS` / :data:`BWD_CONFIGS` per
length bucket, widths, options and dtypes, after dropping those that spill registers on the GPU at
hand; in the interpreter one small config (:data:`INTERPRETER_TILES`) runs, so that the tests' short
sentences span several partial tiles.

The op is registered with ``torch.library`` (``cn3::fused_additive_attention_fwd`` / ``_bwd``, with
fake kernels and its autograd), so ``torch.compile`` traces through it without a graph break.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from cn3.layers.attention import attention
from cn3.layers.triton_common import (
    INTERPRETING,
    TANH_FORMS,
    autotune,
    block,
    check_tanh,
    default_tanh,
    device_capability,
    dot_precision,
    ends,
    length_bucket,
    load_tile,
    mask_bytes,
)
from cn3.layers.triton_common import tanh as tanh_form

__all__ = ["INTERPRETING", "fused_additive_attention", "reference_attention", "default_tanh"]

#: Tile constexprs in the interpreter: small, so that tests' short sentences span several tiles
#: (``N`` not a multiple of the tile); tiles under 16 are fine there (not on a GPU).
INTERPRETER_TILES = {"BM": 4, "BN": 4, "BE": 4}

#: Copies of the ``(T, e)`` edge-gradient table that the backward's atomics spread over.
SLOTS = 16


def _configs(tiles: list[tuple[int, int, int, int, int]]) -> list[triton.Config]:
    return [triton.Config({"BM": bm, "BN": bn, "BE": be}, num_warps=w, num_stages=s) for bm, bn, be, w, s in tiles]


#: Candidate tiles ``(BM, BN, BE, warps, stages)`` of the forward: ``BM`` queries x ``BN`` keys per
#: tile, ``BE`` energy columns per ``tanh`` slab (``tl.dot`` needs ``BM, BN >= 16``). Those that spill
#: on the GPU at hand are dropped before timing (docs/benchmarks.md, "Kernels: what is tuned").
FWD_CONFIGS = _configs([(16, 16, 16, 8, 1), (16, 16, 16, 4, 1), (32, 16, 8, 8, 1), (32, 32, 2, 8, 1),
                        (32, 32, 4, 8, 1), (64, 32, 4, 8, 1), (64, 64, 2, 8, 1)])
#: Candidate tiles of both backward passes (``BM`` queries x ``BN`` keys per tile).
BWD_CONFIGS = _configs([(16, 16, 4, 4, 1), (16, 16, 8, 8, 1), (32, 16, 4, 8, 1), (16, 32, 4, 8, 1),
                        (32, 16, 2, 8, 1), (32, 32, 4, 8, 1), (64, 32, 2, 8, 1)])
#: What the tuning is keyed by (besides the tensors' dtypes): the length bucket, widths and options.
TUNE_KEY = ["LEN_BUCKET", "EH", "DH", "HAS_EDGE", "TANH", "DOT_PREC"]


# ---------------------------------------------------------------------------------------------
# The plain PyTorch reference
# ---------------------------------------------------------------------------------------------

def reference_attention(query: Tensor, key: Tensor, u: Tensor, values: Tensor, key_mask: Tensor | None = None,
                        query_mask: Tensor | None = None, edge_vecs: Tensor | None = None,
                        edge_type: Tensor | None = None, tanh=torch.tanh) -> tuple[Tensor, Tensor]:
    """What the kernels compute, by broadcasting and autograd in ``(B, Nq, Nk, e)`` memory (tests).

    Same arguments as :func:`fused_additive_attention` (``u`` ``(e,)`` or ``(H, e/H)``); ``tanh``: the
    elementwise function (a stand-in for an approximate one). Returns ``out (B, Nq, d)`` and ``alpha``
    ``(B, Nq, Nk)`` for a 1-D ``u``, else ``(B, H, Nq, Nk)``.
    """
    heads = u.shape[0] if u.dim() == 2 else 1
    u_heads = u.reshape(heads, -1)
    rows, width = query.shape[-1] // heads, values.shape[-1] // heads
    outs, alphas = [], []
    for h in range(heads):
        cols = slice(h * rows, (h + 1) * rows)
        pre = query[:, :, None, cols] + key[:, None, :, cols]  # (B, Nq, Nk, e/H)
        if edge_vecs is not None:
            pre = pre + edge_vecs[:, cols][edge_type]
        out, alpha = attention(tanh(pre) @ u_heads[h], values[..., h * width:(h + 1) * width], key_mask,
                               query_mask=query_mask)
        outs.append(out)
        alphas.append(alpha)
    alpha = torch.stack(alphas, dim=1)
    return torch.cat(outs, dim=-1), alpha if u.dim() == 2 else alpha[:, 0]


# ---------------------------------------------------------------------------------------------
# Kernels: the tile helpers
# ---------------------------------------------------------------------------------------------

@triton.jit
def _tanh_slab(j0, q_base, k_base, ev_base, types, offs_m, offs_n, row_ok, col_ok, E,
               EH: tl.constexpr, BE: tl.constexpr, HAS_EDGE: tl.constexpr, TANH: tl.constexpr):
    """``tanh(q_i + k_k [+ E[t_ik]])`` over the head's energy columns ``j0 : j0 + BE``: ``(BM, BN, BE)``
    fp32, with the columns' offsets and validity. ``*_base``: the sentence's and head's first element."""
    offs_e, e_ok = block(j0, BE, EH)
    pre = (load_tile(q_base, offs_m, offs_e, E, row_ok, e_ok)[:, None, :]  # q_i + k_k
           + load_tile(k_base, offs_n, offs_e, E, col_ok, e_ok)[None, :, :])
    if HAS_EDGE:  # + E[t_ik], gathered from the (T, e) table (small: it stays in cache)
        pre += tl.load(ev_base + types[:, :, None] * E + offs_e[None, None, :], mask=e_ok[None, None, :],
                       other=0.0).to(tl.float32)
    return tanh_form(pre, TANH), offs_e, e_ok


@triton.jit
def _scores(q_base, k_base, u_base, ev_base, types, offs_m, offs_n, row_ok, col_ok, E,
            BM: tl.constexpr, BN: tl.constexpr, EH: tl.constexpr, BE: tl.constexpr,
            HAS_EDGE: tl.constexpr, TANH: tl.constexpr):
    """``s_ik = u^T tanh(q_i + k_k [+ E[t_ik]])`` for one ``(BM, BN)`` tile, fp32, real keys only."""
    s = tl.zeros([BM, BN], dtype=tl.float32)
    for j0 in range(0, EH, BE):
        t, offs_e, e_ok = _tanh_slab(j0, q_base, k_base, ev_base, types, offs_m, offs_n, row_ok, col_ok, E,
                                     EH, BE, HAS_EDGE, TANH)
        u = tl.load(u_base + offs_e, mask=e_ok, other=0.0).to(tl.float32)
        s += tl.sum(t * u[None, None, :], axis=2)
    return tl.where(col_ok[None, :], s, float("-inf"))  # softmax over real keys only


@triton.jit
def _edge_types(et_base, offs_m, offs_n, ok, N_K, HAS_EDGE: tl.constexpr):
    """The ``(BM, BN)`` edge types ``t_ik`` of one sentence (``et_base``: its ``(Nq, Nk)`` table,
    rows contiguous), zeros without."""
    types = offs_m[:, None] * 0 + offs_n[None, :] * 0
    if HAS_EDGE:
        types = tl.load(et_base + offs_m[:, None] * N_K + offs_n[None, :], mask=ok, other=0)
    return types


@triton.jit
def _key_ok(kmask_base, offs_n, n_end, HAS_KMASK: tl.constexpr):
    """Which keys ``offs_n`` are real: before the sentence's end and, with a mask (``kmask_base``: the
    sentence's row of it), unmasked."""
    col_ok = offs_n < n_end
    if HAS_KMASK:
        col_ok = col_ok & (tl.load(kmask_base + offs_n, mask=col_ok, other=0) != 0)
    return col_ok


@triton.jit
def _add_into(ptrs, ok, x):
    """``*ptrs += x`` where ``ok``: an output row this program owns (no other program writes it)."""
    tl.store(ptrs, tl.load(ptrs, mask=ok, other=0.0) + x, mask=ok)


# ---------------------------------------------------------------------------------------------
# Forward: the online softmax over key blocks
# ---------------------------------------------------------------------------------------------

@triton.jit
def _add_values(acc, p, rescale, v_base, offs_n, col_ok, D, START: tl.constexpr, WIDTH: tl.constexpr,
                DH: tl.constexpr, DOT_PREC: tl.constexpr):
    """One part of the message sum, value columns ``START : START + WIDTH`` of the head (zero past
    ``DH``): ``acc rescale_i + sum_k p_ik v_k``, ``(BM, WIDTH)`` fp32."""
    offs_d, d_ok = block(START, WIDTH, DH)
    v = tl.load(v_base + offs_n[:, None] * D + offs_d[None, :], mask=col_ok[:, None] & d_ok[None, :],
                other=0.0)  # (BN, WIDTH)
    return acc * rescale[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PREC)


@triton.jit
def _store_values(out_base, acc, norm, full, rows_in, START: tl.constexpr, WIDTH: tl.constexpr,
                  DH: tl.constexpr):
    """``out_i = acc_i / l_i`` into value columns ``START : START + WIDTH`` of the head; zero where a
    row is not ``full`` (padding, or no real key)."""
    offs_d, d_ok = block(START, WIDTH, DH)
    tl.store(out_base + offs_d[None, :], tl.where(full[:, None], acc / norm, 0.0),
             mask=rows_in[:, None] & d_ok[None, :])


@triton.jit
def _attn_fwd_inner(acc, acc2, l_i, m_i, q_base, k_base, u_base, ev_base, v_base, et_base, kmask_base, s_base,
                    offs_m, row_ok, rows_in, n_end, N_K, E, D, EH: tl.constexpr, DH: tl.constexpr,
                    DP: tl.constexpr, DP2: tl.constexpr, HAS_EDGE: tl.constexpr, HAS_KMASK: tl.constexpr,
                    NEED_ALPHA: tl.constexpr, TANH: tl.constexpr, DOT_PREC: tl.constexpr, BM: tl.constexpr,
                    BN: tl.constexpr, BE: tl.constexpr):
    """The keys ``0 : n_end``, ``BN`` at a time, into the running maximum ``m_i``, sum ``l_i`` and the
    two parts of ``sum_k exp(s_ik - m_i) v_k`` (``acc2``: untouched when ``DP2`` is 0); raw scores
    to ``s_base`` when ``NEED_ALPHA``."""
    for n0 in range(0, n_end, BN):
        offs_n = n0 + tl.arange(0, BN)
        col_ok = _key_ok(kmask_base, offs_n, n_end, HAS_KMASK)
        types = _edge_types(et_base, offs_m, offs_n, row_ok[:, None] & (offs_n < n_end)[None, :], N_K, HAS_EDGE)
        s = _scores(q_base, k_base, u_base, ev_base, types, offs_m, offs_n, row_ok, col_ok, E,
                    BM, BN, EH, BE, HAS_EDGE, TANH)
        if NEED_ALPHA:  # raw scores; normalised by exp(s - lse) once lse is known
            tl.store(s_base + offs_m[:, None] * N_K + offs_n[None, :], s,
                     mask=rows_in[:, None] & (offs_n < N_K)[None, :])
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: exp(-inf) = 0
        p = tl.exp(s - m_safe[:, None])  # (BM, BN)
        rescale = tl.exp(m_i - m_safe)
        l_i = l_i * rescale + tl.sum(p, axis=1)
        acc = _add_values(acc, p, rescale, v_base, offs_n, col_ok, D, 0, DP, DH, DOT_PREC)  # sum_k p_ik v_k
        if DP2 > 0:
            acc2 = _add_values(acc2, p, rescale, v_base, offs_n, col_ok, D, DP, DP2, DH, DOT_PREC)
        m_i = m_new
    return acc, acc2, l_i, m_i


@autotune(FWD_CONFIGS, TUNE_KEY, INTERPRETER_TILES)
@triton.jit
def _attn_fwd(Q, K, U, EV, ET, V, KMASK, QMASK, KEND, QEND, OUT, LSE, S, N_Q, N_K, H, et_sb, LEN_BUCKET,
              EH: tl.constexpr, DH: tl.constexpr, DP: tl.constexpr, DP2: tl.constexpr, HAS_EDGE: tl.constexpr,
              HAS_KMASK: tl.constexpr, HAS_QMASK: tl.constexpr, NEED_ALPHA: tl.constexpr, TANH: tl.constexpr,
              DOT_PREC: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BE: tl.constexpr):
    """Forward of ``BM`` query rows of one sentence and head: ``out``, ``lse`` (and raw scores)."""
    pid_m, pid_bh = tl.program_id(0), tl.program_id(1)
    b, h = pid_bh // H, pid_bh % H
    E, D = H * EH, H * DH
    offs_m, rows_in = block(pid_m * BM, BM, N_Q)
    q_end = tl.load(QEND + b)  # rows past the sentence's last real query are padding
    row_ok = offs_m < q_end
    if HAS_QMASK:
        row_ok = row_ok & (tl.load(QMASK + b * N_Q + offs_m, mask=row_ok, other=0) != 0)
    n_end = tl.where(pid_m * BM < q_end, tl.load(KEND + b), 0)  # a block of padded queries skips the keys
    m_i = tl.full([BM], float("-inf"), dtype=tl.float32)  # running row maximum
    l_i = tl.zeros([BM], dtype=tl.float32)  # running sum of exp(s - m_i)
    # running sum_k exp(s_ik - m_i) v_k, the value columns in two power-of-two parts [0, DP), [DP, DP + DP2)
    acc = tl.zeros([BM, DP], dtype=tl.float32)
    acc2 = tl.zeros([BM, DP2 if DP2 > 0 else 16], dtype=tl.float32)
    acc, acc2, l_i, m_i = _attn_fwd_inner(
        acc, acc2, l_i, m_i, Q + b * N_Q * E + h * EH, K + b * N_K * E + h * EH, U + h * EH, EV + h * EH,
        V + b * N_K * D + h * DH, ET + b * et_sb, KMASK + b * N_K, S + pid_bh * N_Q * N_K, offs_m, row_ok, rows_in,
        n_end, N_K, E, D, EH, DH, DP, DP2, HAS_EDGE, HAS_KMASK, NEED_ALPHA, TANH, DOT_PREC, BM, BN, BE)
    # epilogue: h~_i = sum_k alpha_ik v_k; a padded query, or one without any real key, is all zero
    full = row_ok & (l_i > 0)
    norm = tl.where(full, l_i, 1.0)[:, None]
    out_base = OUT + (b * N_Q + offs_m[:, None]) * D + h * DH
    _store_values(out_base, acc, norm, full, rows_in, 0, DP, DH)
    if DP2 > 0:
        _store_values(out_base, acc2, norm, full, rows_in, DP, DP2, DH)
    # lse = +inf on empty rows makes every exp(s - lse) of backward (and alpha) exactly 0
    tl.store(LSE + pid_bh * N_Q + offs_m, tl.where(full, m_i + tl.log(tl.where(full, l_i, 1.0)), float("inf")),
             mask=rows_in)


# ---------------------------------------------------------------------------------------------
# Backward: a key-side pass and a query-side pass
# ---------------------------------------------------------------------------------------------

@triton.jit
def _ds(q_base, k_base, u_base, ev_base, v_base, dout_base, p_base, delta_base, types, offs_m, offs_n, row_ok,
        col_ok, lse, N_K, E, D, EH: tl.constexpr, DH: tl.constexpr, DP: tl.constexpr, DP2: tl.constexpr,
        HAS_EDGE: tl.constexpr, HAVE_P: tl.constexpr, TANH: tl.constexpr, DOT_PREC: tl.constexpr,
        DC: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BE: tl.constexpr):
    """One tile's weights ``p_ik`` and ``ds_ik = p_ik (<dout_i, v_k> - D_i)``, both ``(BM, BN)`` fp32
    (``*_base``: the sentence's and head's first element of each tensor)."""
    if HAVE_P:  # forward's alpha: p without recomputing the scores
        p = tl.load(p_base + offs_m[:, None] * N_K + offs_n[None, :], mask=row_ok[:, None] & col_ok[None, :],
                    other=0.0)
    else:
        s = _scores(q_base, k_base, u_base, ev_base, types, offs_m, offs_n, row_ok, col_ok, E, BM, BN, EH, BE,
                    HAS_EDGE, TANH)
        p = tl.exp(s - lse[:, None])  # alpha_ik; masked keys and empty rows (lse = inf) give exactly 0
    # <dout_i, v_k> over DC columns at a time: a whole (BM, DP) x (DP, BN) product would hold both
    # operands' rows in registers
    dp = tl.zeros([BM, BN], dtype=tl.float32)
    for c0 in range(0, DP + DP2, DC):
        offs_c, c_ok = block(c0, DC, DH)
        dout_c = tl.load(dout_base + offs_m[:, None] * D + offs_c[None, :], mask=row_ok[:, None] & c_ok[None, :],
                         other=0.0)  # (BM, DC)
        v_c = tl.load(v_base + offs_n[:, None] * D + offs_c[None, :], mask=col_ok[:, None] & c_ok[None, :],
                      other=0.0)  # (BN, DC)
        dp += tl.dot(dout_c, tl.trans(v_c), input_precision=DOT_PREC)
    delta = tl.load(delta_base + offs_m, mask=row_ok, other=0.0)
    return p, p * (dp - delta[:, None])  # dL/ds_ik = alpha_ik (<dout_i, v_k> - <dout_i, out_i>)


@triton.jit
def _add_dv(dv_base, dout_base, p, offs_m, offs_n, row_ok, cols_in, D, DH: tl.constexpr, DP: tl.constexpr,
            DP2: tl.constexpr, DOT_PREC: tl.constexpr, DC: tl.constexpr):
    """``dv_k += sum_i alpha_ik dout_i`` for one tile, ``DC`` value columns at a time (a ``(BN, d)``
    accumulator held across the query loop spills in IEEE fp32, where the product runs on the CUDA
    cores with its operands in registers)."""
    for c0 in range(0, DP + DP2, DC):
        offs_c, c_ok = block(c0, DC, DH)
        dout_c = tl.load(dout_base + offs_m[:, None] * D + offs_c[None, :], mask=row_ok[:, None] & c_ok[None, :],
                         other=0.0)  # (BM, DC)
        _add_into(dv_base + offs_n[:, None] * D + offs_c[None, :], cols_in[:, None] & c_ok[None, :],
                  tl.dot(tl.trans(p).to(dout_c.dtype), dout_c, input_precision=DOT_PREC))


@autotune(BWD_CONFIGS, TUNE_KEY, INTERPRETER_TILES, reset_to_zero=["DK", "DU", "DV"])
@triton.jit
def _attn_bwd_kv(Q, K, U, EV, ET, V, KMASK, QEND, KEND, DOUT, LSE, DELTA, P, DK, DU, DV, N_Q, N_K, H, et_sb,
                 LEN_BUCKET, EH: tl.constexpr, DH: tl.constexpr, DP: tl.constexpr, DP2: tl.constexpr,
                 HAS_EDGE: tl.constexpr, HAS_KMASK: tl.constexpr, HAVE_P: tl.constexpr, TANH: tl.constexpr,
                 DOT_PREC: tl.constexpr, DC: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BE: tl.constexpr):
    """Key-side pass: ``dv``, ``dk / u`` and per-key shares of ``du`` of one key block's rows, each
    added into its fp32 output (zeroed, rows this program's own) one query block at a time."""
    pid_n, pid_bh = tl.program_id(0), tl.program_id(1)
    b, h = pid_bh // H, pid_bh % H
    E, D = H * EH, H * DH
    offs_n, cols_in = block(pid_n * BN, BN, N_K)
    k_end = tl.load(KEND + b)
    col_ok = _key_ok(KMASK + b * N_K, offs_n, k_end, HAS_KMASK)
    m_stop = tl.where(pid_n * BN < k_end, tl.load(QEND + b), 0)  # a block of padded keys has no gradient
    q_base, k_base, ev_base = Q + b * N_Q * E + h * EH, K + b * N_K * E + h * EH, EV + h * EH
    dout_base, v_base = DOUT + b * N_Q * D + h * DH, V + b * N_K * D + h * DH
    for m0 in range(0, m_stop, BM):
        offs_m, rows_in = block(m0, BM, N_Q)
        lse = tl.load(LSE + pid_bh * N_Q + offs_m, mask=rows_in, other=float("inf"))
        row_ok = lse != float("inf")  # rows with weights (real queries with a real key)
        types = _edge_types(ET + b * et_sb, offs_m, offs_n, rows_in[:, None] & cols_in[None, :], N_K, HAS_EDGE)
        p, ds = _ds(q_base, k_base, U + h * EH, ev_base, v_base, dout_base, P + pid_bh * N_Q * N_K,
                    DELTA + pid_bh * N_Q, types, offs_m, offs_n, row_ok, col_ok, lse, N_K, E, D, EH, DH, DP, DP2,
                    HAS_EDGE, HAVE_P, TANH, DOT_PREC, DC, BM, BN, BE)
        _add_dv(DV + b * N_K * D + h * DH, dout_base, p, offs_m, offs_n, row_ok, cols_in, D, DH, DP, DP2,
                DOT_PREC, DC)
        for j0 in range(0, EH, BE):
            t, offs_e, e_ok = _tanh_slab(j0, q_base, k_base, ev_base, types, offs_m, offs_n, row_ok, col_ok, E,
                                         EH, BE, HAS_EDGE, TANH)
            rows = (b * N_K + offs_n[:, None]) * E + h * EH + offs_e[None, :]  # this program's own rows
            ok = col_ok[:, None] & e_ok[None, :]
            _add_into(DK + rows, ok, tl.sum(ds[:, :, None] * (1.0 - t * t), axis=0))  # sum_i G_ikj
            _add_into(DU + rows, ok, tl.sum(ds[:, :, None] * t, axis=0))  # sum_i ds_ik tanh_ikj
        # the next query block re-reads these dv, dk, du rows, loaded in another thread layout than the
        # sums were stored in: another thread may have stored an element, so all stores must land first
        tl.debug_barrier()


@autotune(BWD_CONFIGS, TUNE_KEY, INTERPRETER_TILES, reset_to_zero=["DQ", "DE"])
@triton.jit
def _attn_bwd_q(Q, K, U, EV, ET, V, KMASK, KEND, DOUT, LSE, DELTA, P, DQ, DE, N_Q, N_K, H, et_sb, de_slot,
                LEN_BUCKET, EH: tl.constexpr, DH: tl.constexpr, DP: tl.constexpr, DP2: tl.constexpr,
                HAS_EDGE: tl.constexpr, HAS_KMASK: tl.constexpr, HAVE_P: tl.constexpr, TANH: tl.constexpr,
                DOT_PREC: tl.constexpr, SLOTS: tl.constexpr, DC: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                BE: tl.constexpr):
    """Query-side pass: ``dq / u`` of one query block's rows and ``dE / u`` (atomics, by edge type)."""
    pid_m, pid_bh = tl.program_id(0), tl.program_id(1)
    b, h = pid_bh // H, pid_bh % H
    E, D = H * EH, H * DH
    offs_m, rows_in = block(pid_m * BM, BM, N_Q)
    lse = tl.load(LSE + pid_bh * N_Q + offs_m, mask=rows_in, other=float("inf"))
    row_ok = lse != float("inf")
    n_end = tl.load(KEND + b)
    n_stop = tl.where(tl.max(row_ok.to(tl.int32), axis=0) > 0, n_end, 0)  # rows without weights skip the keys
    q_base, k_base, ev_base = Q + b * N_Q * E + h * EH, K + b * N_K * E + h * EH, EV + h * EH
    de_base = DE + (pid_bh * tl.num_programs(0) + pid_m) % SLOTS * de_slot  # this program's copy of the table
    for n0 in range(0, n_stop, BN):
        offs_n = n0 + tl.arange(0, BN)
        col_ok = _key_ok(KMASK + b * N_K, offs_n, n_end, HAS_KMASK)
        types = _edge_types(ET + b * et_sb, offs_m, offs_n, rows_in[:, None] & (offs_n < N_K)[None, :], N_K,
                            HAS_EDGE)
        p, ds = _ds(q_base, k_base, U + h * EH, ev_base, V + b * N_K * D + h * DH, DOUT + b * N_Q * D + h * DH,
                    P + pid_bh * N_Q * N_K, DELTA + pid_bh * N_Q, types, offs_m, offs_n, row_ok, col_ok, lse, N_K,
                    E, D, EH, DH, DP, DP2, HAS_EDGE, HAVE_P, TANH, DOT_PREC, DC, BM, BN, BE)
        for j0 in range(0, EH, BE):
            t, offs_e, e_ok = _tanh_slab(j0, q_base, k_base, ev_base, types, offs_m, offs_n, row_ok, col_ok, E,
                                         EH, BE, HAS_EDGE, TANH)
            g = ds[:, :, None] * (1.0 - t * t)  # G_ikj
            rows = (b * N_Q + offs_m[:, None]) * E + h * EH + offs_e[None, :]  # this program's own rows
            _add_into(DQ + rows, row_ok[:, None] & e_ok[None, :], tl.sum(g, axis=1))  # sum_k G_ikj
            if HAS_EDGE:  # sum over the pairs of each type t_ik, into one of SLOTS copies of the table
                tl.atomic_add(de_base + types[:, :, None] * E + h * EH + offs_e[None, None, :], g,
                              mask=(row_ok[:, None] & col_ok[None, :])[:, :, None] & e_ok[None, None, :])
        # the next key block re-reads these dq rows, loaded in another thread layout than the sums were
        # stored in: another thread may have stored an element, so all stores must land first
        tl.debug_barrier()


# ---------------------------------------------------------------------------------------------
# Host side: launches, the torch.library op and its autograd
# ---------------------------------------------------------------------------------------------

def _edge_args(edge_vecs: Tensor | None, edge_type: Tensor | None, like: Tensor) -> tuple[Tensor, Tensor, int]:
    """The edge table and types as the kernels take them (placeholders without), and the types' batch
    stride: each sentence's ``(Nq, Nk)`` table is read with contiguous rows, while the batch may be
    an expanded view (stride 0: one table for every sentence, as relative positions are)."""
    if edge_vecs is None:
        return like.new_zeros(1, 1), torch.zeros(1, 1, 1, dtype=torch.int32, device=like.device), 0
    if edge_type.shape[0] and not edge_type[0].is_contiguous():
        edge_type = edge_type.contiguous()
    return edge_vecs.contiguous(), edge_type, edge_type.stride(0)


def _shape(q: Tensor, v: Tensor, heads: int, n_k: int, has_edge: bool, tanh: str) -> dict:
    """The constexprs (and tuning key) every kernel of one call shares."""
    width = v.shape[-1] // heads
    return dict(LEN_BUCKET=length_bucket(max(q.shape[1], n_k)), EH=q.shape[-1] // heads, DH=width,
                **value_parts(width), HAS_EDGE=has_edge, TANH=TANH_FORMS[tanh], DOT_PREC=dot_precision(q.dtype))


def value_parts(width: int) -> dict:
    """A head's value columns as two power-of-two parts (``tl.arange`` widths), ``DP`` and ``DP2``
    (0: none), each at least 16 (``tl.dot``'s smallest width): 300 = 256 + 64, where one part would
    take 512 columns of registers for the message sum."""
    first = max(16, 1 << (max(width, 1).bit_length() - 1))
    return {"DP": first, "DP2": 0 if first >= width else max(16, triton.next_power_of_2(width - first))}


def value_chunk(first_part: int) -> int:
    """``DC``: the value columns the backward takes per product (``<dout_i, v_k>`` and ``dv``), at most
    32 and within the first part ``DP`` (:func:`value_parts`), so that the parts are whole chunks."""
    return min(32, first_part)


def _check_device(query: Tensor) -> None:
    if query.device.type == "cpu" and not INTERPRETING:
        raise ValueError("the fused kernel runs on CUDA, or on CPU tensors in Triton's interpreter "
                         "(TRITON_INTERPRET=1 set before triton is imported)")


@torch.library.custom_op("cn3::fused_additive_attention_fwd", mutates_args=(), schema=(
    "(Tensor query, Tensor key, Tensor u, Tensor? edge_vecs, Tensor? edge_type, Tensor values, Tensor? key_mask, "
    "Tensor? query_mask, bool need_alpha, str tanh) -> (Tensor, Tensor, Tensor)"))
def _forward_op(query, key, u, edge_vecs, edge_type, values, key_mask, query_mask, need_alpha, tanh):
    """``out (B, Nq, d)`` in the query's dtype, ``lse (B H, Nq)`` fp32 and ``alpha (B, H, Nq, Nk)`` fp32
    (``(0,)`` without ``need_alpha``); ``query``, ``key``, ``values`` and ``edge_vecs`` of one dtype."""
    _check_device(query)
    device = query.device
    q, k, v, u = query.contiguous(), key.contiguous(), values.contiguous(), u.contiguous()
    batch, n_q, _ = q.shape
    n_k, heads = k.shape[1], u.shape[0]
    ev, et, et_sb = _edge_args(edge_vecs, edge_type, q)
    k_end = ends(key_mask, batch, n_k, device)
    # the layer passes one mask as both: one pass over it
    q_end = k_end if query_mask is key_mask and n_q == n_k else ends(query_mask, batch, n_q, device)
    out = q.new_empty(batch, n_q, v.shape[-1])
    lse = torch.empty(batch * heads, n_q, dtype=torch.float32, device=device)
    # unvisited tiles (padding) keep -inf: weight exactly 0 after normalising
    scores = (torch.full((batch, heads, n_q, n_k), float("-inf"), device=device) if need_alpha
              else lse.new_empty(1))
    if batch and n_q:
        _attn_fwd[lambda meta: (triton.cdiv(n_q, meta["BM"]), batch * heads)](
            q, k, u, ev, et, v, mask_bytes(key_mask, device), mask_bytes(query_mask, device), k_end, q_end, out, lse,
            scores, n_q, n_k, heads, et_sb, HAS_KMASK=key_mask is not None, HAS_QMASK=query_mask is not None,
            NEED_ALPHA=need_alpha, **_shape(q, v, heads, n_k, edge_vecs is not None, tanh))
    alpha = scores.sub_(lse.view(batch, heads, n_q, 1)).exp_() if need_alpha else lse.new_empty(0)  # exp(s - lse)
    return out, lse, alpha


@_forward_op.register_fake
def _forward_fake(query, key, u, edge_vecs, edge_type, values, key_mask, query_mask, need_alpha, tanh):
    batch, n_q, _ = query.shape
    heads = u.shape[0]
    alpha_shape = (batch, heads, n_q, key.shape[1]) if need_alpha else (0,)
    return (query.new_empty(batch, n_q, values.shape[-1]), query.new_empty(batch * heads, n_q, dtype=torch.float32),
            query.new_empty(alpha_shape, dtype=torch.float32))


@torch.library.custom_op("cn3::fused_additive_attention_bwd", mutates_args=(), schema=(
    "(Tensor grad_out, Tensor query, Tensor key, Tensor u, Tensor? edge_vecs, Tensor? edge_type, Tensor values, "
    "Tensor? key_mask, Tensor? query_mask, Tensor out, Tensor lse, Tensor alpha, str tanh) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor)"))
def _backward_op(grad_out, query, key, u, edge_vecs, edge_type, values, key_mask, query_mask, out, lse, alpha, tanh):
    """``dq, dk, du, dE, dv`` in their inputs' dtypes (``dE`` ``(0,)`` without edges); ``alpha`` of
    ``(0,)``: recompute the weights."""
    _check_device(query)
    device = query.device
    q, k, v, u = query.contiguous(), key.contiguous(), values.contiguous(), u.contiguous()
    batch, n_q, dim = q.shape
    n_k, heads = k.shape[1], u.shape[0]
    has_edge, have_p = edge_vecs is not None, alpha.numel() > 0
    ev, et, et_sb = _edge_args(edge_vecs, edge_type, q)
    grad_out = grad_out.to(v.dtype).contiguous()
    # D_i = <dout_i, out_i> per head, the softmax backward's row term
    delta = (grad_out.float() * out.float()).view(batch, n_q, heads, -1).sum(-1).transpose(1, 2).contiguous()
    dq = torch.zeros(q.shape, dtype=torch.float32, device=device)  # sum_k G_ik
    dk = torch.zeros(k.shape, dtype=torch.float32, device=device)  # sum_i G_ik
    du = torch.zeros(k.shape, dtype=torch.float32, device=device)  # per key: sum_i ds_ik tanh_ik
    dv = torch.zeros(v.shape, dtype=torch.float32, device=device)
    de = torch.zeros(SLOTS, *ev.shape, dtype=torch.float32, device=device) if has_edge else dq.new_zeros(1)
    kmask = mask_bytes(key_mask, device)
    k_end = ends(key_mask, batch, n_k, device)
    q_end = ends(query_mask, batch, n_q, device)
    p = alpha.contiguous() if have_p else lse.new_empty(1)
    shape = dict(_shape(q, v, heads, n_k, has_edge, tanh), HAS_KMASK=key_mask is not None, HAVE_P=have_p)
    shape["DC"] = value_chunk(shape["DP"])
    if batch and n_k and n_q:
        _attn_bwd_kv[lambda meta: (triton.cdiv(n_k, meta["BN"]), batch * heads)](
            q, k, u, ev, et, v, kmask, q_end, k_end, grad_out, lse, delta, p, dk, du, dv, n_q, n_k, heads, et_sb,
            **shape)
        _attn_bwd_q[lambda meta: (triton.cdiv(n_q, meta["BM"]), batch * heads)](
            q, k, u, ev, et, v, kmask, k_end, grad_out, lse, delta, p, dq, de, n_q, n_k, heads, et_sb,
            de[0].numel(), SLOTS=SLOTS, **shape)
    u_flat = u.reshape(-1).float()  # dq, dk, dE are u times the sums of G
    return (dq.mul_(u_flat).to(q.dtype), dk.mul_(u_flat).to(k.dtype), du.sum((0, 1)).view(u.shape).to(u.dtype),
            de.sum(0).mul_(u_flat).to(ev.dtype) if has_edge else q.new_empty(0), dv.to(v.dtype))


@_backward_op.register_fake
def _backward_fake(grad_out, query, key, u, edge_vecs, edge_type, values, key_mask, query_mask, out, lse, alpha,
                   tanh):
    return (torch.empty_like(query), torch.empty_like(key), torch.empty_like(u),
            torch.empty_like(edge_vecs) if edge_vecs is not None else query.new_empty(0), torch.empty_like(values))


def _setup_context(ctx, inputs, output) -> None:
    query, key, u, edge_vecs, edge_type, values, key_mask, query_mask, _need_alpha, tanh = inputs
    out, lse, alpha = output
    ctx.save_for_backward(query, key, u, edge_vecs, edge_type, values, key_mask, query_mask, out, lse, alpha)
    ctx.tanh = tanh


def _backward(ctx, grad_out, _grad_lse, _grad_alpha):
    query, key, u, edge_vecs, edge_type, values, key_mask, query_mask, out, lse, alpha = ctx.saved_tensors
    if grad_out is None:
        grad_out = torch.zeros_like(out)
    dq, dk, du, de, dv = _backward_op(grad_out, query, key, u, edge_vecs, edge_type, values, key_mask, query_mask,
                                      out, lse, alpha, ctx.tanh)
    return dq, dk, du, de if edge_vecs is not None else None, None, dv, None, None, None, None


_forward_op.register_autograd(_backward, setup_context=_setup_context)


def fused_additive_attention(query: Tensor, key: Tensor, u: Tensor, values: Tensor,
                             key_mask: Tensor | None = None, query_mask: Tensor | None = None,
                             edge_vecs: Tensor | None = None, edge_type: Tensor | None = None,
                             need_alpha: bool = True, tanh: str | None = None) -> tuple[Tensor, Tensor | None]:
    """:func:`cn3.layers.blockwise_energy.additive_attention` in fused kernels, with energy heads.

    Args:
        query, key: ``(B, Nq, e)``, ``(B, Nk, e)`` per-node projections ``q_i``, ``k_k``; the query's
            dtype (the autocast dtype under autocast) is the tiles' (key, values and edge table are
            cast to it, and their gradients back).
        u: ``(e,)``, or ``(H, e/H)`` for ``H`` heads (head ``h``: columns ``h e/H : (h+1) e/H`` of
            the projections and of ``edge_vecs``, slice ``h d/H : (h+1) d/H`` of the values).
        values: ``(B, Nk, d)``.
        key_mask, query_mask: ``(B, Nk)``, ``(B, Nq)`` bool, True at real nodes, or None.
        edge_vecs, edge_type: ``(T, e)`` and ``(B, Nq, Nk)`` integer in ``[0, T)``, or both None.
        need_alpha: return the weights (``(B, Nq, Nk)`` fp32, ``(B, H, Nq, Nk)`` with heads; not
            differentiable); False keeps the memory O(B N (d + e)).
        tanh: a key of :data:`cn3.layers.triton_common.TANH_FORMS`; None:
            :func:`cn3.layers.triton_common.default_tanh`.

    Returns:
        ``out (B, Nq, d)`` in the query's dtype, and ``alpha`` or None.

    Raises:
        ValueError: one of ``edge_vecs``/``edge_type`` without the other, a ``tanh`` form this process
            or this GPU cannot run (``approx_bf16`` below sm_90), or CPU tensors outside Triton's interpreter.
    """
    if (edge_vecs is None) != (edge_type is None):
        raise ValueError("edge_vecs and edge_type go together")
    capability = device_capability(query.device)
    tanh = tanh or default_tanh(query.dtype, capability)
    check_tanh(tanh, capability)
    compute = query.dtype
    heads_u = u if u.dim() == 2 else u.unsqueeze(0)  # (H, e/H)
    out, _, alpha = torch.ops.cn3.fused_additive_attention_fwd(
        query, key.to(compute), heads_u, None if edge_vecs is None else edge_vecs.to(compute), edge_type,
        values.to(compute), key_mask, query_mask, need_alpha, tanh)
    if not need_alpha:
        return out, None
    alpha = alpha.detach()
    return out, alpha.squeeze(1) if u.dim() == 1 else alpha
