"""Task heads: CRF for tagging, mean-pool (or max-pool) + softmax for sentences, matching MLP for pairs.

Every head maps encoder states to ``(loss, predictions)`` so the trainer treats all tasks alike.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torchcrf import CRF


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


class CRFHead(nn.Module):
    """Linear emissions + linear-chain CRF (pytorch-crf), for POS, chunking and NER.

    pytorch-crf silently mis-scores when the mask's first time step is off or the mask is not
    bool, so :meth:`_check_mask` enforces both (every sentence has at least one word).

    Shapes: ``h (B, N, d)``, ``mask (B, N)`` bool, ``tags (B, N)`` -> loss (scalar, mean negative
    log-likelihood per sentence) and predictions ``(B, N)`` (0 under padding).
    """

    def __init__(self, in_dim: int, n_tags: int):
        super().__init__()
        self.emit = nn.Linear(in_dim, n_tags)
        self.crf = CRF(n_tags, batch_first=True)

    @staticmethod
    def _check_mask(mask: Tensor) -> Tensor:
        if mask.dtype != torch.bool:
            raise TypeError(f"CRF mask must be bool, got {mask.dtype}")
        if not bool(mask[:, 0].all()):
            raise ValueError("CRF mask must be on at the first step of every sentence (empty sentence?)")
        return mask

    def log_likelihood(self, h: Tensor, mask: Tensor, tags: Tensor) -> Tensor:
        """``(B,)`` log p(tags | sentence)."""
        return self.crf(self.emit(h), tags, mask=self._check_mask(mask), reduction="none")

    def forward(self, h: Tensor, mask: Tensor, tags: Tensor | None = None) -> tuple[Tensor | None, Tensor]:
        mask = self._check_mask(mask)
        emissions = self.emit(h)  # (B, N, T)
        loss = None
        if tags is not None:
            loss = -self.crf(emissions, tags, mask=mask, reduction="mean")
        paths = self.crf.decode(emissions, mask=mask)
        pred = torch.zeros(mask.shape, dtype=torch.long, device=h.device)
        for i, path in enumerate(paths):
            pred[i, : len(path)] = torch.tensor(path, device=h.device)
        return loss, pred


class PooledClassifier(nn.Module):
    """Mean-pool (the paper) or max-pool the nodes, then MLP + softmax (single-sentence classification).

    Shapes: ``h (B, N, d)``, ``mask (B, N)``, ``y (B,)`` -> loss, predictions ``(B,)`` and logits
    ``(B, K)`` (for probability outputs).
    """

    def __init__(self, in_dim: int, n_classes: int, hidden: int, dropout: float = 0.0, pool: str = "mean"):
        super().__init__()
        self.pool = POOLS[pool]
        self.mlp = nn.Sequential(nn.Dropout(dropout), nn.Linear(in_dim, hidden), nn.Tanh(),
                                 nn.Dropout(dropout), nn.Linear(hidden, n_classes))

    def logits(self, pooled: Tensor) -> Tensor:
        return self.mlp(pooled)

    def forward(self, h: Tensor, mask: Tensor, y: Tensor | None = None) -> tuple[Tensor | None, Tensor, Tensor]:
        logits = self.logits(self.pool(h, mask))  # (B, K)
        loss = nn.functional.cross_entropy(logits, y) if y is not None else None
        return loss, logits.argmax(-1), logits


class PairClassifier(PooledClassifier):
    """Sentence-pair matching: graph vectors ``u``, ``v`` combined as ``[u, v, |u-v|, u*v]``
    (Mou et al., 2016; the CN3 paper's SNLI/SICK head), then MLP + softmax."""

    def __init__(self, in_dim: int, n_classes: int, hidden: int, dropout: float = 0.0, pool: str = "mean"):
        super().__init__(4 * in_dim, n_classes, hidden, dropout, pool)

    def forward_pair(self, ha: Tensor, mask_a: Tensor, hb: Tensor, mask_b: Tensor,
                     y: Tensor | None = None) -> tuple[Tensor | None, Tensor, Tensor]:
        u, v = self.pool(ha, mask_a), self.pool(hb, mask_b)  # (B, d) each
        logits = self.logits(torch.cat([u, v, (u - v).abs(), u * v], -1))  # (B, K)
        loss = nn.functional.cross_entropy(logits, y) if y is not None else None
        return loss, logits.argmax(-1), logits
