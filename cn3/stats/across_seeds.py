"""Scores across seeds, one per run: mean and spread, Welch's t-test, Almost Stochastic Order."""

from __future__ import annotations

import statistics
import warnings
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample std of scores across seeds; one seed has no spread, so its std is None (printed
    as the mean alone, not as a misleading "± 0.00")."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


class WelchResult(NamedTuple):
    """Welch's t-test of two sets of scores, a tuple whose first two items are ``t`` and ``p``; ``t``,
    ``p`` and ``df`` are None when it cannot be run, and ``reason`` says why."""

    t: float | None
    p: float | None
    df: float | None
    reason: str | None = None


def welch(scores_a: Sequence[float], scores_b: Sequence[float]) -> WelchResult:
    """Welch's unequal-variance two-sided t-test (Welch, 1947) on scores across seeds, one per run:
    ``scipy.stats.ttest_ind(equal_var=False)``.

    Returns:
        t, p and the Welch-Satterthwaite degrees of freedom; all None, with the reason, when a side
        has fewer than 2 scores or neither side varies.
    """
    from scipy import stats

    a, b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
    if min(a.size, b.size) < 2:
        return WelchResult(None, None, None, f"Welch's t-test needs at least 2 scores per side (A has {a.size}, "
                                             f"B has {b.size})")
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return WelchResult(None, None, None, "every run of A scores the same and so does every run of B: no "
                                             "variance to test against")
    with warnings.catch_warnings():
        # scipy warns of "precision loss" when one side is constant (every seed of a model stuck at the
        # majority class): its variance is then exactly 0, a valid input, and the test stands on the other.
        warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
        result = stats.ttest_ind(a, b, equal_var=False)
    return WelchResult(float(result.statistic), float(result.pvalue), float(result.df))


def aso(scores_a: Sequence[float], scores_b: Sequence[float], *, seed: int = 0, confidence_level: float = 0.95,
        num_comparisons: int = 1, bootstrap_iterations: int = 1000) -> float:
    """Almost Stochastic Order (del Barrio et al., 2018; Dror et al., 2019): deepsig's ``aso``.

    Returns ``epsilon_min``, an upper bound (at ``confidence_level``) of how much A's score distribution
    violates stochastic dominance over B's: 0 when A is better everywhere, 1 when B is; below 0.5 A is
    almost stochastically dominant (deepsig's authors read below 0.2 as confident). No assumption on the
    scores' distribution.

    Args:
        scores_a, scores_b: one score per run of A and of B, higher is better.
        seed: seed of deepsig's bootstrap.
        confidence_level: deepsig's confidence level.
        num_comparisons: comparisons in the family (deepsig's Bonferroni correction).
        bootstrap_iterations: deepsig's bootstrap iterations.
    """
    from deepsig import aso as deepsig_aso

    # deepsig seeds numpy's global generator (np.random.seed) in every iteration: put its state back.
    state = np.random.get_state()
    try:
        return float(deepsig_aso(list(scores_a), list(scores_b), confidence_level=confidence_level,
                                 num_comparisons=num_comparisons, num_bootstrap_iterations=bootstrap_iterations,
                                 num_jobs=1, show_progress=False, seed=seed))
    finally:
        np.random.set_state(state)
