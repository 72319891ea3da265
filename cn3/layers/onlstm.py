"""Ordered-neurons LSTM (Shen et al., ICLR 2019) and a padding-aware LSTM, for the encoder of
Hao et al. (2019).

ON-LSTM, eq. 3-9 of Shen et al. (``cumax(x) = cumsum(softmax(x))``)::

    f_t, i_t, o_t = sigmoid(W x_t + U h_{t-1} + b)                   standard gates
    c^_t = tanh(W_c x_t + U_c h_{t-1} + b_c)
    F_t = cumax(W_F x_t + U_F h_{t-1} + b_F)                         master forget gate (rises 0 -> 1)
    I_t = 1 - cumax(W_I x_t + U_I h_{t-1} + b_I)                     master input gate (falls 1 -> 0)
    w_t = F_t * I_t
    f^_t = f_t * w_t + (F_t - w_t),   i^_t = i_t * w_t + (I_t - w_t)
    c_t = f^_t * c_{t-1} + i^_t * c^_t,   h_t = o_t * tanh(c_t)

The master gates are chunked: they have ``hidden / chunk_size`` units, each shared by
``chunk_size`` neurons. Padding (``mask`` False) keeps the state unchanged and gives zero output, so
a sentence's outputs do not depend on how much padding follows it. ``bidirectional`` runs a second
layer over each sentence reversed within its own length.

The input projections of all steps are one matrix product; the recurrence is :class:`_ONLSTMScan`
(hand-written backward), whose step loops ``kernel`` chooses per layer (:data:`KERNELS`;
``model.rnn.onlstm_kernel`` in a run's config). The kernel changes nothing beyond rounding:

* ``scan``: a Python loop over time (:func:`_forward_steps`, :func:`_backward_steps`); any device and dtype.
* ``triton``: the kernels of :mod:`cn3.layers.onlstm_triton` on fp32 CUDA tensors (CPU
  tensors under Triton's interpreter); elsewhere ``scan`` (Triton missing: a ``RuntimeWarning``, once).
* ``auto``: ``triton`` on fp32 CUDA tensors up to hidden :data:`TRITON_AUTO_MAX_HIDDEN` where Triton
  imports, else ``scan``.

Under CUDA autocast the input projection runs in the autocast dtype and the recurrence in fp32, so
the cell state is never rounded to bf16. Under autocast on a device of :data:`AUTOCAST_STEP_LOOP`
(the CPU) the layer runs :meth:`ONLSTM._step_loop` (autograd, autocast's per-operation dtypes)
whatever ``kernel`` says: there neither path was faster at every size (docs/benchmarks.md, "CPU
before and after").
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from cn3.layers import packed
from cn3.layers.lstm import LSTM
from cn3.layers.packed import reverse_within_lengths, run_packed


def cumax(x: Tensor, dim: int = -1) -> Tensor:
    """``cumsum(softmax(x))``: a soft, monotonically non-decreasing ``0 -> 1`` gate along ``dim``."""
    return torch.cumsum(torch.softmax(x, dim=dim), dim=dim)


def _forward_steps(pre: Tensor, wt: Tensor, h0: Tensor, hs: Tensor, cg: Tensor, sig: Tensor, master: Tensor,
                   hats: Tensor, tanh_c: Tensor, keep: Tensor | None, full: int, nc: int) -> Tensor:
    """The step loop of :meth:`_ONLSTMScan.forward`: fills the buffers, returns the master gates'
    softmax ``(N, B, 2, nc)``."""
    n, b, _ = pre.shape
    hid = wt.shape[0]
    cs, m2 = hid // nc, 2 * nc
    offset = torch.arange(2, dtype=pre.dtype, device=pre.device).view(2, 1)  # [[0], [1]], made on the device
    sign = 1 - 2 * offset  # [[1], [-1]]: [F, I] = [cumax, 1 - cumax]
    probs: list[Tensor] = []
    h = h0
    for t in range(n):
        gates = torch.addmm(pre[t], h, wt)
        p = torch.softmax(gates[:, :m2].view(b, 2, nc), -1)
        m = torch.addcmul(offset, torch.cumsum(p, -1), sign, out=master[t]).unsqueeze(-1)  # (B, 2, nc, 1)
        overlap = m[:, :1] * m[:, 1:]  # w = F * I
        s = torch.sigmoid(gates[:, m2:m2 + 3 * hid].view(b, 3, hid), out=sig[t])
        cur = cg[t]
        cand = torch.tanh(gates[:, m2 + 3 * hid:], out=cur[:, 1]).view(b, nc, cs)
        # f * w + (F - w), i * w + (I - w)
        hat = torch.addcmul(m - overlap, s[:, :2].view(b, 2, nc, cs), overlap, out=hats[t])
        c_next = cg[t + 1, :, 0]
        h_t = hs[:, t]
        if keep is not None and t >= full:  # padding keeps the state
            k = keep[:, t].unsqueeze(1)
            c_new = torch.addcmul(hat[:, 0] * cur[:, 0].view(b, nc, cs), hat[:, 1], cand)
            tc = torch.tanh(c_new, out=tanh_c[t].view(b, nc, cs))
            torch.where(k, (s[:, 2].view(b, nc, cs) * tc).view(b, hid), h, out=h_t)
            torch.where(k, c_new.view(b, hid), cur[:, 0], out=c_next)
        else:
            c_new = torch.addcmul(hat[:, 0] * cur[:, 0].view(b, nc, cs), hat[:, 1], cand, out=c_next.view(b, nc, cs))
            tc = torch.tanh(c_new, out=tanh_c[t].view(b, nc, cs))
            torch.mul(s[:, 2].view(b, nc, cs), tc, out=h_t.view(b, nc, cs))
        h = h_t
        probs.append(p)
    return torch.stack(probs)


def _backward_steps(d_hs: Tensor, d_c: Tensor, d_master: Tensor | None, d_pre: Tensor, table: Tensor, d_o: Tensor,
                    d_tc: Tensor, probs: Tensor, signed_probs: Tensor, tri: Tensor, weight: Tensor,
                    keep: Tensor | None, full: int, nc: int) -> tuple[Tensor, Tensor]:
    """The step loop of :meth:`_ONLSTMScan.backward`: fills ``d_pre``, returns ``(d h0, d c0)``."""
    b, n, hid = d_hs.shape
    cs, m2, width = hid // nc, 2 * nc, weight.shape[0]
    dh_rec, dc = None, d_c  # the gradients of the state after step t
    for t in range(n - 1, -1, -1):
        dh = d_hs[:, t] if dh_rec is None else d_hs[:, t] + dh_rec
        masked = keep is not None and t >= full
        if masked:  # a padded step passes the state's gradients on to the state before it
            k = keep[:, t].unsqueeze(1)
            dh_real, dc_real = torch.where(k, dh, 0.0), torch.where(k, dc, 0.0)
            carry_h, carry_c = dh - dh_real, dc - dc_real
            dh, dc = dh_real, dc_real
        row = d_pre[t]
        dct = torch.addcmul(dc, dh, d_tc[t])  # d c_t
        torch.mul(dct.unsqueeze(1), table[t], out=row[:, m2:].view(b, 7, hid))
        torch.mul(dh, d_o[t], out=row[:, m2 + 2 * hid:m2 + 3 * hid])  # o's row of the table was a placeholder
        d_m = row[:, m2 + 5 * hid:].view(b, 2, nc, cs).sum(-1)  # (B, 2, nc): d F, d I
        if d_master is not None:
            d_m[:, 0] += d_master[:, t]
        r = torch.matmul(d_m, tri)  # d p, up to the sign (in signed_probs)
        rp = r * signed_probs[t]
        torch.addcmul(rp, probs[t], rp.sum(-1, keepdim=True), value=-1.0, out=row[:, :m2].view(b, 2, nc))
        dh_rec = torch.mm(row[:, :width], weight)
        dc = row[:, m2 + 4 * hid:m2 + 5 * hid]  # d c_{t-1}
        if masked:
            dh_rec, dc = dh_rec + carry_h, dc + carry_c
    return dh_rec, dc


#: Device types on which the layer under ``torch.autocast`` runs the step loop under autograd rather
#: than the scan in fp32 (module docstring).
AUTOCAST_STEP_LOOP = frozenset({"cpu"})

#: Values of ``ONLSTM(kernel=...)`` (module docstring): ``auto`` picks per call (:func:`_use_triton`),
#: ``scan`` and ``triton`` force a kernel.
KERNELS = ("auto", "scan", "triton")
#: The widest hidden size ``auto`` gives the Triton kernels. They split the hidden units over up to
#: one program per SM (:func:`cn3.layers.onlstm_triton.plan`), so a wide layer at a small batch still
#: keeps most SMs busy (batch 32, hidden 512: 4 row blocks x 16 column programs). Wider layers run
#: the plain scan under ``auto``: at hidden 1024 the backward spills registers when compiled for sm_90
#: and no GPU has timed the kernels there; the bound rises only with a recorded GPU measurement
#: (docs/benchmarks.md, "Kernels: what is tuned"). ``kernel="triton"`` still forces them at any width.
TRITON_AUTO_MAX_HIDDEN = 512
_triton_missing: list[str] = []  # the warning, once given


def check_kernel(kernel: str) -> str:
    """``kernel`` if it is one of :data:`KERNELS`; a ``ValueError`` naming the values otherwise."""
    if kernel not in KERNELS:
        raise ValueError(f"ON-LSTM kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
    return kernel


def _use_triton(kernel: str, device: torch.device, dtype: torch.dtype, hidden: int) -> bool:
    """Whether a layer of ``kernel`` runs the Triton kernels on ``hidden``-wide ``dtype`` tensors on
    ``device`` (module docstring). On the CPU only ``triton`` does, under Triton's interpreter
    (``TRITON_INTERPRET=1`` before triton is imported); ``auto`` never does there: the scan is faster.
    """
    check_kernel(kernel)
    if kernel == "scan" or dtype != torch.float32:
        return False
    if kernel == "auto" and (device.type != "cuda" or hidden > TRITON_AUTO_MAX_HIDDEN):
        return False
    try:
        from cn3.layers.onlstm_triton import INTERPRETING  # noqa: PLC0415 - triton is optional
    except ImportError as error:
        if kernel == "triton" and not _triton_missing:
            _triton_missing.append(str(error))
            warnings.warn(f"ON-LSTM: kernel 'triton' but Triton cannot be imported ({error}); running the "
                          "plain scan", RuntimeWarning, stacklevel=3)
        return False
    return device.type == "cuda" or (device.type == "cpu" and INTERPRETING)


def _recompute_gates(pre: Tensor, h: Tensor, c: Tensor, wt: Tensor, nc: int):
    """One step of the recurrence for ``R`` independent rows (the Triton backward passes every step
    of every sentence as a row): ``pre (R, width)`` the input projections, ``h, c (R, hidden)`` the
    state before the step, ``wt (hidden, width)``. The arithmetic of :func:`_forward_steps` without
    padding (a padded step's factors are never read). Returns ``c^ (R, hidden)``, ``[f, i, o]
    (R, 3, hidden)``, ``[F, I] (R, 2, nc)``, ``[f^, i^] (R, 2, nc, cs)``, ``tanh(c_t) (R, hidden)``
    and the master gates' softmax ``(R, 2, nc)``."""
    r, hid = c.shape
    cs, m2 = hid // nc, 2 * nc
    gates = torch.addmm(pre, h, wt)  # W x_t + b + U h_{t-1}
    p = torch.softmax(gates[:, :m2].view(r, 2, nc), -1)
    cum = torch.cumsum(p, -1)
    master = torch.stack([cum[:, 0], 1.0 - cum[:, 1]], 1)  # F = cumax, I = 1 - cumax
    m = master.unsqueeze(-1)  # (R, 2, nc, 1)
    overlap = m[:, :1] * m[:, 1:]  # w = F * I
    s = torch.sigmoid(gates[:, m2:m2 + 3 * hid].view(r, 3, hid))  # f, i, o
    cand = torch.tanh(gates[:, m2 + 3 * hid:])  # c^
    hat = torch.addcmul(m - overlap, s[:, :2].view(r, 2, nc, cs), overlap)  # f w + (F - w), i w + (I - w)
    c_new = torch.addcmul(hat[:, 0] * c.view(r, nc, cs), hat[:, 1], cand.view(r, nc, cs))
    return cand, s, master, hat, torch.tanh(c_new).view(r, hid), p


class _ONLSTMScan(torch.autograd.Function):
    """The recurrence of one ON-LSTM layer over all time steps, with a hand-written backward.

    Inputs: ``pre (N, B, width)`` the input projections (bias included, time first),
    ``weight (width, hidden)`` the recurrent matrix, the initial state ``h0, c0 (B, hidden)``,
    ``keep (B, N)`` bool or None (padding; a padded step keeps the state), ``full``: the steps
    before it have no padding, ``n_chunks``, ``return_master``, and ``kernel`` (one of
    :data:`KERNELS`, default ``auto``). Outputs: the states ``hs (B, N, hidden)``, the last cell
    ``c (B, hidden)`` and the master forget gates ``(B, N, n_chunks)`` (empty unless
    ``return_master``). The forward's arithmetic is :meth:`ONLSTM.cell`'s; gradients equal
    autograd's over the step loop up to rounding.

    Why a Function: autograd over the step loop records ~20 nodes and runs ~40 small kernels per
    step. Here the forward records nothing and writes into preallocated buffers; the backward computes
    every factor that does not depend on the incoming gradient for all steps at once
    (:func:`_backward_factors`), and the recurrent weight's gradient is one product over all steps.
    ``ctx.impl`` (:func:`_use_triton`) is ``scan`` or ``triton``; the Triton path saves only the input,
    states and cells and recomputes the rest (:func:`_triton_backward`).
    """

    @staticmethod
    def forward(ctx, pre: Tensor, weight: Tensor, h0: Tensor, c0: Tensor, keep: Tensor | None, full: int,
                n_chunks: int, return_master: bool, kernel: str = "auto"):
        n, b, _ = pre.shape
        nc, hid = n_chunks, weight.shape[1]
        wt = weight.t().contiguous()
        ctx.full, ctx.n_chunks = full, nc
        ctx.impl = "triton" if _use_triton(kernel, pre.device, pre.dtype, hid) else "scan"
        if ctx.impl == "triton":
            from cn3.layers.onlstm_triton import scan_forward  # noqa: PLC0415 - needs triton: only on this path
            hs, cells, masters = scan_forward(pre, wt, h0, c0, keep, nc, return_master)
            ctx.save_for_backward(weight, h0, keep, hs, pre, wt, cells)
            return hs, cells[n].clone(), masters
        hs = pre.new_empty(b, n, hid)  # the states; a real step's state is its output
        cg = pre.new_empty(n + 1, b, 2, hid)  # [c_{t-1}, c^_t] at t; the last cell at [n, :, 0]
        cg[0, :, 0] = c0
        sig = pre.new_empty(n, b, 3, hid)  # f, i, o
        master = pre.new_empty(n, b, 2, nc)  # F, I
        hats = pre.new_empty(n, b, 2, nc, hid // nc)  # f^, i^
        tanh_c = pre.new_empty(n, b, hid)
        probs = _forward_steps(pre, wt, h0, hs, cg, sig, master, hats, tanh_c, keep, full, nc)
        ctx.save_for_backward(weight, h0, keep, hs, cg, sig, master, hats, tanh_c, probs)
        masters = master[:, :, 0].transpose(0, 1).contiguous() if return_master else pre.new_empty(0)
        return hs, cg[n, :, 0].clone(), masters

    @staticmethod
    @once_differentiable
    def backward(ctx, d_hs: Tensor, d_c: Tensor, d_master: Tensor):
        full, nc = ctx.full, ctx.n_chunks
        d_master = d_master if d_master.numel() else None
        if ctx.impl == "triton":
            weight, h0, keep, hs, pre, wt, cells = ctx.saved_tensors
            d_pre, dh_rec, dc = _triton_backward(pre, wt, weight, h0, keep, hs, cells, d_hs, d_c, d_master, nc)
        else:
            weight, h0, keep, hs, cg, sig, master, hats, tanh_c, probs = ctx.saved_tensors
            table, d_o, d_tc = _backward_factors(sig, master, hats, tanh_c, cg[:hs.shape[1]])
            # F = cumsum(p_F), I = 1 - cumsum(p_I): the reverse cumsum is a product with a triangle
            signed_probs = probs * (1 - 2 * torch.arange(2, dtype=probs.dtype, device=probs.device).view(2, 1))
            tri = torch.ones(nc, nc, dtype=hs.dtype, device=hs.device).tril()
            b, n, hid = hs.shape
            d_pre = hs.new_empty(n, b, weight.shape[0] + 3 * hid)  # the gates' inputs, d c_{t-1}, d F, d I
            dh_rec, dc = _backward_steps(d_hs, d_c, d_master, d_pre, table, d_o, d_tc, probs, signed_probs, tri,
                                         weight, keep, full, nc)
            d_pre = d_pre[:, :, :weight.shape[0]]
        d_weight = None
        if ctx.needs_input_grad[1]:
            n, b, width = d_pre.shape
            d_weight = d_pre.reshape(n * b, width).t().mm(_previous_states(h0, hs).reshape(n * b, -1))
        return d_pre, d_weight, dh_rec, dc, None, None, None, None, None  # the last: kernel (optional)


def _previous_states(h0: Tensor, hs: Tensor) -> Tensor:
    """``h_{t-1}`` for every step, time first: ``(N, B, hidden)`` from ``h0 (B, hidden)`` and the
    states ``hs (B, N, hidden)``."""
    return torch.cat([h0.unsqueeze(0), hs[:, :-1].transpose(0, 1)], 0)


def _backward_factors(sig: Tensor, master: Tensor, hats: Tensor, tanh_c: Tensor,
                      prev_cand: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The backward's factors that do not depend on the incoming gradient, for all steps at once.

    Args:
        sig: ``(N, B, 3, hidden)`` ``[f, i, o]``; master ``(N, B, 2, nc)`` ``[F, I]``;
            hats ``(N, B, 2, nc, cs)`` ``[f^, i^]``; tanh_c ``(N, B, hidden)`` ``tanh(c_t)``
            (before padding keeps the state); prev_cand ``(N, B, 2, hidden)`` ``[c_{t-1}, c^_t]``.

    Shapes:
        returns ``table (N, B, 7, hidden)``, ``d_o (N, B, hidden)``, ``d_tc (N, B, hidden)``:
        ``d c_t`` times ``table[t]`` gives, in the gate layout ``[f, i, o, c^]`` and beyond, the
        gradients of the inputs of f and i (``dc [c_{t-1}, c^] w f(1-f)`` or ``i(1-i)``), a row
        the caller overwrites with o's (``dh d_o``), c^'s input (``dc i^ (1 - c^2)``),
        ``c_{t-1}`` (``dc f^``), and per neuron ``[d F, d I]`` (summed over each chunk by the
        caller): ``f^ = F - w (1 - f)``, ``i^ = I - w (1 - i)``, ``w = F I``
        ``=> [c_{t-1}, c^] - [I, F] uv``, ``uv = c_{t-1} (1 - f) + c^ (1 - i)``.
    """
    n, b, _, hid = sig.shape
    nc = master.shape[-1]
    cs = hid // nc
    f_i, o = sig[:, :, :2], sig[:, :, 2]
    ho = o * tanh_c
    d_o = torch.addcmul(ho, ho, o, value=-1.0)  # dh -> o's input: tanh(c) o (1 - o)
    d_tc = torch.addcmul(o, ho, tanh_c, value=-1.0)  # dh -> c: o (1 - tanh(c)^2)
    cand = prev_cand[:, :, 1]
    table = sig.new_empty(n, b, 7, hid)
    overlap = (master[:, :, 0] * master[:, :, 1]).view(n, b, 1, nc, 1)
    torch.mul(prev_cand.view(n, b, 2, nc, cs) * overlap,
              torch.addcmul(f_i, f_i, f_i, value=-1.0).view(n, b, 2, nc, cs),
              out=table[:, :, :2].view(n, b, 2, nc, cs))
    table[:, :, 2] = 0.0
    i_hat = hats[:, :, 1].reshape(n, b, hid)
    torch.addcmul(i_hat, i_hat * cand, cand, value=-1.0, out=table[:, :, 3])
    table[:, :, 4] = hats[:, :, 0].reshape(n, b, hid)
    uv = (prev_cand * (1.0 - f_i)).sum(2)
    torch.addcmul(prev_cand.view(n, b, 2, nc, cs), master.flip(2).view(n, b, 2, nc, 1),
                  uv.view(n, b, 1, nc, cs), value=-1.0, out=table[:, :, 5:].view(n, b, 2, nc, cs))
    return table, d_o, d_tc


def _triton_backward(pre: Tensor, wt: Tensor, weight: Tensor, h0: Tensor, keep: Tensor | None, hs: Tensor,
                     cells: Tensor, d_hs: Tensor, d_c: Tensor, d_master: Tensor | None,
                     nc: int) -> tuple[Tensor, Tensor, Tensor]:
    """The backward of the Triton forward: every step's gates recomputed at once from the saved
    states (:func:`_recompute_gates` over ``N B`` rows: one product ``h_{t-1} U^T`` for all steps),
    their factors (:func:`_backward_factors`), then the step loop in one launch
    (:func:`cn3.layers.onlstm_triton.scan_backward`). ``cells (N + 1, B, hidden)`` holds ``c_0`` and
    the cell after each step; returns ``(d pre (N, B, width), d h0, d c0)``."""
    from cn3.layers.onlstm_triton import scan_backward  # noqa: PLC0415 - needs triton: only on this path
    n, b, width = pre.shape
    hid = wt.shape[0]
    prev_c = cells[:n]
    cand, sig, master, hats, tanh_c, probs = _recompute_gates(
        pre.reshape(n * b, width), _previous_states(h0, hs).reshape(n * b, hid), prev_c.reshape(n * b, hid), wt, nc)
    table, d_o, d_tc = _backward_factors(sig.view(n, b, 3, hid), master.view(n, b, 2, nc),
                                         hats.view(n, b, 2, nc, hid // nc), tanh_c.view(n, b, hid),
                                         torch.stack([prev_c, cand.view(n, b, hid)], 2))
    return scan_backward(d_hs, d_c, d_master, keep, table, d_o, d_tc, probs.view(n, b, 2, nc), weight)


def padding_start(mask: Tensor | None, n: int, device: torch.device) -> tuple[Tensor | None, int]:
    """``(keep, full)``: the mask as bool on ``device`` and the first step the recurrence masks (the
    steps before it need none). On the CPU in eager mode, the first column holding any padding (``n``
    when none; with right padding, the shortest length), read on the host, where a read costs nothing.
    Elsewhere (CUDA, or while compiling: where :func:`cn3.layers.packed.padded_by_default` runs the
    padded path) 0 with a mask: every step masked (a no-op at real tokens), so nothing waits for the
    device and the compiled graph does not break."""
    if mask is None:
        return None, n
    keep = mask.to(device=device, dtype=torch.bool)
    if packed.padded_by_default(keep):  # looked up at each call: tests take the CUDA path on the CPU
        return keep, 0
    padded_cols = (~keep).any(0).nonzero()
    return keep, int(padded_cols[0]) if len(padded_cols) else n


class ONLSTM(nn.Module):
    """One left-to-right ON-LSTM layer.

    Args:
        input_size, hidden: widths.
        chunk_size: neurons per master-gate unit (``hidden % chunk_size == 0``). One chunk
            (``chunk_size == hidden``) makes ``I = 1 - cumax`` 0 everywhere and the output zero; the
            encoders' configs refuse it, the layer allows it.
        kernel: one of :data:`KERNELS` (module docstring). An attribute, checked again at each call,
            so it may be changed after construction.

    Raises:
        ValueError: ``hidden`` is not a multiple of ``chunk_size``, or ``kernel`` is unknown.

    Gate layout of the projections: ``[F (n_chunks), I (n_chunks), f, i, o, c^ (hidden each)]``.
    :meth:`_step_loop` is the recurrence under autograd (:meth:`cell` per step): CPU autocast runs it,
    the tests compare against it.
    """

    def __init__(self, input_size: int, hidden: int, chunk_size: int = 8, kernel: str = "auto"):
        super().__init__()
        if hidden % chunk_size:
            raise ValueError(f"hidden {hidden} is not a multiple of chunk_size {chunk_size}")
        self.kernel = check_kernel(kernel)  # now, not at the first batch
        self.input_size, self.hidden, self.chunk_size = input_size, hidden, chunk_size
        self.n_chunks = hidden // chunk_size
        width = 2 * self.n_chunks + 4 * hidden
        self.ih = nn.Linear(input_size, width)
        self.hh = nn.Linear(hidden, width, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = self.hidden ** -0.5
        nn.init.uniform_(self.ih.weight, -bound, bound)
        nn.init.uniform_(self.hh.weight, -bound, bound)
        nn.init.zeros_(self.ih.bias)

    def cell(self, gates: Tensor, c: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """One step (eq. 3-9) from pre-activations ``(B, width)`` and ``c (B, hidden)``: ``(h, c, F)``."""
        b, nc, cs, hid = gates.shape[0], self.n_chunks, self.chunk_size, self.hidden
        # split/unbind, not slicing: their backward is one cat/stack, a slice's a zero-filled copy
        master_raw, sig_raw, cand_raw = gates.split([2 * nc, 3 * hid, hid], dim=1)
        mf, mi = cumax(master_raw.view(b, 2, nc)).unsqueeze(-1).unbind(1)  # (B, n_chunks, 1) each
        mi = 1.0 - mi  # master forget rises 0 -> 1, master input falls 1 -> 0
        f, i, o = torch.sigmoid(sig_raw).view(b, 3, nc, cs).unbind(1)
        cand = torch.tanh(cand_raw).view(b, nc, cs)
        overlap = mf * mi  # (B, n_chunks, 1)
        f_hat = torch.addcmul(mf - overlap, f, overlap)  # f * w + (F - w)
        i_hat = torch.addcmul(mi - overlap, i, overlap)  # i * w + (I - w)
        c = torch.addcmul(f_hat * c.view(b, nc, cs), i_hat, cand)
        h = o * torch.tanh(c)
        return h.view(b, hid), c.view(b, hid), mf.squeeze(-1)

    def forward(self, x: Tensor, mask: Tensor | None = None, state: tuple[Tensor, Tensor] | None = None,
                return_master: bool = False):
        """``x (B, N, input_size)``, ``mask (B, N)`` True at real steps.

        Returns:
            ``(out (B, N, hidden), (h, c))``, plus the master forget gates ``(B, N, n_chunks)``
            when ``return_master``. The state is the one after each row's last real step.
        """
        b, n, _ = x.shape
        if state is None:
            h = x.new_zeros(b, self.hidden)
            c = x.new_zeros(b, self.hidden)
        else:
            h, c = state
        keep, full = padding_start(mask, n, x.device)
        if n and not (x.device.type in AUTOCAST_STEP_LOOP and torch.is_autocast_enabled(x.device.type)):
            pre = self.ih(x.transpose(0, 1))  # (N, B, width): every input projection at once (autocast's dtype)
            weight = self.hh.weight
            # The recurrence in the parameters' dtype, autocast off: a no-op in fp32; under autocast it
            # keeps the state in fp32 and runs the scan instead of ~20 cast-wrapped operations per step.
            with torch.autocast(x.device.type, enabled=False):
                hs, c, masters = _ONLSTMScan.apply(pre.to(weight.dtype), weight, h.to(weight.dtype),
                                                   c.to(weight.dtype), keep if full < n else None, full,
                                                   self.n_chunks, return_master, self.kernel)
            out = hs if full == n else hs.masked_fill(~keep.unsqueeze(-1), 0.0)
            state = (hs[:, -1].contiguous(), c)
            return (out, state, masters) if return_master else (out, state)
        return self._step_loop(x, keep, full, h, c, return_master)  # CPU autocast, or no steps

    def _step_loop(self, x: Tensor, keep: Tensor | None, full: int, h: Tensor, c: Tensor, return_master: bool):
        """The recurrence as a step loop under autograd (CPU autocast; the tests' reference)."""
        b, n, _ = x.shape
        pre = self.ih(x).transpose(0, 1).contiguous()  # (N, B, width): every input projection at once
        step_mask = None if keep is None else keep.transpose(0, 1).unsqueeze(-1)  # (N, B, 1)
        weight = self.hh.weight.t()
        outs, masters = [], []
        for t, pre_t in enumerate(pre.unbind(0)):  # unbind: one stack in backward, not N zero-fills
            gates = torch.addmm(pre_t, h, weight)
            h_new, c_new, master_f = self.cell(gates, c)
            if t >= full and step_mask is not None:
                keep_t = step_mask[t]
                h = torch.where(keep_t, h_new, h)
                c = torch.where(keep_t, c_new, c)
                h_new = h_new.masked_fill(~keep_t, 0.0)
            else:
                h, c = h_new, c_new
            outs.append(h_new)
            if return_master:
                masters.append(master_f)
        out = torch.stack(outs, 1) if outs else x.new_zeros(b, 0, self.hidden)
        if return_master:
            return out, (h, c), torch.stack(masters, 1) if masters else x.new_zeros(b, 0, self.n_chunks)
        return out, (h, c)

    def extra_repr(self) -> str:
        kernel = f", kernel={self.kernel}" if self.kernel != "auto" else ""
        return f"{self.input_size}, {self.hidden}, chunk_size={self.chunk_size}{kernel}"


class RecurrentStack(nn.Module):
    """``layers`` (ON-)LSTM layers with dropout between them, padding-aware, optionally bidirectional.

    Args:
        d_model: output width of every layer (and input width of all but the first).
        layers: depth.
        cell: ``onlstm`` or ``lstm`` (``torch.nn.LSTM`` on packed sequences).
        chunk_size: ON-LSTM master-gate chunk size.
        bidirectional: each layer is a forward and a backward half of width ``d_model // 2``.
        dropout: between layers.
        in_dim: input width of the first layer (default ``d_model``).
        residual: each layer after the first adds its input to its output (``x_{l+1} = x_l + f_l(x_l)``,
            Wu et al. 2016, GNMT): without it a deep stack learns slowly (docs/benchmarks.md,
            "Figures moved from docstrings").
        kernel: every ON-LSTM layer's ``kernel`` (:data:`KERNELS`); ``lstm`` cells take only
            ``auto`` (a ``ValueError`` otherwise: nothing there would read it).

    Init: ON-LSTM as :meth:`ONLSTM.reset_parameters`; ``nn.LSTM`` keeps torch's standard
    ``U(-1/sqrt(h), 1/sqrt(h))``.
    """

    def __init__(self, d_model: int, layers: int, cell: str = "onlstm", chunk_size: int = 8,
                 bidirectional: bool = False, dropout: float = 0.0, in_dim: int | None = None,
                 residual: bool = False, kernel: str = "auto"):
        super().__init__()
        check_kernel(kernel)
        if cell == "lstm" and kernel != "auto":
            raise ValueError(f"kernel {kernel!r} is an ON-LSTM setting; an lstm stack takes only 'auto'")
        self.cell, self.bidirectional, self.dropout, self.residual = cell, bidirectional, dropout, residual
        width = d_model // 2 if bidirectional else d_model
        directions = 2 if bidirectional else 1
        inputs = [in_dim or d_model] + [d_model] * (layers - 1)
        if cell == "onlstm":
            self.layers = nn.ModuleList(
                nn.ModuleList(ONLSTM(n_in, width, chunk_size, kernel) for _ in range(directions)) for n_in in inputs)
        elif cell == "lstm":
            self.layers = nn.ModuleList(
                LSTM(n_in, width, batch_first=True, bidirectional=bidirectional) for n_in in inputs)
        else:
            raise ValueError(f"unknown recurrent cell {cell!r}")
        self.out_dim = width * directions

    def reset_parameters(self) -> None:
        for module in self.modules():
            if isinstance(module, (ONLSTM, nn.LSTM)):
                module.reset_parameters()

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        lengths = mask.sum(1)
        for i, layer in enumerate(self.layers):
            inp = nn.functional.dropout(x, self.dropout, self.training) if i else x
            if self.cell == "lstm":
                out = run_packed(layer, inp, mask)  # (B, N, d_model), zero at padding
            else:
                outs = [layer[0](inp, mask)[0]]
                if self.bidirectional:
                    back = layer[1](reverse_within_lengths(inp, lengths), mask)[0]
                    outs.append(reverse_within_lengths(back, lengths))
                out = torch.cat(outs, -1) if len(outs) > 1 else outs[0]
            # x_{l+1} = x_l + f_l(x_l) from the second layer on (the first may change the width); the
            # dropped-out input feeds the layer, the sum carries the undropped one (GNMT's residual).
            x = x + out if self.residual and i else out
        return x
