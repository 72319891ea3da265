"""Hybrid local/global self-attention (Xu et al., ACL 2019, "Leveraging Local and Global Patterns
for Self-Attention Networks").

One energy ``xi = QK^T / sqrt(d_k)`` per head, two distributions from it:

* global: ``a_i = softmax(xi_i)`` over all real keys (:func:`cn3.attention.masked_softmax`);
* local (eq. 3): ``l_i = softmax(B(xi_i))`` where ``B`` sets ``-inf`` outside ``|i - j| <= m``
  (:func:`cn3.attention.band_mask`).

A softmax restricted to a subset of keys is the full softmax renormalized over that subset:
``l_ij = a_ij [|i-j| <= m] / sum_{|i-k| <= m} a_ik``. The local distribution is computed that way
from the global weights (a masked sum and a division, no second exponential); a real query whose
band mass underflows (< 1e-30: its band energies ~69 below the row maximum) makes the layer fall
back to the exact second masked softmax for that call. ``exact_local=True`` always takes the
masked softmax (tests compare the two).

Combinations (``mode``):

* ``hybrid`` (eq. 4-5): ``H^_i = (1 - g_i) Att(xi_i, V) + g_i Att(B(xi_i), V)`` with
  ``g_i = sigmoid(W H_i + b)``, one gate per token and head (or per token). Because ``g_i`` is a
  scalar per query row, ``g Att(l, V) + (1-g) Att(a, V) = Att(g l + (1-g) a, V)``: the two
  distributions are mixed with :func:`cn3.attention.gated_mix` and attended once.
* ``local``: the local distribution only (the paper's "local" ablation).
* ``concat``: both outputs, concatenated per token and projected from ``2 d`` to ``d``.

Attention dropout is applied to BOTH distributions (the authors' code skips it on the local one).
In ``hybrid`` mode the two share one dropout mask, i.e. dropout is applied to the mixed
distribution: ``Att(drop(g l + (1-g) a), V) = g Att(drop_M(l), V) + (1-g) Att(drop_M(a), V)``
with the same mask ``M`` (one Bernoulli draw, as in vanilla attention). ``local`` drops its one
distribution, ``concat`` draws independent masks for its two.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from cn3.attention import attend, band_mask, gated_mix, masked_softmax
from cn3.layers.transformer import MultiHeadAttention

Mode = Literal["hybrid", "local", "concat"]

#: Band mass below which renormalizing the global weights is not trusted (float32 normal min 1e-38).
UNDERFLOW = 1e-30


def local_from_global(weights: Tensor, band: Tensor, query_mask: Tensor | None = None) -> Tensor | None:
    """The softmax restricted to ``band`` from the full (masked) softmax ``weights (..., N, N)``.

    Returns ``None`` when a real query's band mass underflows (the caller then computes the
    masked softmax directly). Rows without any allowed key in the band come out all zero, as in
    :func:`cn3.attention.masked_softmax`.
    """
    inside = weights.masked_fill(~band, 0.0)
    total = inside.sum(-1, keepdim=True)  # (..., N, 1)
    small = total.squeeze(-1) < UNDERFLOW
    if query_mask is not None:
        small = small & query_mask.view(query_mask.shape[0], *([1] * (small.dim() - 2)), query_mask.shape[1])
    if bool(small.any()):
        return None
    return inside / total.clamp_min(UNDERFLOW)


class HybridSelfAttention(MultiHeadAttention):
    """Encoder self-attention with a local window ``m`` and a global view (see the module docstring).

    Args:
        window: ``m``: key ``j`` is local to query ``i`` when ``|i - j| <= m``.
        mode: ``hybrid`` (gated), ``local`` or ``concat``.
        gate_per_head: ``W`` maps ``d -> heads`` (each head mixes on its own) instead of ``d -> 1``.
        exact_local: compute the local distribution with a second masked softmax always.

    ``forward`` returns ``(out, info)``; for ``hybrid`` ``info["gate"]`` is ``g`` of shape
    ``(B, G, N)`` (``G`` = heads or 1), the weight of the LOCAL distribution.
    """

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0, window: int = 1,
                 mode: Mode = "hybrid", gate_per_head: bool = False, exact_local: bool = False):
        super().__init__(d_model, heads, dropout)
        if window < 0:
            raise ValueError(f"window must be >= 0, got {window}")
        if mode not in ("hybrid", "local", "concat"):
            raise ValueError(f"unknown mode {mode!r}")
        self.window, self.mode, self.exact_local = window, mode, exact_local
        if mode == "hybrid":
            self.gate = nn.Linear(d_model, heads if gate_per_head else 1)
        if mode == "concat":
            self.out_proj = nn.Linear(2 * d_model, d_model)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform weights and zero biases, the gate's too (it starts at 0.5)."""
        super().reset_parameters()
        if hasattr(self, "gate"):  # not yet while the parent's constructor runs
            nn.init.xavier_uniform_(self.gate.weight)
            nn.init.zeros_(self.gate.bias)

    def distributions(self, energy: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
        """``(local, global)`` weights from one energy ``(B, H, N, N)``, before dropout."""
        band = band_mask(energy.shape[-1], self.window, energy.device)
        glob = masked_softmax(energy, mask)
        local = None if self.exact_local else local_from_global(glob, band, mask)
        if local is None:
            local = masked_softmax(energy, mask, band)
        return local, glob

    def forward(self, x: Tensor, mask: Tensor | None = None, need_weights: bool = False) -> tuple[Tensor, dict | None]:
        """``need_weights``: also return the attention distribution averaged over heads
        (``info["weights"] (B, N, N)``; for ``concat``, the mean of the local and global ones)."""
        q = self.query(x)
        k, v = self.keys_values(x)
        energy = q @ k.transpose(-1, -2)  # (B, H, N, N), shared by both distributions
        p, training = self.dropout, self.training
        info: dict = {}
        if self.mode == "local":
            band = band_mask(x.shape[1], self.window, x.device)
            local = masked_softmax(energy, mask, band)
            if need_weights:
                info["weights"] = local.mean(1)
            local = F.dropout(local, p, training) if p > 0.0 else local
            return self.out_proj(self.merge(attend(local, v))), info or None
        local, glob = self.distributions(energy, mask)
        if self.mode == "concat":  # independent dropout masks
            if need_weights:
                info["weights"] = (0.5 * (local + glob)).mean(1)
            local, glob = F.dropout(local, p, training), F.dropout(glob, p, training)
            both = torch.cat([self.merge(attend(local, v)), self.merge(attend(glob, v))], dim=-1)
            return self.out_proj(both), info or None
        g = torch.sigmoid(self.gate(x)).transpose(1, 2)  # (B, G, N): weight of the local pattern
        weights = gated_mix(local, glob, g.unsqueeze(-1))  # (B, H, N, N)
        info["gate"] = g
        if need_weights:
            info["weights"] = weights.mean(1)
        if p > 0.0 and training:  # one mask for both distributions (see the module docstring)
            weights = F.dropout(weights, p, training)
        return self.out_proj(self.merge(attend(weights, v))), info

    def extra_repr(self) -> str:
        return f"window={self.window}, mode={self.mode}"
