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
``chunk_size`` neurons. Input projections of all time steps are computed in one matrix product;
only the recurrent product runs per step. Padding (``mask`` False) keeps the state unchanged and
gives zero output, so a sentence's outputs do not depend on how much padding follows it.
``bidirectional`` runs a second layer over each sentence reversed within its own length.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from cn3.layers.packed import run_packed


def cumax(x: Tensor, dim: int = -1) -> Tensor:
    """``cumsum(softmax(x))``: a soft, monotonically non-decreasing ``0 -> 1`` gate along ``dim``."""
    return torch.cumsum(torch.softmax(x, dim=dim), dim=dim)


def reverse_padded(x: Tensor, lengths: Tensor) -> Tensor:
    """Reverse each row of ``(B, N, ...)`` within its length; padding stays in place."""
    n = x.shape[1]
    pos = torch.arange(n, device=x.device)[None, :]
    lengths = lengths.to(x.device)[:, None]
    index = torch.where(pos < lengths, lengths - 1 - pos, pos)  # (B, N)
    index = index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index)


class ONLSTM(nn.Module):
    """One left-to-right ON-LSTM layer.

    Args:
        input_size, hidden: widths.
        chunk_size: neurons per master-gate unit (``hidden % chunk_size == 0``).

    Gate layout of the projections: ``[F (n_chunks), I (n_chunks), f, i, o, c^ (hidden each)]``.
    """

    def __init__(self, input_size: int, hidden: int, chunk_size: int = 8):
        super().__init__()
        if hidden % chunk_size:
            raise ValueError(f"hidden {hidden} is not a multiple of chunk_size {chunk_size}")
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
        """One step from pre-activations ``(B, width)`` and ``c (B, hidden)``: ``(h, c, F)``.

        Few, large operations (the loop runs them per time step): both master gates in one
        ``cumax``, the three sigmoid gates in one ``sigmoid``.
        """
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
        pre = self.ih(x).transpose(0, 1).contiguous()  # (N, B, width): every input projection at once
        # Steps before the first column holding any padding need no masking (right padding: the
        # shortest length).
        full = n
        if mask is not None:
            padded_cols = (~mask.bool()).any(0).nonzero()
            full = int(padded_cols[0]) if len(padded_cols) else n
        step_mask = None if mask is None else mask.transpose(0, 1).unsqueeze(-1).to(x.dtype)  # (N, B, 1)
        weight = self.hh.weight.t()
        outs, masters = [], []
        for t, pre_t in enumerate(pre.unbind(0)):  # unbind: one stack in backward, not N zero-fills
            gates = torch.addmm(pre_t, h, weight)
            h_new, c_new, master_f = self.cell(gates, c)
            if t >= full and step_mask is not None:
                keep = step_mask[t]
                h_new = h_new * keep
                h = h_new + (1.0 - keep) * h
                c = c_new * keep + (1.0 - keep) * c
            else:
                h, c = h_new, c_new
            outs.append(h_new)
            if return_master:
                masters.append(master_f)
        out = torch.stack(outs, 1) if outs else x.new_zeros(b, 0, self.hidden)
        if return_master:
            return out, (h, c), torch.stack(masters, 1)
        return out, (h, c)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden}, chunk_size={self.chunk_size}"


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

    Init: ON-LSTM as :meth:`ONLSTM.reset_parameters`; ``nn.LSTM`` keeps torch's standard
    ``U(-1/sqrt(h), 1/sqrt(h))``.
    """

    def __init__(self, d_model: int, layers: int, cell: str = "onlstm", chunk_size: int = 8,
                 bidirectional: bool = False, dropout: float = 0.0, in_dim: int | None = None):
        super().__init__()
        self.cell, self.bidirectional, self.dropout = cell, bidirectional, dropout
        width = d_model // 2 if bidirectional else d_model
        directions = 2 if bidirectional else 1
        inputs = [in_dim or d_model] + [d_model] * (layers - 1)
        if cell == "onlstm":
            self.layers = nn.ModuleList(
                nn.ModuleList(ONLSTM(n_in, width, chunk_size) for _ in range(directions)) for n_in in inputs)
        elif cell == "lstm":
            self.layers = nn.ModuleList(
                nn.LSTM(n_in, width, batch_first=True, bidirectional=bidirectional) for n_in in inputs)
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
            if i:
                x = nn.functional.dropout(x, self.dropout, self.training)
            if self.cell == "lstm":
                x = run_packed(layer, x, mask)
            else:
                outs = [layer[0](x, mask)[0]]
                if self.bidirectional:
                    back = layer[1](reverse_padded(x, lengths), mask)[0]
                    outs.append(reverse_padded(back, lengths))
                x = torch.cat(outs, -1) if len(outs) > 1 else outs[0]
        return x
