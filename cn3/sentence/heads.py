"""Task heads: CRF for tagging, MLP + softmax over a sentence vector, matching MLP for pairs."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torchcrf import CRF


def _reset(module: nn.Module, uniform_range: float | None) -> None:
    """``U(-r, r)`` for every parameter (CN3's paper init), or each submodule's standard init."""
    if uniform_range is not None:
        for p in module.parameters():
            nn.init.uniform_(p, -uniform_range, uniform_range)
        return
    for sub in module.modules():
        if sub is not module and hasattr(sub, "reset_parameters"):
            sub.reset_parameters()


class CRFHead(nn.Module):
    """Dropout + linear emissions + linear-chain CRF (pytorch-crf), for POS, chunking and NER.

    pytorch-crf silently mis-scores when the mask's first time step is off or the mask is not
    bool, so :meth:`_check_mask` enforces both (every sentence has at least one word).

    Shapes: ``h (B, N, d)``, ``mask (B, N)`` bool, ``tags (B, N)``; :meth:`loss` is the mean negative
    log-likelihood per sentence, :meth:`decode` the Viterbi tags ``(B, N)`` (0 under padding).
    """

    def __init__(self, in_dim: int, n_tags: int, dropout: float = 0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.emit = nn.Linear(in_dim, n_tags)
        self.crf = CRF(n_tags, batch_first=True)

    def reset_parameters(self, uniform_range: float | None = None) -> None:
        """Standard: torch's Linear init and pytorch-crf's ``U(-0.1, 0.1)`` transitions."""
        _reset(self, uniform_range)

    @staticmethod
    def _check_mask(mask: Tensor) -> Tensor:
        if mask.dtype != torch.bool:
            raise TypeError(f"CRF mask must be bool, got {mask.dtype}")
        if not bool(mask[:, 0].all()):
            raise ValueError("CRF mask must be on at the first step of every sentence (empty sentence?)")
        return mask

    def emissions(self, h: Tensor) -> Tensor:
        # fp32 even under bf16 autocast: the CRF's forward algorithm sums log-probabilities over a
        # whole sentence, which bf16's 8-bit mantissa would round away
        e = self.emit(self.dropout(h))  # (B, N, T)
        return e.to(torch.promote_types(e.dtype, torch.float32))  # bf16 -> fp32; fp32/fp64 unchanged

    def log_likelihood(self, h: Tensor, mask: Tensor, tags: Tensor) -> Tensor:
        """``(B,)`` log p(tags | sentence)."""
        return self.crf(self.emissions(h), tags, mask=self._check_mask(mask), reduction="none")

    def loss(self, h: Tensor, mask: Tensor, tags: Tensor) -> Tensor:
        return -self.crf(self.emissions(h), tags, mask=self._check_mask(mask), reduction="mean")

    def decode(self, h: Tensor, mask: Tensor) -> Tensor:
        paths = self.crf.decode(self.emissions(h), mask=self._check_mask(mask))  # Python lists
        pred = torch.zeros(mask.shape, dtype=torch.long)  # filled on the host, then one copy (not one per sentence)
        for i, path in enumerate(paths):
            pred[i, : len(path)] = torch.tensor(path, dtype=torch.long)
        return pred.to(h.device)


class PooledClassifier(nn.Module):
    """A sentence vector (pooled by the model) through dropout + MLP to class logits.

    Dropout is applied once, here, to the sentence vector (the model does not drop the node
    states again). Shapes: ``pooled (B, d)`` -> logits ``(B, K)``.
    """

    def __init__(self, in_dim: int, n_classes: int, hidden: int, dropout: float = 0.0):
        super().__init__()
        self.mlp = nn.Sequential(nn.Dropout(dropout), nn.Linear(in_dim, hidden), nn.Tanh(),
                                 nn.Dropout(dropout), nn.Linear(hidden, n_classes))

    def reset_parameters(self, uniform_range: float | None = None) -> None:
        """Standard: torch's Linear init."""
        _reset(self, uniform_range)

    def logits(self, pooled: Tensor) -> Tensor:
        return self.mlp(pooled)


class PairClassifier(PooledClassifier):
    """Sentence-pair matching: sentence vectors ``u``, ``v`` combined as ``[u, v, |u-v|, u*v]``
    (Mou et al., 2016; the CN3 paper's SNLI/SICK head), then MLP + softmax."""

    def __init__(self, in_dim: int, n_classes: int, hidden: int, dropout: float = 0.0):
        super().__init__(4 * in_dim, n_classes, hidden, dropout)

    def pair_logits(self, u: Tensor, v: Tensor) -> Tensor:
        """``u, v (B, d)`` -> ``(B, K)``."""
        return self.logits(torch.cat([u, v, (u - v).abs(), u * v], -1))
