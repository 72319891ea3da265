"""Adjusted p-values for a family of comparisons: Bonferroni and Holm (Holm, 1979)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _check_pvalues(pvalues: Sequence[float]) -> np.ndarray:
    p = np.asarray(pvalues, dtype=float)
    if p.ndim != 1 or np.any((p < 0) | (p > 1)) or np.any(np.isnan(p)):
        raise ValueError(f"expected a list of p-values in [0, 1], got {list(pvalues)!r}")
    return p


def bonferroni(pvalues: Sequence[float]) -> list[float]:
    """Bonferroni-adjusted p-values: each times the number of comparisons, capped at 1.

    Args:
        pvalues: the family's raw p-values.
    """
    p = _check_pvalues(pvalues)
    return np.minimum(1.0, p * p.size).tolist()


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni step-down adjusted p-values (Holm, 1979), in the order given.

    The i-th smallest of m p-values (i from 1) is multiplied by ``m - i + 1``; a running maximum keeps
    the adjusted values in the order of the raw ones, capped at 1. (Five lines here rather than the
    heavy ``statsmodels`` dependency.)

    Args:
        pvalues: the family's raw p-values.
    """
    p = _check_pvalues(pvalues)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate((p.size - np.arange(p.size)) * p[order]))
    return adjusted.tolist()
