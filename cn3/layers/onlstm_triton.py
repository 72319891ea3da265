"""ON-LSTM's recurrence as two persistent Triton kernels, forward and backward: the ``triton`` kernel
of :class:`cn3.layers.onlstm.ONLSTM` (``kernel``; a run's ``model.rnn.onlstm_kernel``).

The sequential part of :class:`cn3.layers.onlstm._ONLSTMScan` (Shen et al., eq. 3-9): per time step
the recurrent product ``h_{t-1} U`` added to the precomputed input projection, the master gates'
``cumax``, the chunked cell update and the padding rule (a padded step keeps the state), in one
launch each way instead of a dozen small kernels per step. One program owns ``BB`` batch rows and
loops over time inside the kernel: per step it walks the neurons ``BH`` at a time, accumulating the
gates' inputs over ``BK``-wide slices of ``h_{t-1}`` against tiles of ``U^T``, and writes ``h_t`` and
``c_t`` to global memory, with a barrier between steps (the next step reads every neuron; the
interpreter runs one program at a time and does not exercise the barriers).

Forward, per step ``t`` and row block::

    z_F, z_I = pre_t[F, I] + h_{t-1} U_{F, I}^T                   (BB, n_chunks) each
    F = cumsum(softmax(z_F)),  I = 1 - cumsum(softmax(z_I))       eq. 6-7, per chunk
    for each block of BH neurons:
        f, i, o, c^ = sigmoid / tanh(pre_t[...] + h_{t-1} U_[...]^T)
        F_n, I_n = F E, I E     E (n_chunks, BH): 1 where neuron j is in chunk k (an exact selection)
        w = F_n I_n;  f^ = f w + (F_n - w);  i^ = i w + (I_n - w)      eq. 8
        c_t = f^ c_{t-1} + i^ c^;  h_t = o tanh(c_t)                  eq. 9
        padded (keep False): h_t, c_t = h_{t-1}, c_{t-1}

Backward: :mod:`cn3.layers.onlstm` recomputes the gates for all steps at once from the saved states,
with the step-independent factors ``table``, ``d_o``, ``d_tc``; the kernel runs the rest,
``t = N-1 .. 0``::

    dh = d hs_t + dh_rec;  padded: (dh, dc) pass on to step t-1 unchanged (carry), 0 here
    d c_t = dc + dh d_tc_t;  d pre_t[f, i, c^] = d c_t table_t;  d pre_t[o] = dh d_o_t
    dc <- d c_t f^ (+ carry);  [dF, dI] per chunk = (d c_t table_t[F, I]) E^T  (+ d master_t)
    d pre_t[F] = softmax'(reverse cumsum(dF)),  d pre_t[I] = softmax'(-reverse cumsum(dI))
    dh_rec = d pre_t U (+ carry)

Precision: all fp32; the ``tl.dot`` products as torch's own matmuls (TF32 only where
``torch.backends.cuda.matmul.allow_tf32``), the chunk selections ``E`` always IEEE (exact).
``tanh`` is libdevice's ``tanhf`` on the GPU, ``2 sigmoid(2x) - 1`` in the interpreter.

Without a GPU, ``TRITON_INTERPRET=1`` set before ``triton`` is imported runs the kernels on CPU
tensors with :data:`INTERPRETER_TILES` (``tests/onlstm_interpreter_cases.py``). On a GPU the tiles
are :data:`FWD_TILE` and :data:`BWD_TILE`.
"""

from __future__ import annotations

import triton
import triton.language as tl
from torch import Tensor

from cn3.layers.fused_energy import INTERPRETING, TANH_FORMS, _dot_precision, _mask_bytes, _tanh

#: Tile sizes in the interpreter: small, so that the tests' batches, widths and chunk counts span
#: several partial tiles (tiles under 16 are fine there).
INTERPRETER_TILES = {"BB": 2, "BH": 8, "BK": 8}

#: ``(BB, BH, BK, num_warps, num_stages)`` on a GPU. ``BB = 8`` rows: each program streams all of
#: ``U`` from L2 every step, so fewer rows per program means more programs sharing that traffic
#: (64 x 25 x 256: 8 programs), up to where the FMAs of IEEE ``tl.dot`` catch up. Not timed yet;
#: chosen by compiling for sm_90 without a GPU: at hidden 256 and 512 they need 128-168 registers
#: a thread and spill none, where ``BH = 64`` made the backward spill (its chunk sums, a product
#: ``(BB, BH) x (BH, n_chunks)``, grow with ``BH``).
FWD_TILE = (8, 32, 16, 4, 1)
BWD_TILE = (8, 32, 32, 4, 1)


@triton.jit
def _h_prev(H0, HS, t, rows, row_ok, offs, N, H: tl.constexpr):
    """``h_{t-1}`` at ``(rows, offs)``: ``h_0`` at step 0, else the state the kernel wrote at t-1
    (one of the two loads is masked off entirely)."""
    ok = row_ok[:, None] & (offs < H)[None, :]
    first = tl.load(H0 + rows[:, None] * H + offs[None, :], mask=ok & (t == 0), other=0.0)
    later = tl.load(HS + (rows * N + t - 1)[:, None] * H + offs[None, :], mask=ok & (t > 0), other=0.0)
    return first + later


@triton.jit
def _fwd_kernel(PRE, WT, H0, KEEP, HS, CB, MF, B, N,
                H: tl.constexpr, NC: tl.constexpr, CS: tl.constexpr, NCP: tl.constexpr,
                HAS_KEEP: tl.constexpr, NEED_MASTER: tl.constexpr, TANH: tl.constexpr, DOT_PREC: tl.constexpr,
                BB: tl.constexpr, BH: tl.constexpr, BK: tl.constexpr):
    W = 2 * NC + 4 * H  # gate layout [F (NC), I (NC), f, i, o, c^ (H each)]
    rows = (tl.program_id(0) * BB + tl.arange(0, BB)).to(tl.int64)
    row_ok = rows < B
    offs_c = tl.arange(0, NCP)
    c_ok = offs_c < NC
    for t in range(N):
        pre_row = PRE + (t * B + rows) * W  # (BB,) pointers to pre_t's rows
        # master gates: z = pre_t[F, I] + h_{t-1} U_{F, I}^T
        m_ok = row_ok[:, None] & c_ok[None, :]
        zf = tl.load(pre_row[:, None] + offs_c[None, :], mask=m_ok, other=0.0)
        zi = tl.load(pre_row[:, None] + NC + offs_c[None, :], mask=m_ok, other=0.0)
        for k0 in range(0, H, BK):
            offs_k = k0 + tl.arange(0, BK)
            h = _h_prev(H0, HS, t, rows, row_ok, offs_k, N, H)
            w_ptr = WT + offs_k[:, None] * W + offs_c[None, :]
            w_ok = (offs_k < H)[:, None] & c_ok[None, :]
            zf += tl.dot(h, tl.load(w_ptr, mask=w_ok, other=0.0), input_precision=DOT_PREC)
            zi += tl.dot(h, tl.load(w_ptr + NC, mask=w_ok, other=0.0), input_precision=DOT_PREC)
        zf = tl.where(c_ok[None, :], zf, float("-inf"))  # softmax over the real chunks only
        zi = tl.where(c_ok[None, :], zi, float("-inf"))
        pf = tl.exp(zf - tl.max(zf, axis=1)[:, None])
        pi = tl.exp(zi - tl.max(zi, axis=1)[:, None])
        master_f = tl.cumsum(pf / tl.sum(pf, axis=1)[:, None], axis=1)  # F = cumax(z_F), eq. 6
        master_i = 1.0 - tl.cumsum(pi / tl.sum(pi, axis=1)[:, None], axis=1)  # I = 1 - cumax(z_I), eq. 7
        if NEED_MASTER:
            tl.store(MF + (rows * N + t)[:, None] * NC + offs_c[None, :], master_f, mask=m_ok)
        for j0 in range(0, H, BH):
            offs_j = j0 + tl.arange(0, BH)
            ok = row_ok[:, None] & (offs_j < H)[None, :]
            col = pre_row[:, None] + 2 * NC + offs_j[None, :]
            a_f = tl.load(col, mask=ok, other=0.0)
            a_i = tl.load(col + H, mask=ok, other=0.0)
            a_o = tl.load(col + 2 * H, mask=ok, other=0.0)
            a_c = tl.load(col + 3 * H, mask=ok, other=0.0)
            for k0 in range(0, H, BK):  # + h_{t-1} U^T for this block's neurons of each gate
                offs_k = k0 + tl.arange(0, BK)
                h = _h_prev(H0, HS, t, rows, row_ok, offs_k, N, H)
                w_ptr = WT + offs_k[:, None] * W + 2 * NC + offs_j[None, :]
                w_ok = (offs_k < H)[:, None] & (offs_j < H)[None, :]
                a_f += tl.dot(h, tl.load(w_ptr, mask=w_ok, other=0.0), input_precision=DOT_PREC)
                a_i += tl.dot(h, tl.load(w_ptr + H, mask=w_ok, other=0.0), input_precision=DOT_PREC)
                a_o += tl.dot(h, tl.load(w_ptr + 2 * H, mask=w_ok, other=0.0), input_precision=DOT_PREC)
                a_c += tl.dot(h, tl.load(w_ptr + 3 * H, mask=w_ok, other=0.0), input_precision=DOT_PREC)
            # each neuron's chunk value: a product with the 0/1 membership E (exact in IEEE fp32)
            expand = (offs_c[:, None] == (offs_j // CS)[None, :]).to(tl.float32)  # (NCP, BH)
            mf = tl.dot(master_f, expand, input_precision="ieee")
            mi = tl.dot(master_i, expand, input_precision="ieee")
            overlap = mf * mi  # w = F I, eq. 8
            f_hat = tl.sigmoid(a_f) * overlap + (mf - overlap)  # f w + (F - w)
            i_hat = tl.sigmoid(a_i) * overlap + (mi - overlap)  # i w + (I - w)
            state = (t * B + rows)[:, None] * H + offs_j[None, :]
            c_prev = tl.load(CB + state, mask=ok, other=0.0)
            c_new = f_hat * c_prev + i_hat * _tanh(a_c, TANH)  # c_t = f^ c_{t-1} + i^ c^, eq. 9
            h_new = tl.sigmoid(a_o) * _tanh(c_new, TANH)  # h_t = o tanh(c_t)
            if HAS_KEEP:  # padding keeps the state
                keep = tl.load(KEEP + rows * N + t, mask=row_ok, other=0) != 0
                h_new = tl.where(keep[:, None], h_new, _h_prev(H0, HS, t, rows, row_ok, offs_j, N, H))
                c_new = tl.where(keep[:, None], c_new, c_prev)
            tl.store(HS + (rows * N + t)[:, None] * H + offs_j[None, :], h_new, mask=ok)
            tl.store(CB + B * H + state, c_new, mask=ok)  # c_t at slot t + 1
        tl.debug_barrier()  # step t+1 reads every neuron of h_t, written by other threads


@triton.jit
def _bwd_kernel(D_HS, D_MF, KEEP, TABLE, D_O, D_TC, PROBS, WEIGHT, D_PRE, DH, DC, B, N,
                H: tl.constexpr, NC: tl.constexpr, CS: tl.constexpr, NCP: tl.constexpr,
                HAS_KEEP: tl.constexpr, HAS_DMASTER: tl.constexpr, DOT_PREC: tl.constexpr,
                BB: tl.constexpr, BH: tl.constexpr, BK: tl.constexpr):
    W = 2 * NC + 4 * H
    rows = (tl.program_id(0) * BB + tl.arange(0, BB)).to(tl.int64)
    row_ok = rows < B
    offs_c = tl.arange(0, NCP)
    m_ok = row_ok[:, None] & (offs_c < NC)[None, :]
    # DH holds dh_rec (the recurrent part of d h_t), DC d c_t; both start as the host set them
    for s in range(N):
        t = N - 1 - s
        step = t * B + rows  # (N, B, ...) row index of the factors and of d pre
        dpre_row = D_PRE + step * W
        if HAS_KEEP:
            keep = (tl.load(KEEP + rows * N + t, mask=row_ok, other=0) != 0)[:, None]
        dmf = tl.zeros([BB, NCP], dtype=tl.float32)
        dmi = tl.zeros([BB, NCP], dtype=tl.float32)
        for j0 in range(0, H, BH):
            offs_j = j0 + tl.arange(0, BH)
            ok = row_ok[:, None] & (offs_j < H)[None, :]
            state = rows[:, None] * H + offs_j[None, :]
            dh = (tl.load(D_HS + (rows * N + t)[:, None] * H + offs_j[None, :], mask=ok, other=0.0)
                  + tl.load(DH + state, mask=ok, other=0.0))
            dc = tl.load(DC + state, mask=ok, other=0.0)
            if HAS_KEEP:  # a padded step passes the state's gradients on to the state before it
                carry_h = tl.where(keep, 0.0, dh)
                carry_c = tl.where(keep, 0.0, dc)
                dh = tl.where(keep, dh, 0.0)
                dc = tl.where(keep, dc, 0.0)
            fac = step[:, None] * H + offs_j[None, :]  # (N, B, H) factors
            row = (step * 7)[:, None] * H + offs_j[None, :]  # table (N, B, 7, H)
            dct = dc + dh * tl.load(D_TC + fac, mask=ok, other=0.0)  # d c_t
            gate = dpre_row[:, None] + 2 * NC + offs_j[None, :]
            tl.store(gate, dct * tl.load(TABLE + row, mask=ok, other=0.0), mask=ok)  # f's input
            tl.store(gate + H, dct * tl.load(TABLE + row + H, mask=ok, other=0.0), mask=ok)  # i's
            tl.store(gate + 2 * H, dh * tl.load(D_O + fac, mask=ok, other=0.0), mask=ok)  # o's
            tl.store(gate + 3 * H, dct * tl.load(TABLE + row + 3 * H, mask=ok, other=0.0), mask=ok)  # c^'s
            dc_prev = dct * tl.load(TABLE + row + 4 * H, mask=ok, other=0.0)  # d c_{t-1} = d c_t f^
            # d F, d I per neuron, summed over each chunk: a product with E^T (BH, NCP)
            member = ((offs_j // CS)[:, None] == offs_c[None, :]).to(tl.float32)
            dmf += tl.dot(dct * tl.load(TABLE + row + 5 * H, mask=ok, other=0.0), member, input_precision="ieee")
            dmi += tl.dot(dct * tl.load(TABLE + row + 6 * H, mask=ok, other=0.0), member, input_precision="ieee")
            if HAS_KEEP:
                dc_prev += carry_c
                tl.store(DH + state, carry_h, mask=ok)  # the product below adds d pre_t U to it
            tl.store(DC + state, dc_prev, mask=ok)
        if HAS_DMASTER:  # the returned master forget gates' own gradient
            dmf += tl.load(D_MF + (rows * N + t)[:, None] * NC + offs_c[None, :], mask=m_ok, other=0.0)
        # F = cumsum(p_F), I = 1 - cumsum(p_I): d p is the reverse cumsum of d F, minus that of d I
        probs = PROBS + (step * 2 * NC)[:, None] + offs_c[None, :]  # (N, B, 2, NC)
        pf = tl.load(probs, mask=m_ok, other=0.0)
        pi = tl.load(probs + NC, mask=m_ok, other=0.0)
        rf = tl.cumsum(dmf, axis=1, reverse=True) * pf
        ri = -tl.cumsum(dmi, axis=1, reverse=True) * pi
        # softmax backward: d z = p (d p - <p, d p>)
        tl.store(dpre_row[:, None] + offs_c[None, :], rf - pf * tl.sum(rf, axis=1)[:, None], mask=m_ok)
        tl.store(dpre_row[:, None] + NC + offs_c[None, :], ri - pi * tl.sum(ri, axis=1)[:, None], mask=m_ok)
        tl.debug_barrier()  # the product reads all of d pre_t, written by other threads
        for j0 in range(0, H, BH):  # dh_rec = d pre_t U (+ a padded step's carry)
            offs_j = j0 + tl.arange(0, BH)
            ok = row_ok[:, None] & (offs_j < H)[None, :]
            state = rows[:, None] * H + offs_j[None, :]
            acc = tl.zeros([BB, BH], dtype=tl.float32)
            if HAS_KEEP:
                acc = tl.load(DH + state, mask=ok, other=0.0)
            for k0 in range(0, W, BK):
                offs_k = k0 + tl.arange(0, BK)
                k_ok = offs_k < W
                a = tl.load(dpre_row[:, None] + offs_k[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
                u = tl.load(WEIGHT + offs_k[:, None] * H + offs_j[None, :],
                            mask=k_ok[:, None] & (offs_j < H)[None, :], other=0.0)
                acc += tl.dot(a, u, input_precision=DOT_PREC)
            tl.store(DH + state, acc, mask=ok)
        tl.debug_barrier()  # step t-1 reads dh_rec and dc, written by other threads


def _launch(tile: tuple[int, int, int, int, int], batch: int) -> tuple[tuple[int], dict]:
    """Grid and launch options: :data:`INTERPRETER_TILES` in the interpreter, else ``tile``."""
    if INTERPRETING:
        options = dict(INTERPRETER_TILES)
    else:
        options = {"BB": tile[0], "BH": tile[1], "BK": tile[2], "num_warps": tile[3], "num_stages": tile[4]}
    return (triton.cdiv(batch, options["BB"]),), options


def _chunks(hidden: int, n_chunks: int) -> dict:
    """The kernels' shape constants; the chunk axis padded to a power of two, at least 16 (``tl.dot``'s
    smallest inner width on a GPU)."""
    return {"H": hidden, "NC": n_chunks, "CS": hidden // n_chunks, "NCP": max(16, triton.next_power_of_2(n_chunks))}


def scan_forward(pre: Tensor, wt: Tensor, h0: Tensor, c0: Tensor, keep: Tensor | None, n_chunks: int,
                 need_master: bool) -> tuple[Tensor, Tensor, Tensor]:
    """The recurrence over all steps in one launch.

    Args:
        pre: ``(N, B, width)`` fp32 input projections, bias included (``width = 2 n_chunks + 4 hidden``).
        wt: ``(hidden, width)`` the recurrent matrix transposed, contiguous.
        h0, c0: ``(B, hidden)`` the initial state.
        keep: ``(B, N)`` bool, False at padded steps (which keep the state), or None.
        n_chunks: master-gate units.
        need_master: also return the master forget gates.

    Shapes:
        returns ``hs (B, N, hidden)`` (the state after each step), ``cells (N + 1, B, hidden)``
        (``c_0``, then the cell after each step) and ``master (B, N, n_chunks)`` (empty unless
        ``need_master``).
    """
    n, b, _ = pre.shape
    hidden = wt.shape[0]
    hs = pre.new_empty(b, n, hidden)
    cells = pre.new_empty(n + 1, b, hidden)
    cells[0] = c0
    master = pre.new_empty(b, n, n_chunks) if need_master else pre.new_empty(1)
    grid, options = _launch(FWD_TILE, b)
    if b:
        _fwd_kernel[grid](pre.contiguous(), wt.contiguous(), h0.contiguous(), _mask_bytes(keep, pre.device), hs,
                          cells, master, b, n, **_chunks(hidden, n_chunks), HAS_KEEP=keep is not None,
                          NEED_MASTER=need_master, TANH=TANH_FORMS["sigmoid" if INTERPRETING else "libdevice"],
                          DOT_PREC=_dot_precision(pre.dtype), **options)
    return hs, cells, master if need_master else pre.new_empty(0)


def scan_backward(d_hs: Tensor, d_c: Tensor, d_master: Tensor | None, keep: Tensor | None, table: Tensor,
                  d_o: Tensor, d_tc: Tensor, probs: Tensor, weight: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The backward's step loop in one launch.

    Args:
        d_hs: ``(B, N, hidden)`` the gradient of the states; d_c ``(B, hidden)`` of the last cell;
            d_master ``(B, N, n_chunks)`` of the master forget gates, or None.
        keep: ``(B, N)`` bool or None, as in :func:`scan_forward`.
        table, d_o, d_tc: ``(N, B, 7, hidden)``, ``(N, B, hidden)`` twice: the factors of
            :func:`cn3.layers.onlstm._backward_factors`.
        probs: ``(N, B, 2, n_chunks)`` the master gates' softmax.
        weight: ``(width, hidden)`` the recurrent matrix.

    Shapes:
        returns ``d pre (N, B, width)``, ``d h_0``, ``d c_0`` ``(B, hidden)``.
    """
    b, n, hidden = d_hs.shape
    n_chunks = probs.shape[-1]
    d_pre = d_hs.new_empty(n, b, weight.shape[0])
    dh = d_hs.new_zeros(b, hidden)
    dc = d_c.contiguous().clone()
    grid, options = _launch(BWD_TILE, b)
    if b:
        _bwd_kernel[grid](d_hs.contiguous(), d_hs.new_empty(1) if d_master is None else d_master.contiguous(),
                          _mask_bytes(keep, d_hs.device), table.contiguous(), d_o.contiguous(), d_tc.contiguous(),
                          probs.contiguous(), weight.contiguous(), d_pre, dh, dc, b, n, **_chunks(hidden, n_chunks),
                          HAS_KEEP=keep is not None, HAS_DMASTER=d_master is not None,
                          DOT_PREC=_dot_precision(d_hs.dtype), **options)
    return d_pre, dh, dc
