"""Hybrid local/global self-attention (Xu et al., ACL 2019, "Leveraging Local and Global Patterns
for Self-Attention Networks").

One energy ``xi = QK^T / sqrt(d_k)`` per head, two distributions from it:

* global: ``a_i = softmax(xi_i)`` over all real keys (:func:`cn3.layers.attention.masked_softmax`);
* local (eq. 3): ``l_i = softmax(B(xi_i))``, ``B`` setting ``-inf`` outside ``|i - j| <= m``,
  computed from the band alone: the ``2m + 1`` energies gathered into ``(B, H, N, 2m + 1)``
  (column ``m + o`` holds key ``i + o``) and softmaxed with a band-shaped key mask
  (:func:`cn3.layers.attention.local_band`). A query with no real key in its window gets zeros, never NaN.

The window is capped at ``N - 1`` (``window >= N - 1``: global attention; ``0``: each token's value).

Modes:

* ``hybrid`` (eq. 4-5): ``H^_i = (1 - g_i) Att(xi_i, V) + g_i Att(B(xi_i), V)``,
  ``g_i = sigmoid(W H_i + b)`` per token (and head), computed as ``Att(w_i, V)`` with the mixed
  weights ``w_i = (1 - g_i) a_i + g_i l_i`` (:class:`_HybridWeights`): one pass over ``N x N`` costs
  less than attending the band while ``N < d_k`` (docs/benchmarks.md, "Local distribution from the band").
* ``local``: the local distribution only (the paper's ablation).
* ``concat``: both outputs concatenated per token and projected from ``2 d`` to ``d``.

Attention dropout applies to BOTH distributions (the authors' code skips the local one). In
``hybrid`` mode one mask ``M`` (:meth:`HybridSelfAttention.dropout_mask`) drops the mixed weights,
i.e. both distributions alike; ``concat`` draws independent masks.

SDPA path (``hybrid`` on CUDA, where launches bound the layer): eq. 5 as
``lerp(Att(xi_i, V), Att(B(xi_i), V), g_i)``, two ``F.scaled_dot_product_attention`` calls. Equal to
the weights path at every real query up to rounding, except that a padded query attends to itself
(SDPA backends disagree on fully masked rows) and each distribution draws its own dropout mask.
:attr:`HybridSelfAttention.sdpa`: ``"auto"`` (CUDA, unless ``torch.use_deterministic_algorithms``),
``"always"``, ``"never"``; ``need_weights`` takes the weights path.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from cn3.layers.attention import attend, band_index, band_key_mask, band_scatter, band_width, local_band, masked_softmax
from cn3.layers.transformer import MultiHeadAttention

Mode = Literal["hybrid", "local", "concat"]

_MASKS: dict[tuple[int, int, str], tuple[Tensor, Tensor]] = {}


def band_self_masks(n: int, m: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """``(band, self)``: ``(N, N)`` bool masks ``|i - j| <= m`` and ``i == j``, cached per
    ``(N, m, device)`` (on a GPU, building them costs as much as the attention at N = 25); made
    outside inference mode, so that training may read them.
    """
    key = (n, m, str(device))
    masks = _MASKS.get(key)
    if masks is None:
        with torch.inference_mode(False), torch.no_grad():
            positions = torch.arange(n, device=device)
            offset = positions[:, None] - positions[None, :]
            masks = (offset.abs() <= m, offset == 0)  # (N, N): the local window, the diagonal
        if len(_MASKS) > 256:  # bounded: one entry per sentence length seen
            _MASKS.clear()
        _MASKS[key] = masks
    return masks


class _HybridWeights(torch.autograd.Function):
    """The mixed weights ``w = (1 - g) a + g l`` after attention dropout, in one step.

    Inputs: ``energy (B, H, N, N)``, gate logits ``z (B, G, N, 1)`` (``g = sigmoid(z)``); ``a`` the
    global weights, ``l`` the local band weights (:func:`cn3.layers.attention.local_band`), added into the
    band of ``w``. ``keep``: ``None`` (no dropout) or the ``0/1`` keep mask ``r (B, H, N, N)``, which
    this function owns (scaled in place); the output is then ``F.dropout`` of ``w`` with mask ``r``.
    ``s = r (1 - g) / (1 - p)`` is applied in the pass that applies the mask, so the mix adds no
    ``N x N`` pass to vanilla attention with dropout.

    Backward, with ``G`` the output gradient and ``u = G s``: the global part of ``dE`` is
    :func:`cn3.layers.attention.softmax_backward` of ``u``; the local part the band softmax's gradient of
    ``g r G / (1 - p)``, added at ``(i, i + o)``; the gate's
    ``dz = g ((1 - g) <(r G / (1 - p))_band, l> - <u_i, a_i>)`` (w.r.t. the logits: no ``1 / (1 - g)``).
    """

    @staticmethod
    def forward(ctx, energy: Tensor, z: Tensor, key_mask: Tensor | None, band_keys: Tensor,
                index: Tensor, keep: Tensor | None, p: float) -> Tensor:
        glob = masked_softmax(energy, key_mask)
        local = local_band(energy, band_keys, index)
        g, h = torch.sigmoid(z).to(glob.dtype), torch.sigmoid(-z).to(glob.dtype)  # g and 1 - g
        index = index.expand_as(local)
        if keep is None:
            kept, scale = None, h  # (B, G, N, 1)
            weights = torch.mul(glob, h, out=torch.empty_like(glob))
            band = local * g
        else:
            inverse = 1.0 / (1.0 - p) if p < 1.0 else 0.0  # F.dropout(p=1) gives zeros
            kept = keep.gather(-1, index).mul_(inverse)  # r / (1 - p) on the band
            band = (local * g).mul_(kept)
            scale = keep.mul_(h * inverse)  # r (1 - g) / (1 - p), in the mask's own storage
            weights = glob * scale
        weights.scatter_add_(-1, index, band)
        ctx.save_for_backward(glob, local, g, h, index, scale, kept)
        ctx.z_dtype = z.dtype
        return weights

    @staticmethod
    def backward(ctx, grad: Tensor):
        glob, local, g, h, index, scale, kept = ctx.saved_tensors
        grad_band = grad.gather(-1, index)  # (B, H, N, 2m + 1)
        if kept is not None:
            grad_band.mul_(kept)  # r G / (1 - p) on the band
        u = grad * scale  # the gradient of the global weights
        dot = (u.unsqueeze(-2) @ glob.unsqueeze(-1)).squeeze(-1)  # <u_i, a_i>, (B, H, N, 1)
        grad_energy = u.sub_(dot).mul_(glob)  # softmax_backward(u, a), in u's storage
        # the band softmax's backward of g r G / (1 - p), written out: 2m + 1 columns are too few for bmm
        band_dot = (grad_band * local).sum(-1, keepdim=True)
        grad_energy.scatter_add_(-1, index, grad_band.sub_(band_dot).mul_(local).mul_(g))
        grad_z = (g * (h * band_dot - dot)).sum_to_size(g.shape).to(ctx.z_dtype)
        return grad_energy, grad_z, None, None, None, None, None


class HybridSelfAttention(MultiHeadAttention):
    """Encoder self-attention with a local window ``m`` and a global view (see the module docstring).

    Args:
        window: ``m``: key ``j`` is local to query ``i`` when ``|i - j| <= m``.
        mode: ``hybrid`` (gated), ``local`` or ``concat``.
        gate_per_head: ``W`` maps ``d -> heads`` instead of ``d -> 1``.

    Raises:
        ValueError: ``window < 0`` or an unknown ``mode``.

    ``forward`` returns ``(out, info)``; in ``hybrid`` mode ``info["gate"]`` is ``g (B, G, N)``
    (``G`` = heads or 1), the weight of the LOCAL distribution. ``sdpa`` (class attribute, settable
    per instance): when ``hybrid`` mode takes the SDPA path.
    """

    sdpa: Literal["auto", "always", "never"] = "auto"

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0, window: int = 1,
                 mode: Mode = "hybrid", gate_per_head: bool = False):
        super().__init__(d_model, heads, dropout)
        if window < 0:
            raise ValueError(f"window must be >= 0, got {window}")
        if mode not in ("hybrid", "local", "concat"):
            raise ValueError(f"unknown mode {mode!r}")
        self.window, self.mode = window, mode
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

    def dropout_mask(self, like: Tensor) -> Tensor:
        """The keep mask ``r`` (1 with probability ``1 - p``) of one attention-dropout draw: a NEW tensor
        like ``like``, drawn as ``F.dropout`` draws on CPU. Tests replace this method to compare with a
        dense reference.
        """
        return torch.empty_like(like).bernoulli_(1.0 - self.dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None, need_weights: bool = False) -> tuple[Tensor, dict | None]:
        """``need_weights``: also return the attention distribution averaged over heads
        (``info["weights"] (B, N, N)``, before dropout; for ``concat``, the mean of the local and
        global ones)."""
        n = x.shape[1]
        m = band_width(n, self.window)
        if self.mode == "hybrid" and not need_weights and self._use_sdpa(x):
            return self._sdpa_hybrid(x, mask, m)
        index = band_index(n, m, x.device)
        band_keys = band_key_mask(mask, n, m, x.device)
        q = self.query(x)
        k, v = self.keys_values(x)
        energy = q @ k.transpose(-1, -2)  # (B, H, N, N), shared by both distributions
        p, training = self.dropout, self.training
        drop = (lambda w: F.dropout(w, p, training)) if p > 0.0 else (lambda w: w)  # noqa: E731
        info: dict = {}
        if self.mode == "hybrid":
            z = self.gate(x).transpose(1, 2).unsqueeze(-1)  # (B, G, N, 1): logit of the local weight
            info["gate"] = torch.sigmoid(z.squeeze(-1))
            keep = self.dropout_mask(energy) if p > 0.0 and training else None
            weights = _HybridWeights.apply(energy, z, mask, band_keys, index, keep, p)  # (B, H, N, N), dropped
            if need_weights:  # the mixture before dropout, for inspection
                mixed = weights if keep is None else _HybridWeights.apply(energy, z, mask, band_keys, index, None, p)
                info["weights"] = mixed.mean(1)
            return self.out_proj(self.merge(attend(weights, v))), info
        local = local_band(energy, band_keys, index)  # (B, H, N, 2m + 1)
        if self.mode == "local":
            if need_weights:
                info["weights"] = band_scatter(local, index).mean(1)
            return self.out_proj(self.merge(attend(band_scatter(drop(local), index), v))), info or None
        glob = masked_softmax(energy, mask)
        if need_weights:
            info["weights"] = (0.5 * (band_scatter(local, index) + glob)).mean(1)
        both = [attend(band_scatter(drop(local), index), v), attend(drop(glob), v)]  # independent masks
        return self.out_proj(torch.cat([self.merge(o) for o in both], dim=-1)), info or None

    def _use_sdpa(self, x: Tensor) -> bool:
        if self.sdpa not in ("auto", "always", "never"):
            raise ValueError(f"sdpa must be auto, always or never, got {self.sdpa!r}")
        # "auto" leaves deterministic runs on the weights path: its scatter_add_ has a deterministic
        # CUDA implementation, whereas SDPA's fused backward kernels need not be run to run exact
        return self.sdpa == "always" or (self.sdpa == "auto" and x.is_cuda
                                         and not torch.are_deterministic_algorithms_enabled())

    def _sdpa_hybrid(self, x: Tensor, mask: Tensor | None, m: int) -> tuple[Tensor, dict]:
        """``hybrid`` mode as two fused attentions and a lerp (the module docstring's SDPA path).

        Shapes: ``x (B, N, d)``, ``mask (B, N)`` True at real tokens or None; returns
        ``out (B, N, d)`` and ``info["gate"] (B, G, N)``.
        """
        band, diagonal = band_self_masks(x.shape[1], m, x.device)
        q = self.split(self.q_proj(x))  # unscaled: SDPA applies 1 / sqrt(d_k) inside its kernel (one kernel less)
        k, v = self.keys_values(x)
        scale = self.d_head ** -0.5
        if mask is None:
            glob_mask, local_mask = None, band
        else:
            keys = mask[:, None, None, :]  # (B, 1, 1, N): broadcast over heads and queries
            glob_mask = keys | diagonal  # (B, 1, N, N); a padded query may see itself: no empty row
            local_mask = (keys & band) | diagonal  # eq. 3's window over real keys, plus the same guard
        p = self.dropout if self.training else 0.0  # two independent draws (module docstring)
        glob = F.scaled_dot_product_attention(q, k, v, glob_mask, p, scale=scale)  # Att(xi_i, V)
        local = F.scaled_dot_product_attention(q, k, v, local_mask, p, scale=scale)  # Att(B(xi_i), V)
        g = torch.sigmoid(self.gate(x).transpose(1, 2).unsqueeze(-1))  # (B, G, N, 1): weight of the local
        out = torch.lerp(glob, local, g.to(glob.dtype))  # (1 - g) Att(xi, V) + g Att(B(xi), V), eq. 5
        return self.out_proj(self.merge(out)), {"gate": g.squeeze(-1)}

    def extra_repr(self) -> str:
        return f"window={self.window}, mode={self.mode}"
