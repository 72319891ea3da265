"""Cheng, Dong & Lapata (EMNLP 2016), "Long Short-Term Memory-Networks for Machine Reading" (``selfatt2``).

The LSTMN replaces the LSTM's single memory cell by a memory tape holding every previous hidden and
memory state. At step ``t`` it attends over the previous steps ``i < t`` (intra-attention)::

    a_i^t = v^T tanh(W_h h_i + W_x x_t + W_h~ h~_{t-1})
    s^t   = softmax(a^t)                                  over i < t
    h~_t  = sum_i s_i^t h_i,   c~_t = sum_i s_i^t c_i     adaptive summaries of the tape
    [i_t, f_t, o_t, c^_t] = [sigma, sigma, sigma, tanh](W [h~_t; x_t] + b)
    c_t = f_t * c~_t + i_t * c^_t,   h_t = o_t * tanh(c_t)

One left-to-right layer (the paper's shallow/deep fusion couple two LSTMNs for pairs; here both
sides of a pair are encoded alike, as every encoder's). At the first step the tape is empty and the
summaries are zero, so it is a plain LSTM step from a zero state. We follow the paper where the
authors' Torch code (github.com/cheng6076/SNLI-attention) differs: that code keeps a zero initial
state on the tape at every step and scores without the ``W_h~ h~_{t-1}`` term. Padding needs no
attention mask: it is on the right, so a real step's predecessors are all real.

The attention score has no biases (the paper); the gates have one (the authors' code). Dropout is
on the input ``x`` (the non-recurrent connection, as Zaremba et al. 2014), not on the tape.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from cn3.encoders.registry import LEVELS, EncoderArgs, register


class LSTMN(nn.Module):
    """Long Short-Term Memory-Network (Cheng et al., 2016): an LSTM with a memory tape and intra-attention.

    Args:
        in_dim: width of ``x``.
        hidden: width of ``h``/``c`` and of the attention layer (``W_h``, ``W_x``, ``W_h~``).
        dropout: on ``x``.

    Init: PyTorch's LSTM init, ``U(-1/sqrt(hidden), 1/sqrt(hidden))`` for every parameter.

    Shapes:
        ``x (B, N, in_dim)``, ``mask (B, N)`` (right padding) -> ``h (B, N, hidden)``, zero at padding;
        ``info["alphas"]``: ``[S (B, N, N)]``, row ``t`` holding ``s^t`` over the previous steps
        ``i < t`` (zero elsewhere, so row 0 and padded rows are all zero).
    """

    def __init__(self, in_dim: int, hidden: int, dropout: float = 0.0):
        super().__init__()
        self.w_h = nn.Linear(hidden, hidden, bias=False)  # W_h, on the tape's h_i
        self.w_x = nn.Linear(in_dim, hidden, bias=False)  # W_x, on x_t
        self.w_summary = nn.Linear(hidden, hidden, bias=False)  # W_h~, on h~_{t-1}
        self.v = nn.Linear(hidden, 1, bias=False)  # v
        self.gates_x = nn.Linear(in_dim, 4 * hidden)  # the x_t columns of W, and b
        self.gates_h = nn.Linear(hidden, 4 * hidden, bias=False)  # the h~_t columns of W
        self.hidden, self.dropout = hidden, dropout
        self.out_dim = hidden
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, x: Tensor, mask: Tensor, *, v: Tensor | None = None,
                edge_type: Tensor | None = None) -> tuple[Tensor, dict]:
        b, n, _ = x.shape
        x = F.dropout(x, self.dropout, self.training)
        att_x = self.w_x(x)  # (B, N, hidden): W_x x_t for every t at once
        gate_x = self.gates_x(x)  # (B, N, 4 hidden): W_x-part of the gates, plus b
        zero = x.new_zeros(b, self.hidden)
        h_tape: list[Tensor] = []  # h_i, each (B, hidden)
        c_tape: list[Tensor] = []  # c_i
        wh_tape: list[Tensor] = []  # W_h h_i, each computed once, when step i + 1 first reads it
        rows: list[Tensor] = []  # s^t padded to N, each (B, N)
        for t in range(n):
            if t == 0:
                h_sum, c_sum, s = zero, zero, x.new_zeros(b, 0)  # empty tape: zero summaries h~_0, c~_0
            else:
                wh_tape.append(self.w_h(h_tape[-1]))
                tape_h = torch.stack(h_tape, 1)  # (B, t, hidden)
                e = torch.tanh(torch.stack(wh_tape, 1) + (att_x[:, t] + self.w_summary(h_sum)).unsqueeze(1))
                a = self.v(e).squeeze(-1)  # a_i^t = v^T tanh(W_h h_i + W_x x_t + W_h~ h~_{t-1}), (B, t)
                # No mask needed: with right padding every predecessor of a real step is real, and
                # the padded steps (which do read padding) are zeroed below and never read.
                s = F.softmax(a, dim=-1)  # s^t, (B, t)
                h_sum = (s.unsqueeze(1) @ tape_h).squeeze(1)  # h~_t = sum_i s_i^t h_i, (B, hidden)
                c_sum = (s.unsqueeze(1) @ torch.stack(c_tape, 1)).squeeze(1)  # c~_t = sum_i s_i^t c_i
            i, f, o, c_hat = (gate_x[:, t] + self.gates_h(h_sum)).chunk(4, dim=-1)  # W [h~_t; x_t] + b
            c = torch.sigmoid(f) * c_sum + torch.sigmoid(i) * torch.tanh(c_hat)  # c_t = f*c~_t + i*c^_t
            h = torch.sigmoid(o) * torch.tanh(c)  # h_t = o_t * tanh(c_t)
            h_tape.append(h)
            c_tape.append(c)
            rows.append(F.pad(s, (0, n - t)))
        keep = mask.unsqueeze(-1).to(x.dtype)  # (B, N, 1)
        h_out = torch.stack(h_tape, 1) * keep  # (B, N, hidden), zero at padding
        alphas = torch.stack(rows, 1) * keep  # (B, N, N), padded rows zeroed
        return h_out, {"alphas": [alphas]}


@register("selfatt2", "Cheng et al. 2016 (LSTMN)", levels=LEVELS, attention="causal", table_order=7)
def _build(a: EncoderArgs) -> nn.Module:
    return LSTMN(a.in_dim, a.d, a.dropout)
