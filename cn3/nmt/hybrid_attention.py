"""Hybrid local/global self-attention (Xu et al., ACL 2019, "Leveraging Local and Global Patterns
for Self-Attention Networks").

One energy ``xi = QK^T / sqrt(d_k)`` per head, two distributions from it:

* global: ``softmax(xi_i)`` over all (real) keys;
* local (eq. 3): ``softmax(B(xi_i))`` where ``B`` sets ``-inf`` outside ``|i - j| <= m``
  (:func:`cn3.attention.band_mask`), i.e. one extra masked softmax over the same energy.

Combinations (``mode``):

* ``hybrid`` (eq. 4-5): ``H^_i = (1 - g_i) Att(xi_i, V) + g_i Att(B(xi_i), V)`` with
  ``g_i = sigmoid(W H_i + b)``, one gate per token and head (or per token). Because ``g_i`` is a
  scalar per query row, ``g Att(l, V) + (1-g) Att(a, V) = Att(g l + (1-g) a, V)``: the two
  distributions are mixed with :func:`cn3.attention.gated_mix` and attended once, so the extra
  cost over vanilla attention is one masked softmax and one mix of ``(B, H, N, N)`` weights.
* ``local``: the local distribution only (the paper's "local" ablation).
* ``concat``: both outputs, concatenated per token and projected from ``2 d`` to ``d``.

Attention dropout is applied to BOTH distributions (the authors' code skips it on the local one).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from cn3.attention import attend, band_mask, gated_mix, masked_softmax
from cn3.nmt.layers import MultiHeadAttention

Mode = Literal["hybrid", "local", "concat"]


class HybridSelfAttention(MultiHeadAttention):
    """Encoder self-attention with a local window ``m`` and a global view (see the module docstring).

    Args:
        window: ``m``: key ``j`` is local to query ``i`` when ``|i - j| <= m``.
        mode: ``hybrid`` (gated), ``local`` or ``concat``.
        gate_per_head: ``W`` maps ``d -> heads`` (each head mixes on its own) instead of ``d -> 1``.

    ``forward`` returns ``(out, info)``; for ``hybrid`` ``info["gate"]`` is ``g`` of shape
    ``(B, G, N)`` (``G`` = heads or 1), the weight of the LOCAL distribution.
    """

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0, window: int = 1,
                 mode: Mode = "hybrid", gate_per_head: bool = True):
        super().__init__(d_model, heads, dropout)
        if window < 0:
            raise ValueError(f"window must be >= 0, got {window}")
        if mode not in ("hybrid", "local", "concat"):
            raise ValueError(f"unknown mode {mode!r}")
        self.window, self.mode = window, mode
        if mode == "hybrid":
            self.gate = nn.Linear(d_model, heads if gate_per_head else 1)
            nn.init.xavier_uniform_(self.gate.weight)
            nn.init.zeros_(self.gate.bias)
        if mode == "concat":
            self.out_proj = nn.Linear(2 * d_model, d_model)
            nn.init.xavier_uniform_(self.out_proj.weight)
            nn.init.zeros_(self.out_proj.bias)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, dict | None]:
        n = x.shape[1]
        q = self.query(x)
        k, v = self.keys_values(x)
        energy = q @ k.transpose(-1, -2)  # (B, H, N, N), shared by both distributions
        band = band_mask(n, self.window, x.device)
        p, training = self.dropout, self.training
        local = masked_softmax(energy, mask, band, dropout_p=p, training=training)
        if self.mode == "local":
            return self.out_proj(self.merge(attend(local, v))), None
        glob = masked_softmax(energy, mask, dropout_p=p, training=training)
        if self.mode == "concat":
            both = torch.cat([self.merge(attend(local, v)), self.merge(attend(glob, v))], dim=-1)
            return self.out_proj(both), None
        g = torch.sigmoid(self.gate(x)).transpose(1, 2)  # (B, G, N): weight of the local pattern
        weights = gated_mix(local, glob, g.unsqueeze(-1))  # (B, H, N, N)
        return self.out_proj(self.merge(attend(weights, v))), {"gate": g}

    def extra_repr(self) -> str:
        return f"window={self.window}, mode={self.mode}"
