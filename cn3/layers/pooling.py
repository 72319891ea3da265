"""Sentence vectors from node states over the real nodes: mean (the CN3 paper) and max (Kim's
max over time, InferSent's BiLSTM-max). Used by the heads and by encoders that pool their own way."""

from __future__ import annotations

from torch import Tensor


def mean_pool(h: Tensor, mask: Tensor) -> Tensor:
    """Average of the real nodes. Shapes: ``h (B, N, d)``, ``mask (B, N)`` -> ``(B, d)``."""
    keep = mask.unsqueeze(-1).to(h.dtype)
    return (h * keep).sum(1) / keep.sum(1).clamp(min=1.0)


def max_pool(h: Tensor, mask: Tensor) -> Tensor:
    """Element-wise maximum over the real nodes (InferSent's BiLSTM-max). ``(B, N, d)``, ``(B, N)`` -> ``(B, d)``.

    A row without real nodes pools to zeros, as in :func:`mean_pool`, not ``-inf`` (which the MLP turns into NaN).
    """
    pooled = h.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(1)  # (B, d)
    return pooled.masked_fill(~mask.any(1, keepdim=True), 0.0)


POOLS = {"mean": mean_pool, "max": max_pool}
