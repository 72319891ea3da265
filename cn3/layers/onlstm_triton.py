"""ON-LSTM's recurrence as Triton kernels, forward and backward, split across programs by hidden
units, with its plain PyTorch reference: the ``triton`` kernel of :class:`cn3.layers.onlstm.ONLSTM`
(``kernel``; a run's ``model.rnn.onlstm_kernel``).

The sequential part of :class:`cn3.layers.onlstm._ONLSTMScan` (Shen et al., eq. 3-9; written
plainly in :func:`reference_scan`): per time step the recurrent product ``h_{t-1} U`` added to the
precomputed input projection, the master gates' ``cumax``, the chunked cell update and the padding
rule (a padded step keeps the state).

Programs: a grid of ``row blocks x column programs``. Program ``(r, c)`` owns ``BB`` batch rows and
the ``COLS`` hidden units ``c COLS : (c+1) COLS`` (the recurrent product's output columns of each
gate); it computes the master gates of its rows itself (every column program of a row block repeats
that ``h_{t-1} U_{F,I}^T`` product: the ``cumax`` needs every chunk). After each step every program
needs all of ``h_t``: a step barrier across the row block's column programs.

* On a GPU with one column program per row block, one launch loops over time with
  ``tl.debug_barrier`` between steps (one program holds the whole step). With several, one launch
  runs all steps and a step ends at a barrier in global memory: an atomic counter per (row block,
  step) that each program increments and spins on until every column program has arrived (loads of
  other programs' states bypass L1). A spin barrier needs every program resident at once: the grid
  is at most one program per SM (:func:`plan`) and is launched cooperatively (the launch fails
  rather than deadlock). The spin is bounded (:data:`BARRIER_SPINS`): a program that gives up sets a
  flag in global memory, writes NaN into its units and the launch ends. The host reads the flag
  after the first launch of each configuration; with the flag set, or the cooperative launch
  refused, it warns once and runs the step loop again on one column program per row block (no
  barrier), for that device from then on (:func:`_run_split`).
* Triton's interpreter runs programs one after another, so a spin barrier would wait forever there:
  it runs one launch per step instead (two per step backward: the cells' pass, then the recurrent
  product), the launches' boundaries being the barriers. The column split is the same, so the tests
  exercise it.

Forward, per step ``t`` and program::

    z_F, z_I = pre_t[F, I] + h_{t-1} U_{F, I}^T                   (BB, n_chunks) each
    F = cumsum(softmax(z_F)),  I = 1 - cumsum(softmax(z_I))       eq. 6-7, per chunk
    for each block of BH of its neurons:
        f, i, o, c^ = sigmoid / tanh(pre_t[...] + h_{t-1} U_[...]^T)
        F_n, I_n = F E, I E     E (n_chunks, BH): 1 where neuron j is in chunk k (an exact selection)
        w = F_n I_n;  f^ = f w + (F_n - w);  i^ = i w + (I_n - w)      eq. 8
        c_t = f^ c_{t-1} + i^ c^;  h_t = o tanh(c_t)                  eq. 9
        padded (keep False): h_t, c_t = h_{t-1}, c_{t-1}

Backward: :mod:`cn3.layers.onlstm` recomputes the gates for all steps at once from the saved states,
with the step-independent factors ``table``, ``d_o``, ``d_tc``; the kernel runs the rest,
``t = N-1 .. 0``, in two phases per step with the barrier between them::

    cells (own neurons):
        dh = d hs_t + dh_rec;  padded: (dh, dc) pass on to step t-1 unchanged (carry), 0 here
        d c_t = dc + dh d_tc_t;  d pre_t[f, i, c^] = d c_t table_t;  d pre_t[o] = dh d_o_t
        dc <- d c_t f^ (+ carry);  per neuron: d c_t table_t[F, I] (to a scratch row)
    recurrent (barrier passed: every neuron's part is written):
        [dF, dI] per chunk = scratch E^T (+ d master_t)
        d pre_t[F] = softmax'(reverse cumsum(dF)),  d pre_t[I] = softmax'(-reverse cumsum(dI))
        dh_rec[own] = d pre_t U[:, own] (+ carry)

Precision: all fp32; the ``tl.dot`` products as torch's own matmuls (TF32 only where
``torch.backends.cuda.matmul.allow_tf32``), the chunk selections ``E`` always IEEE (exact).
``tanh`` is libdevice's ``tanhf`` on the GPU, ``2 sigmoid(2x) - 1`` in the interpreter.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
import triton
import triton.language as tl
from torch import Tensor

from cn3.layers.triton_common import INTERPRETING, TANH_FORMS, dot_precision, mask_bytes
from cn3.layers.triton_common import tanh as _tanh

#: Tile sizes in the interpreter: small, so that the tests' batches, widths and chunk counts span
#: several partial tiles and several column programs (tiles under 16 are fine there).
INTERPRETER_TILES = {"BB": 2, "BH": 4, "BK": 8}
#: Column programs per row block in the interpreter (a hidden width of 12 splits 3 ways, 4 units each).
INTERPRETER_COLUMNS = 3

#: ``(BB, BH, BK, num_warps, num_stages)`` on a GPU. ``BB = 8`` rows, neurons ``BH`` at a time, the
#: products' inner width ``BK``: at hidden 256 and 512 they compile for sm_90 with 128-168 registers a
#: thread and no spill, where ``BH = 64`` made the backward spill.
FWD_TILE = (8, 32, 16, 4, 1)
BWD_TILE = (8, 32, 32, 4, 1)


def reference_scan(pre: Tensor, wt: Tensor, h0: Tensor, c0: Tensor, keep: Tensor | None,
                   n_chunks: int) -> tuple[Tensor, Tensor, Tensor]:
    """What :func:`scan_forward` computes, one step at a time in PyTorch (tests).

    Same arguments; returns ``hs (B, N, hidden)``, ``cells (N + 1, B, hidden)`` and the master forget
    gates ``(B, N, n_chunks)``.
    """
    n, b, _ = pre.shape
    hid = wt.shape[0]
    size = hid // n_chunks
    h, c = h0, c0
    hs, cells, masters = [], [c0], []
    for t in range(n):
        z = pre[t] + h @ wt  # (B, width): [F, I, f, i, o, c^]
        master_f = torch.cumsum(torch.softmax(z[:, :n_chunks], -1), -1)  # eq. 6
        master_i = 1 - torch.cumsum(torch.softmax(z[:, n_chunks:2 * n_chunks], -1), -1)  # eq. 7
        f, i, o, cand = z[:, 2 * n_chunks:].view(b, 4, hid).unbind(1)
        big_f, big_i = master_f.repeat_interleave(size, -1), master_i.repeat_interleave(size, -1)
        overlap = big_f * big_i  # eq. 8
        c_new = ((torch.sigmoid(f) * overlap + big_f - overlap) * c
                 + (torch.sigmoid(i) * overlap + big_i - overlap) * torch.tanh(cand))  # eq. 9
        h_new = torch.sigmoid(o) * torch.tanh(c_new)
        if keep is not None:  # a padded step keeps the state
            h_new, c_new = torch.where(keep[:, t, None], h_new, h), torch.where(keep[:, t, None], c_new, c)
        h, c = h_new, c_new
        hs.append(h)
        cells.append(c)
        masters.append(master_f)
    return torch.stack(hs, 1), torch.stack(cells), torch.stack(masters, 1)


@triton.jit
def _load(ptr, mask, SYNC: tl.constexpr):
    """A load of what other programs wrote this launch: past L1 (``.cg``) when they run concurrently."""
    if SYNC:
        x = tl.load(ptr, mask=mask, other=0.0, cache_modifier=".cg")
    else:
        x = tl.load(ptr, mask=mask, other=0.0)
    return x


@triton.jit
def _step_barrier(counter, n_programs, FLAG, max_spins, SYNC: tl.constexpr):
    """Wait until ``n_programs`` programs have reached this point with ``counter`` (an int32 in global
    memory, zeroed by the host); without ``SYNC`` only this program's threads meet.

    The wait is bounded: a program that has read the counter ``max_spins`` times without seeing every
    arrival sets ``FLAG`` (an int32 zeroed by the host) and goes on, and once ``FLAG`` is set no barrier
    waits, so a launch whose programs are not all resident ends instead of hanging (its results are
    wrong; the host reads ``FLAG`` and runs the step loop again on one column program)."""
    tl.debug_barrier()  # this program's stores are issued
    if SYNC:
        arrived = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu") + 1
        # an earlier barrier gave up: no wait (spins left 0)
        spins = tl.where(tl.atomic_add(FLAG, 0, sem="relaxed", scope="gpu") == 0, max_spins, 0)
        while (arrived < n_programs) & (spins > 0):
            arrived = tl.atomic_add(counter, 0, sem="acquire", scope="gpu")
            spins -= 1
        if arrived < n_programs:
            tl.atomic_xchg(FLAG, 1, sem="relaxed", scope="gpu")
        tl.debug_barrier()


@triton.jit
def _poison_if_failed(OUT, FLAG, N, row_stride, step_stride, rows, row_ok, j_begin, j_end, SYNC: tl.constexpr,
                      BB: tl.constexpr, BH: tl.constexpr):
    """With the barrier's flag set (:func:`_step_barrier`), NaN into this program's units of ``OUT`` at
    every step (element ``rows * row_stride + t * step_stride + j``): a launch whose barrier gave up
    never passes for a result, whether the host reads the flag or not. The program that set the flag
    sees it, so at least its units are NaN."""
    if SYNC:
        steps = tl.where(tl.atomic_add(FLAG, 0, sem="acquire", scope="gpu") != 0, N, 0)  # none unless it failed
        nan = tl.full([BB, BH], float("nan"), tl.float32)
        for t in range(0, steps):
            for j0 in range(j_begin, j_end, BH):
                offs_j = j0 + tl.arange(0, BH)
                ok = row_ok[:, None] & (offs_j < j_end)[None, :]
                tl.store(OUT + (rows * row_stride + t * step_stride)[:, None] + offs_j[None, :], nan, mask=ok)


@triton.jit
def _h_prev(H0, HS, t, rows, row_ok, offs, N, H: tl.constexpr, SYNC: tl.constexpr):
    """``h_{t-1}`` at ``(rows, offs)``: ``h_0`` at step 0, else the state written at t-1."""
    ok = row_ok[:, None] & (offs < H)[None, :]
    first = tl.load(H0 + rows[:, None] * H + offs[None, :], mask=ok & (t == 0), other=0.0)
    return first + _load(HS + (rows * N + t - 1)[:, None] * H + offs[None, :], ok & (t > 0), SYNC)


@triton.jit
def _master_gates(PRE, WT, H0, HS, t, B, N, rows, row_ok, H: tl.constexpr, NC: tl.constexpr, NCP: tl.constexpr,
                  DOT_PREC: tl.constexpr, SYNC: tl.constexpr, BB: tl.constexpr, BK: tl.constexpr):
    """``F = cumax(z_F)``, ``I = 1 - cumax(z_I)`` of step ``t`` for the rows: ``(BB, NCP)`` each."""
    W = 2 * NC + 4 * H
    offs_c = tl.arange(0, NCP)
    c_ok = offs_c < NC
    pre_row = PRE + (t * B + rows) * W
    m_ok = row_ok[:, None] & c_ok[None, :]
    zf = tl.load(pre_row[:, None] + offs_c[None, :], mask=m_ok, other=0.0)
    zi = tl.load(pre_row[:, None] + NC + offs_c[None, :], mask=m_ok, other=0.0)
    for k0 in range(0, H, BK):
        offs_k = k0 + tl.arange(0, BK)
        h = _h_prev(H0, HS, t, rows, row_ok, offs_k, N, H, SYNC)
        w_ptr = WT + offs_k[:, None] * W + offs_c[None, :]
        w_ok = (offs_k < H)[:, None] & c_ok[None, :]
        zf += tl.dot(h, tl.load(w_ptr, mask=w_ok, other=0.0), input_precision=DOT_PREC)
        zi += tl.dot(h, tl.load(w_ptr + NC, mask=w_ok, other=0.0), input_precision=DOT_PREC)
    zf = tl.where(c_ok[None, :], zf, float("-inf"))  # softmax over the real chunks only
    zi = tl.where(c_ok[None, :], zi, float("-inf"))
    pf = tl.exp(zf - tl.max(zf, axis=1)[:, None])
    pi = tl.exp(zi - tl.max(zi, axis=1)[:, None])
    return (tl.cumsum(pf / tl.sum(pf, axis=1)[:, None], axis=1),  # F, eq. 6
            1.0 - tl.cumsum(pi / tl.sum(pi, axis=1)[:, None], axis=1))  # I, eq. 7


@triton.jit
def _onlstm_fwd(PRE, WT, H0, KEEP, HS, CB, MF, COUNTER, FLAG, B, N, T0, T1, COLS, n_cols, max_spins,
                H: tl.constexpr, NC: tl.constexpr, CS: tl.constexpr, NCP: tl.constexpr,
                HAS_KEEP: tl.constexpr, NEED_MASTER: tl.constexpr, TANH: tl.constexpr, DOT_PREC: tl.constexpr,
                SYNC: tl.constexpr, BB: tl.constexpr, BH: tl.constexpr, BK: tl.constexpr):
    W = 2 * NC + 4 * H  # gate layout [F (NC), I (NC), f, i, o, c^ (H each)]
    pid_r, pid_c = tl.program_id(0), tl.program_id(1)
    rows = (pid_r * BB + tl.arange(0, BB)).to(tl.int64)
    row_ok = rows < B
    offs_c = tl.arange(0, NCP)
    j_begin = pid_c * COLS
    j_end = tl.minimum(j_begin + COLS, H)
    for t in range(T0, T1):
        master_f, master_i = _master_gates(PRE, WT, H0, HS, t, B, N, rows, row_ok, H, NC, NCP, DOT_PREC, SYNC,
                                           BB, BK)
        if NEED_MASTER:  # one column program writes them
            tl.store(MF + (rows * N + t)[:, None] * NC + offs_c[None, :], master_f,
                     mask=row_ok[:, None] & ((offs_c < NC) & (offs_c * 0 + pid_c == 0))[None, :])
        pre_row = PRE + (t * B + rows) * W
        for j0 in range(j_begin, j_end, BH):
            offs_j = j0 + tl.arange(0, BH)
            j_ok = offs_j < j_end
            ok = row_ok[:, None] & j_ok[None, :]
            col = pre_row[:, None] + 2 * NC + offs_j[None, :]
            a_f = tl.load(col, mask=ok, other=0.0)
            a_i = tl.load(col + H, mask=ok, other=0.0)
            a_o = tl.load(col + 2 * H, mask=ok, other=0.0)
            a_c = tl.load(col + 3 * H, mask=ok, other=0.0)
            for k0 in range(0, H, BK):  # + h_{t-1} U^T for this block's neurons of each gate
                offs_k = k0 + tl.arange(0, BK)
                h = _h_prev(H0, HS, t, rows, row_ok, offs_k, N, H, SYNC)
                w_ptr = WT + offs_k[:, None] * W + 2 * NC + offs_j[None, :]
                w_ok = (offs_k < H)[:, None] & j_ok[None, :]
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
            c_prev = tl.load(CB + state, mask=ok, other=0.0)  # this program's own neurons
            c_new = f_hat * c_prev + i_hat * _tanh(a_c, TANH)  # c_t = f^ c_{t-1} + i^ c^, eq. 9
            h_new = tl.sigmoid(a_o) * _tanh(c_new, TANH)  # h_t = o tanh(c_t)
            if HAS_KEEP:  # padding keeps the state
                keep = tl.load(KEEP + rows * N + t, mask=row_ok, other=0) != 0
                h_new = tl.where(keep[:, None], h_new, _h_prev(H0, HS, t, rows, row_ok, offs_j, N, H, SYNC))
                c_new = tl.where(keep[:, None], c_new, c_prev)
            tl.store(HS + (rows * N + t)[:, None] * H + offs_j[None, :], h_new, mask=ok)
            tl.store(CB + B * H + state, c_new, mask=ok)  # c_t at slot t + 1
        _step_barrier(COUNTER + pid_r * N + t, n_cols, FLAG, max_spins, SYNC)  # step t+1 reads all of h_t
    _poison_if_failed(HS, FLAG, N, N * H, H, rows, row_ok, j_begin, j_end, SYNC, BB, BH)  # hs (B, N, H)


@triton.jit
def _bwd_cells(D_HS, KEEP, TABLE, D_O, D_TC, D_PRE, DFI, DH, DC, t, B, N, rows, row_ok, j_begin, j_end,
               H: tl.constexpr, NC: tl.constexpr, HAS_KEEP: tl.constexpr, BB: tl.constexpr, BH: tl.constexpr):
    """Phase one of backward step ``t`` over the program's neurons: the gates' ``d pre``, ``d c_{t-1}``,
    a padded step's carry and each neuron's ``d c_t table_t[F, I]`` (to the scratch ``DFI``)."""
    W = 2 * NC + 4 * H
    step = t * B + rows  # (N, B, ...) row index of the factors and of d pre
    dpre_row = D_PRE + step * W
    scratch = DFI + ((t % 2) * B + rows) * 2 * H  # (2, B, 2, H): steps alternate slots
    if HAS_KEEP:
        keep = (tl.load(KEEP + rows * N + t, mask=row_ok, other=0) != 0)[:, None]
    for j0 in range(j_begin, j_end, BH):
        offs_j = j0 + tl.arange(0, BH)
        ok = row_ok[:, None] & (offs_j < j_end)[None, :]
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
        tl.store(scratch[:, None] + offs_j[None, :], dct * tl.load(TABLE + row + 5 * H, mask=ok, other=0.0), mask=ok)
        tl.store(scratch[:, None] + H + offs_j[None, :], dct * tl.load(TABLE + row + 6 * H, mask=ok, other=0.0),
                 mask=ok)
        if HAS_KEEP:
            dc_prev += carry_c
            tl.store(DH + state, carry_h, mask=ok)  # the product of phase two adds d pre_t U to it
        tl.store(DC + state, dc_prev, mask=ok)


@triton.jit
def _bwd_recurrent(D_MF, PROBS, WEIGHT, D_PRE, DFI, DH, t, B, N, rows, row_ok, j_begin, j_end, pid_c,
                   H: tl.constexpr, NC: tl.constexpr, CS: tl.constexpr, NCP: tl.constexpr, HAS_KEEP: tl.constexpr,
                   HAS_DMASTER: tl.constexpr, DOT_PREC: tl.constexpr, SYNC: tl.constexpr, BB: tl.constexpr,
                   BH: tl.constexpr, BK: tl.constexpr):
    """Phase two of backward step ``t``: the master gates' ``d pre`` (from every neuron's scratch) and
    ``dh_rec = d pre_t U`` for the program's neurons."""
    W = 2 * NC + 4 * H
    step = t * B + rows
    dpre_row = D_PRE + step * W
    scratch = DFI + ((t % 2) * B + rows) * 2 * H
    offs_c = tl.arange(0, NCP)
    c_ok = offs_c < NC
    m_ok = row_ok[:, None] & c_ok[None, :]
    dmf = tl.zeros([BB, NCP], dtype=tl.float32)
    dmi = tl.zeros([BB, NCP], dtype=tl.float32)
    for j0 in range(0, H, BH):  # d F, d I per chunk: every neuron's share summed, a product with E^T
        offs_j = j0 + tl.arange(0, BH)
        ok = row_ok[:, None] & (offs_j < H)[None, :]
        member = ((offs_j // CS)[:, None] == offs_c[None, :]).to(tl.float32)
        dmf += tl.dot(_load(scratch[:, None] + offs_j[None, :], ok, SYNC), member, input_precision="ieee")
        dmi += tl.dot(_load(scratch[:, None] + H + offs_j[None, :], ok, SYNC), member, input_precision="ieee")
    if HAS_DMASTER:  # the returned master forget gates' own gradient
        dmf += tl.load(D_MF + (rows * N + t)[:, None] * NC + offs_c[None, :], mask=m_ok, other=0.0)
    # F = cumsum(p_F), I = 1 - cumsum(p_I): d p is the reverse cumsum of d F, minus that of d I
    probs = PROBS + (step * 2 * NC)[:, None] + offs_c[None, :]  # (N, B, 2, NC)
    pf = tl.load(probs, mask=m_ok, other=0.0)
    pi = tl.load(probs + NC, mask=m_ok, other=0.0)
    rf = tl.cumsum(dmf, axis=1, reverse=True) * pf
    ri = -tl.cumsum(dmi, axis=1, reverse=True) * pi
    dzf = rf - pf * tl.sum(rf, axis=1)[:, None]  # softmax backward: d z = p (d p - <p, d p>)
    dzi = ri - pi * tl.sum(ri, axis=1)[:, None]
    first = m_ok & (offs_c * 0 + pid_c == 0)[None, :]  # one column program writes them
    tl.store(dpre_row[:, None] + offs_c[None, :], dzf, mask=first)
    tl.store(dpre_row[:, None] + NC + offs_c[None, :], dzi, mask=first)
    for j0 in range(j_begin, j_end, BH):  # dh_rec = d pre_t U (+ a padded step's carry)
        offs_j = j0 + tl.arange(0, BH)
        j_ok = offs_j < j_end
        ok = row_ok[:, None] & j_ok[None, :]
        state = rows[:, None] * H + offs_j[None, :]
        acc = tl.zeros([BB, BH], dtype=tl.float32)
        if HAS_KEEP:
            acc = tl.load(DH + state, mask=ok, other=0.0)
        u_ok = c_ok[:, None] & j_ok[None, :]
        acc += tl.dot(dzf, tl.load(WEIGHT + offs_c[:, None] * H + offs_j[None, :], mask=u_ok, other=0.0),
                      input_precision=DOT_PREC)
        acc += tl.dot(dzi, tl.load(WEIGHT + (NC + offs_c)[:, None] * H + offs_j[None, :], mask=u_ok, other=0.0),
                      input_precision=DOT_PREC)
        for k0 in range(2 * NC, W, BK):  # the gates' part, written by every program in phase one
            offs_k = k0 + tl.arange(0, BK)
            k_ok = offs_k < W
            a = _load(dpre_row[:, None] + offs_k[None, :], row_ok[:, None] & k_ok[None, :], SYNC)
            u = tl.load(WEIGHT + offs_k[:, None] * H + offs_j[None, :], mask=k_ok[:, None] & j_ok[None, :], other=0.0)
            acc += tl.dot(a, u, input_precision=DOT_PREC)
        tl.store(DH + state, acc, mask=ok)


@triton.jit
def _onlstm_bwd(D_HS, D_MF, KEEP, TABLE, D_O, D_TC, PROBS, WEIGHT, D_PRE, DFI, DH, DC, COUNTER, FLAG, B, N, S0,
                S1, COLS, n_cols, max_spins, H: tl.constexpr, NC: tl.constexpr, CS: tl.constexpr, NCP: tl.constexpr,
                HAS_KEEP: tl.constexpr, HAS_DMASTER: tl.constexpr, DOT_PREC: tl.constexpr, PHASES: tl.constexpr,
                SYNC: tl.constexpr, BB: tl.constexpr, BH: tl.constexpr, BK: tl.constexpr):
    """Backward steps ``t = N-1-S0 .. N-S1``; ``PHASES``: 1 the cells' phase only, 2 the recurrent
    phase only (the interpreter's two launches per step), 3 both with the step barrier between."""
    pid_r, pid_c = tl.program_id(0), tl.program_id(1)
    rows = (pid_r * BB + tl.arange(0, BB)).to(tl.int64)
    row_ok = rows < B
    j_begin = pid_c * COLS
    j_end = tl.minimum(j_begin + COLS, H)
    # DH holds dh_rec (the recurrent part of d h_t), DC d c_t; both start as the host set them
    for s in range(S0, S1):
        t = N - 1 - s
        if PHASES % 2 == 1:
            _bwd_cells(D_HS, KEEP, TABLE, D_O, D_TC, D_PRE, DFI, DH, DC, t, B, N, rows, row_ok, j_begin, j_end,
                       H, NC, HAS_KEEP, BB, BH)
        if PHASES == 3:
            _step_barrier(COUNTER + pid_r * N + t, n_cols, FLAG, max_spins, SYNC)  # phase two reads all phase one
        if PHASES >= 2:
            _bwd_recurrent(D_MF, PROBS, WEIGHT, D_PRE, DFI, DH, t, B, N, rows, row_ok, j_begin, j_end, pid_c,
                           H, NC, CS, NCP, HAS_KEEP, HAS_DMASTER, DOT_PREC, SYNC, BB, BH, BK)
            tl.debug_barrier()  # step t-1 reads this program's dh_rec and dc
    if PHASES == 3:  # d pre (N, B, W) at step 0, its f-gate columns: the input weights' gradient is NaN
        _poison_if_failed(D_PRE + 2 * NC, FLAG, 1, 2 * NC + 4 * H, 0, rows, row_ok, j_begin, j_end, SYNC, BB, BH)


def plan(batch: int, hidden: int, tile: tuple[int, int, int, int, int], device: torch.device,
         columns: int | None = None) -> tuple[tuple[int, int], dict, int, bool]:
    """How a launch splits the work: ``(grid, options, units per column program, sync)``.

    Rows go ``BB`` to a program; the hidden units are split over up to ``columns`` programs per row
    block, ``BH``-aligned. Default ``columns``: 1 on a device whose barrier once failed
    (:func:`_barrier_failed`); else in the interpreter :data:`INTERPRETER_COLUMNS`, on a GPU as many as
    keep one program per SM at most (``SMs // row blocks``, at least 1, at most one per ``BH`` units),
    so that every program of a spin barrier is resident. ``sync``: the launch runs all steps with the barrier in
    global memory (several column programs, not the interpreter unless :data:`FORCE_BARRIER`).
    """
    if INTERPRETING:
        options = dict(INTERPRETER_TILES)
        columns = columns or (1 if str(device) in _SINGLE_COLUMN else INTERPRETER_COLUMNS)
    else:
        options = {"BB": tile[0], "BH": tile[1], "BK": tile[2], "num_warps": tile[3], "num_stages": tile[4]}
    row_blocks = triton.cdiv(batch, options["BB"])
    if columns is None:
        columns = 1 if str(device) in _SINGLE_COLUMN else \
            torch.cuda.get_device_properties(device).multi_processor_count // max(row_blocks, 1)
    columns = max(1, min(columns, triton.cdiv(hidden, options["BH"])))
    units = triton.cdiv(triton.cdiv(hidden, columns), options["BH"]) * options["BH"]
    n_cols = triton.cdiv(hidden, units)
    sync = n_cols > 1 and (FORCE_BARRIER or not INTERPRETING)
    if sync:
        options["launch_cooperative_grid"] = True  # a grid that cannot be resident at once fails to launch
    return (row_blocks, n_cols), options, units, sync


#: How many times a program reads a step barrier's counter before it gives up (:func:`_step_barrier`):
#: far beyond a step's work (microseconds per step at hidden 512), about a second of spinning.
BARRIER_SPINS = 1 << 20
#: Tests only: run the global barrier in the interpreter too (one launch for all steps). The
#: interpreter runs programs one after another, so every barrier there gives up: the bounded spin, the
#: flag and the fallback run on a CPU.
FORCE_BARRIER = False
_SINGLE_COLUMN: set[str] = set()  # devices whose barrier failed: one column program from then on
_CHECKED: set[tuple] = set()  # launch configurations whose barrier flag was read once and found clear


class BarrierError(RuntimeError):
    """A launch with the step barrier in global memory failed: the cooperative launch was refused, or a
    program gave up waiting at a barrier (the flag set), so the launch's results are not to be used."""


def _barrier_failed(error: BarrierError, device: torch.device, what: str) -> None:
    """Note that ``device``'s barrier failed (:func:`plan` gives it one column program from then on) and
    say so once per device, with the reason, as a ``RuntimeWarning``."""
    if str(device) not in _SINGLE_COLUMN:
        _SINGLE_COLUMN.add(str(device))
        warnings.warn(f"ON-LSTM Triton {what}: the column programs' step barrier failed ({error}); running one "
                      f"column program per row block on {device} from now on (no barrier, slower on wide layers)",
                      RuntimeWarning, stacklevel=3)


def _run_split(attempt: Callable[[int | None], tuple[tuple[Tensor, ...], Tensor | None, tuple]],
               columns: int | None, device: torch.device, what: str) -> tuple[Tensor, ...]:
    """``attempt(columns)``'s results, checked: it returns ``(results, flag, key)`` (``flag`` the
    barrier's int32 flag, None without a barrier; ``key`` the launch's configuration) or raises
    :class:`BarrierError` (a refused launch). With the flag set or the launch refused,
    :func:`_barrier_failed` and ``attempt(1)`` (no barrier).

    The flag is read on the host after the first launch of each configuration (device, kernel, grid,
    widths; not while a CUDA graph is captured, where a read is not allowed): one wait for the device
    then, none at later steps. A configuration that passed once has every program resident (the
    cooperative launch guarantees it, or refuses), so later launches are not read; should one of them
    give up all the same, its programs' units come out NaN (:func:`_poison_if_failed`), never a
    silent wrong result."""
    try:
        results, flag, key = attempt(columns)
        if flag is not None and key not in _CHECKED and not (flag.is_cuda and torch.cuda.is_current_stream_capturing()):
            if int(flag):
                raise BarrierError(f"a program waited {BARRIER_SPINS} spins at a step barrier for programs that "
                                   f"never arrived")
            _CHECKED.add(key)
    except BarrierError as error:
        _barrier_failed(error, device, what)
        results, _, _ = attempt(1)
    return results


def _launch(kernel, grid: tuple[int, int], args: tuple, flags: dict, sync: bool) -> None:
    """``kernel[grid](*args, **flags)``; with the barrier (``sync``) a refused launch raises
    :class:`BarrierError` (e.g. a cooperative grid too large to be resident at once)."""
    if not sync:
        kernel[grid](*args, **flags)
        return
    try:
        kernel[grid](*args, **flags)
    except RuntimeError as error:  # the driver's launch error, as Triton's launcher raises it
        raise BarrierError(f"the cooperative launch of {grid[0]} x {grid[1]} programs failed: {error}") from error


def _chunks(hidden: int, n_chunks: int) -> dict:
    """The kernels' shape constants; the chunk axis padded to a power of two, at least 16 (``tl.dot``'s
    smallest inner width on a GPU)."""
    return {"H": hidden, "NC": n_chunks, "CS": hidden // n_chunks, "NCP": max(16, triton.next_power_of_2(n_chunks))}


def _sync_buffers(rows: int, n: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """The barrier's counters ``(row blocks, N)`` and its flag ``(1,)``, int32 zeros."""
    return torch.zeros(rows, n, dtype=torch.int32, device=device), torch.zeros(1, dtype=torch.int32, device=device)


def scan_forward(pre: Tensor, wt: Tensor, h0: Tensor, c0: Tensor, keep: Tensor | None, n_chunks: int,
                 need_master: bool, columns: int | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """The recurrence over all steps: one launch on a GPU, one per step in the interpreter.

    Args:
        pre: ``(N, B, width)`` fp32 input projections, bias included (``width = 2 n_chunks + 4 hidden``).
        wt: ``(hidden, width)`` the recurrent matrix transposed, contiguous.
        h0, c0: ``(B, hidden)`` the initial state.
        keep: ``(B, N)`` bool, False at padded steps (which keep the state), or None.
        n_chunks: master-gate units.
        need_master: also return the master forget gates.
        columns: column programs per row block (:func:`plan`); None: its default.

    Shapes:
        returns ``hs (B, N, hidden)`` (the state after each step), ``cells (N + 1, B, hidden)``
        (``c_0``, then the cell after each step) and ``master (B, N, n_chunks)`` (empty unless
        ``need_master``).

    Warns:
        RuntimeWarning: the step barrier failed (:func:`_run_split`); the results are those of one
        column program, run again.
    """
    n, b, _ = pre.shape
    hidden = wt.shape[0]

    def attempt(cols: int | None) -> tuple[tuple[Tensor, ...], Tensor | None, tuple]:
        hs = pre.new_empty(b, n, hidden)
        cells = pre.new_empty(n + 1, b, hidden)
        cells[0] = c0
        master = pre.new_empty(b, n, n_chunks) if need_master else pre.new_empty(1)
        if not (b and n):
            return (hs, cells, master), None, ()
        grid, options, units, sync = plan(b, hidden, FWD_TILE, pre.device, cols)
        counter, flag = _sync_buffers(grid[0], n, pre.device)
        args = (pre.contiguous(), wt.contiguous(), h0.contiguous(), mask_bytes(keep, pre.device), hs, cells, master,
                counter, flag, b, n)
        flags = dict(**_chunks(hidden, n_chunks), HAS_KEEP=keep is not None, NEED_MASTER=need_master,
                     TANH=TANH_FORMS["sigmoid" if INTERPRETING else "libdevice"], DOT_PREC=dot_precision(pre.dtype),
                     SYNC=sync, **options)
        for t0, t1 in _step_ranges(n, sync):
            _launch(_onlstm_fwd, grid, (*args, t0, t1, units, grid[1], BARRIER_SPINS), flags, sync)
        return (hs, cells, master), flag if sync else None, (str(pre.device), "forward", grid, hidden, n_chunks)

    hs, cells, master = _run_split(attempt, columns, pre.device, "forward")
    return hs, cells, master if need_master else pre.new_empty(0)


def _step_ranges(n: int, sync: bool) -> list[tuple[int, int]]:
    """The steps of each launch: all at once with the barrier or on a GPU, one at a time in the interpreter."""
    return [(t, t + 1) for t in range(n)] if INTERPRETING and not sync else [(0, n)]


def scan_backward(d_hs: Tensor, d_c: Tensor, d_master: Tensor | None, keep: Tensor | None, table: Tensor,
                  d_o: Tensor, d_tc: Tensor, probs: Tensor, weight: Tensor,
                  columns: int | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """The backward's step loop: one launch on a GPU, two per step in the interpreter.

    Args:
        d_hs: ``(B, N, hidden)`` the gradient of the states; d_c ``(B, hidden)`` of the last cell;
            d_master ``(B, N, n_chunks)`` of the master forget gates, or None.
        keep: ``(B, N)`` bool or None, as in :func:`scan_forward`.
        table, d_o, d_tc: ``(N, B, 7, hidden)``, ``(N, B, hidden)`` twice: the factors of
            :func:`cn3.layers.onlstm._backward_factors`.
        probs: ``(N, B, 2, n_chunks)`` the master gates' softmax.
        weight: ``(width, hidden)`` the recurrent matrix.
        columns: column programs per row block (:func:`plan`); None: its default.

    Shapes:
        returns ``d pre (N, B, width)``, ``d h_0``, ``d c_0`` ``(B, hidden)``.

    Warns:
        RuntimeWarning: as :func:`scan_forward`.
    """
    b, n, hidden = d_hs.shape
    n_chunks = probs.shape[-1]

    def attempt(cols: int | None) -> tuple[tuple[Tensor, ...], Tensor | None, tuple]:
        d_pre = d_hs.new_empty(n, b, weight.shape[0])
        dh = d_hs.new_zeros(b, hidden)  # the kernel's running dh_rec and dc: fresh for each attempt
        dc = d_c.contiguous().clone()
        if not (b and n):
            return (d_pre, dh, dc), None, ()
        grid, options, units, sync = plan(b, hidden, BWD_TILE, d_hs.device, cols)
        counter, flag = _sync_buffers(grid[0], n, d_hs.device)
        args = (d_hs.contiguous(), d_hs.new_empty(1) if d_master is None else d_master.contiguous(),
                mask_bytes(keep, d_hs.device), table.contiguous(), d_o.contiguous(), d_tc.contiguous(),
                probs.contiguous(), weight.contiguous(), d_pre, d_hs.new_empty(2, b, 2, hidden), dh, dc,
                counter, flag, b, n)
        flags = dict(**_chunks(hidden, n_chunks), HAS_KEEP=keep is not None, HAS_DMASTER=d_master is not None,
                     DOT_PREC=dot_precision(d_hs.dtype), SYNC=sync, **options)
        for s0, s1 in _step_ranges(n, sync):
            for phases in ((1, 2) if INTERPRETING and not sync else (3,)):
                _launch(_onlstm_bwd, grid, (*args, s0, s1, units, grid[1], BARRIER_SPINS), {**flags, "PHASES": phases},
                        sync)
        return (d_pre, dh, dc), flag if sync else None, (str(d_hs.device), "backward", grid, hidden, n_chunks)

    d_pre, dh, dc = _run_split(attempt, columns, d_hs.device, "backward")
    return d_pre, dh, dc
