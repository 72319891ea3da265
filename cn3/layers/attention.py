"""The one attention kernel: masks, masked softmax, weighted sum and gated mixing.

Shared by the CN3 layer (additive energies, ``(B, N, N)``) and the NMT encoders (dot-product
energies, ``(B, H, N, N)``), so masking has one definition: the key axis is the last, the query axis
the one before; a masked key gets weight exactly 0, and a query row with no allowed key gets
all-zero weights and zero gradients, never NaN.

The hybrid encoder's local distribution (Xu et al., eq. 3, window ``m``) is computed on a band
``(..., N, 2m + 1)`` of the energy (column ``m + o`` is key ``i + o``): :func:`band_index`,
:func:`band_key_mask`, :func:`local_band`, :func:`band_scatter`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def padding_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """``(B, N)`` bool mask, True at real tokens, from ``(B,)`` lengths; ``N = max_len``, default
    ``lengths.max()``."""
    if max_len is None:
        max_len = int(lengths.max()) if lengths.numel() else 0
    positions = torch.arange(max_len, device=lengths.device)
    return positions < lengths.unsqueeze(-1)  # (B, N)


def band_mask(n: int, window: int, device: torch.device | str | None = None) -> Tensor:
    """``(N, N)`` bool mask, True where ``|i - j| <= window`` (Xu et al., eq. 3); ``ValueError`` if
    ``window < 0``."""
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    positions = torch.arange(n, device=device)
    return (positions[:, None] - positions[None, :]).abs() <= window  # (N, N)


def band_width(n: int, window: int) -> int:
    """The half-width ``m`` of the band actually used: ``window`` capped at ``N - 1``."""
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    return max(0, min(window, n - 1))


def band_index(n: int, m: int, device: torch.device | str | None = None) -> Tensor:
    """``(N, 2m + 1)`` key index ``j = i + o`` of query ``i`` at column ``m + o``.

    Indices outside ``[0, N)`` are clamped into it; :func:`band_key_mask` masks those columns,
    so they carry weight exactly 0 (and gather or add harmless duplicates).
    """
    i = torch.arange(n, device=device)[:, None]
    return (i + torch.arange(-m, m + 1, device=device)).clamp_(0, max(n - 1, 0))


def band_key_mask(key_mask: Tensor | None, n: int, m: int, device: torch.device | str | None = None) -> Tensor:
    """``(B, 1, N, 2m + 1)`` bool, True where key ``i + o`` exists and is real.

    ``key_mask``: ``(B, N)``, True at real tokens; ``None``: all tokens real (gives ``(1, 1, N, 2m + 1)``).
    """
    keys = torch.ones(1, n, dtype=torch.bool, device=device) if key_mask is None else key_mask
    if n == 0:  # nothing to unfold
        return keys.new_zeros(keys.shape[0], 1, 0, 2 * m + 1)
    return F.pad(keys, (m, m), value=False).unfold(-1, 2 * m + 1, 1).unsqueeze(1)


def band_gather(dense: Tensor, index: Tensor) -> Tensor:
    """The band ``(..., N, 2m + 1)`` of ``dense (..., N, N)``: column ``m + o`` is entry ``(i, i + o)``
    (clamped columns repeat an in-band entry: mask them)."""
    return dense.gather(-1, index.expand(*dense.shape[:-1], index.shape[-1]))


def band_scatter(band: Tensor, index: Tensor) -> Tensor:
    """``(..., N, N)`` zeros with ``band (..., N, 2m + 1)`` added at ``(i, i + o)``; differentiable.

    Columns outside the sentence must hold 0 (they are added onto a clamped in-band entry), as
    the weights of :func:`local_band` do.
    """
    n = band.shape[-2]
    out = band.new_zeros(*band.shape[:-1], n)
    return out.scatter_add(-1, index.expand_as(band), band)


def local_band(energy: Tensor, band_keys: Tensor, index: Tensor) -> Tensor:
    """Xu et al.'s local distribution (eq. 3) as band weights ``(..., N, 2m + 1)``: the masked
    softmax of the band of ``energy (..., N, N)`` over the band keys (:func:`band_key_mask`)."""
    return masked_softmax(band_gather(energy, index), band_keys)


def _batch_view(mask: Tensor, ndim: int, axis: int) -> Tensor:
    """View a ``(B, N)`` mask as ``(B, 1, ..., 1)`` with N at ``axis``, so it skips head axes."""
    if mask.dim() == ndim:
        return mask
    shape = [mask.shape[0]] + [1] * (ndim - 1)
    shape[axis] = mask.shape[1]
    return mask.view(shape)


def _masked_softmax_rows(energy: Tensor, key_mask: Tensor | None, band: Tensor | None,
                         query_mask: Tensor | None) -> Tensor:
    """The forward of :func:`masked_softmax` on masks already viewed to broadcast, in place on one
    copy (each ``(N, N)`` temporary is 25 MB at N = 2,500). Masked entries are ``-inf``, not the
    lowest finite float: the vectorised exp is far slower on huge negatives and subnormal results.
    """
    weights = energy.clone() if key_mask is None else energy.masked_fill(~key_mask, float("-inf"))
    if band is not None:
        weights.masked_fill_(~band, float("-inf"))
    if weights.shape[-1] == 0:  # no keys (an empty batch or sentence): nothing to normalise, and amax refuses
        return weights
    row_max = weights.amax(dim=-1, keepdim=True)
    row_max.masked_fill_(row_max == float("-inf"), 0.0)  # a row with no allowed key: exp(-inf) = 0
    weights.sub_(row_max).exp_()
    # Rows with an allowed key sum to >= 1 (their maximum gives exp(0)); empty rows stay all zero.
    weights.div_(weights.sum(dim=-1, keepdim=True).clamp_(min=1.0))
    return weights if query_mask is None else weights.mul_(query_mask)


def softmax_backward(grad_weights: Tensor, weights: Tensor) -> Tensor:
    """Gradient of a (masked) softmax w.r.t. its energy, from the weights alone.

    ``d s_ik = w_ik (g_ik - sum_j g_ij w_ij)``; zero weights (masked keys, empty rows) get zero
    gradient. For callers that recompute the weights block by block.
    """
    # <g_i, w_i> as a batch of (1 x Nk) @ (Nk x 1) products: no (..., Nq, Nk) temporary
    dot = (grad_weights.unsqueeze(-2) @ weights.unsqueeze(-1)).squeeze(-1)  # (..., Nq, 1)
    return (grad_weights - dot).mul_(weights)


class _MaskedSoftmax(torch.autograd.Function):
    """Masked softmax that saves only its output (plain ops would keep two or three ``(..., Nq, Nk)``
    tensors for backward)."""

    @staticmethod
    def forward(ctx, energy: Tensor, key_mask: Tensor | None, band: Tensor | None,
                query_mask: Tensor | None) -> Tensor:
        weights = _masked_softmax_rows(energy, key_mask, band, query_mask)
        ctx.save_for_backward(weights)
        return weights

    @staticmethod
    def backward(ctx, grad_weights: Tensor) -> tuple[Tensor, None, None, None]:
        (weights,) = ctx.saved_tensors
        return softmax_backward(grad_weights, weights), None, None, None


def masked_softmax(energy: Tensor, key_mask: Tensor | None = None, band: Tensor | None = None,
                   query_mask: Tensor | None = None, dropout_p: float = 0.0,
                   training: bool = False) -> Tensor:
    """Softmax over the last (key) axis with masked keys at exactly 0 weight.

    Args:
        energy: ``(..., Nq, Nk)`` scores, e.g. ``(B, N, N)`` or ``(B, H, N, N)``.
        key_mask: True at keys that may be attended: ``(B, Nk)`` (broadcast over heads and
            queries) or any shape that broadcasts against ``energy``.
        band: ``(Nq, Nk)`` bool pair mask, e.g. :func:`band_mask` or a causal mask.
        query_mask: True at real queries, ``(B, Nq)``; other rows come out all zero.
        dropout_p: attention dropout, applied after masking, only when ``training``.

    Shapes:
        returns weights like ``energy``; each row sums to 1 over its allowed keys, or is all
        zeros when it has none.
    """
    if key_mask is None and band is None and query_mask is None:
        weights = torch.softmax(energy, dim=-1)
    else:
        key_mask = None if key_mask is None else _batch_view(key_mask, energy.dim(), -1)
        query_mask = None if query_mask is None else _batch_view(query_mask, energy.dim(), -2)
        weights = _MaskedSoftmax.apply(energy, key_mask, band, query_mask)
    return F.dropout(weights, dropout_p, training) if dropout_p > 0.0 else weights


def attend(weights: Tensor, values: Tensor) -> Tensor:
    """``out_i = sum_k w_ik v_k``: ``(..., Nq, Nk) x (..., Nk, d) -> (..., Nq, d)``."""
    return torch.matmul(weights, values)


def attention(energy: Tensor, values: Tensor, key_mask: Tensor | None = None,
              band: Tensor | None = None, query_mask: Tensor | None = None,
              dropout_p: float = 0.0, training: bool = False) -> tuple[Tensor, Tensor]:
    """:func:`masked_softmax` then :func:`attend`.

    Returns:
        ``(output (..., Nq, d), weights (..., Nq, Nk))``; the weights are returned before
        dropout, for inspection.
    """
    weights = masked_softmax(energy, key_mask, band, query_mask)
    dropped = F.dropout(weights, dropout_p, training) if dropout_p > 0.0 else weights
    return attend(dropped, values), weights


def gated_mix(a: Tensor, b: Tensor, gate: Tensor) -> Tensor:
    """``gate * a + (1 - gate) * b``; ``gate`` in [0, 1] broadcasts (scalar, per node, per unit)."""
    return gate * a + (1.0 - gate) * b
