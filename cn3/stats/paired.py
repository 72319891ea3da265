"""Paired significance tests on per-item counts, through scipy: :func:`paired_test`.

p: two-sided **paired approximate randomization** (Noreen, 1989; Riezler & Maxwell, 2005): under
the null A's and B's predictions of an item are exchangeable, so each trial swaps them on a random
subset of items (``scipy.stats.permutation_test(permutation_type="samples")``, exact when all
``2**n`` swaps fit in ``resamples``). Interval: 95% **paired bootstrap** percentile interval
(Koehn, 2004; ``scipy.stats.bootstrap(paired=True)``).

**Non-decomposable metrics.** Span F1 and BLEU are functions of per-item counts summed over items
(:mod:`cn3.stats.counts`), so the two "samples" handed to scipy are *row numbers* into one table of
counts, A's rows ``0..n-1`` and B's ``n..2n-1``: a permutation swaps row ``i`` with ``n + i``, a
bootstrap resample picks the same items for both, and the statistic sums the rows and rescores.

**Pooling seeds.** Matched seeds are compared by concatenating their items (``gold`` repeated per
seed, predictions in the same order), so swaps and resamples stay within a (seed, item) pair; the
pooled score is the metric over the concatenation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from cn3.stats.counts import SCORES, item_counts
from cn3.stats.result import PairedResult

# Elements gathered at once per count (``batch * items``, float64): 32 MiB, so 10,000 trials over
# SNLI's 9,824 test pairs never hold a whole (10,000, n) array.
_GATHER_BUDGET = 1 << 22


def _difference(counts_a: np.ndarray, counts_b: np.ndarray, score: Callable[[np.ndarray], np.ndarray],
                base: np.ndarray) -> tuple[Callable[..., np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """scipy's statistic ``score(A) - score(B)`` and its two samples, row numbers into A's and B's counts.

    Row ``i`` is item ``i``'s counts under A's prediction, row ``n + i`` under B's. The statistic sums
    the rows it is given along scipy's ``axis``, adds ``base`` (counts of items left out) and scores.
    """
    n = len(counts_a)
    # One contiguous array per count: gathering and summing each is several times faster than
    # summing a (batch, n, k) gather over its middle axis.
    columns = np.ascontiguousarray(np.concatenate([counts_a, counts_b]).T)

    def summed(rows: np.ndarray, axis: int) -> np.ndarray:
        return base + np.stack([np.take(column, rows).sum(axis=axis) for column in columns], axis=-1)

    def difference(rows_a: np.ndarray, rows_b: np.ndarray, axis: int = -1) -> np.ndarray:
        return score(summed(rows_a, axis)) - score(summed(rows_b, axis))

    return difference, (np.arange(n), np.arange(n, 2 * n))


def _randomization(counts_a: np.ndarray, counts_b: np.ndarray, score: Callable[[np.ndarray], np.ndarray],
                   resamples: int, rng: np.random.Generator) -> tuple[float, str, int]:
    """Two-sided paired approximate randomization p of ``score(A) - score(B)``: ``(p, method, trials)``."""
    from scipy import stats

    # Swapping an item that A and B score alike changes nothing, so scipy gets only the items they
    # score differently (the others' counts as a constant): the same null distribution, computed much
    # faster (scipy's "samples" permutations loop over items in Python), and exactly when 2**d fits.
    differ = scored_differently(counts_a, counts_b)
    d = int(differ.sum())
    if not d:
        return 1.0, "exact randomization", 1  # the one distinct swap: the observed difference, 0
    if d == 1:  # two swaps, +x and -x, both as extreme as observed (and scipy wants two observations)
        return 1.0, "exact randomization", 2
    difference, rows = _difference(counts_a[differ], counts_b[differ], score, base=counts_a[~differ].sum(axis=0))
    test = stats.permutation_test(rows, difference, permutation_type="samples", vectorized=True,
                                  n_resamples=resamples, batch=max(1, _GATHER_BUDGET // d), rng=rng)
    method = "exact randomization" if 2 ** d <= resamples else "approximate randomization"
    return float(test.pvalue), method, int(test.null_distribution.size)


def bootstrap_interval(counts_a: np.ndarray, counts_b: np.ndarray, score: Callable[[np.ndarray], np.ndarray],
                        resamples: int, rng: np.random.Generator) -> tuple[float, float]:
    """95% paired bootstrap percentile interval of ``score(A) - score(B)`` (Koehn, 2004): ``(low, high)``."""
    from scipy import stats

    difference, rows = _difference(counts_a, counts_b, score, base=np.zeros(counts_a.shape[1]))
    # Percentile rather than scipy's default BCa: Koehn's interval, and defined when every resampled
    # difference is the same (identical systems), where BCa's acceleration is 0/0.
    interval = stats.bootstrap(rows, difference, paired=True, vectorized=True, n_resamples=resamples,
                               batch=max(1, _GATHER_BUDGET // len(counts_a)), method="percentile",
                               rng=rng).confidence_interval
    return float(interval.low), float(interval.high)


def scored_differently(counts_a: np.ndarray, counts_b: np.ndarray) -> np.ndarray:
    """Per item, whether A's and B's predictions give it different counts."""
    return np.any(counts_a != counts_b, axis=1)


def check_lengths(gold: Sequence, pred_a: Sequence, pred_b: Sequence, resamples: int) -> None:
    """Raise ``ValueError`` unless there are as many predictions of A and of B as gold items, at least
    2 of them, and ``resamples`` is positive."""
    if not len(gold) == len(pred_a) == len(pred_b):
        raise ValueError(f"not paired: {len(gold)} gold items, {len(pred_a)} predictions of A, {len(pred_b)} of B")
    if len(gold) < 2:  # nothing to resample in fewer (scipy's bootstrap refuses them)
        raise ValueError(f"a paired test needs at least 2 items, got {len(gold)}")
    if resamples < 1:
        raise ValueError(f"resamples must be positive, got {resamples}")


def paired_test(gold: Sequence, pred_a: Sequence, pred_b: Sequence, metric: str, *, tag_scheme: str | None = None,
                resamples: int = 10_000, seed: int = 0) -> PairedResult:
    """Paired approximate randomization test and bootstrap interval of A's minus B's score.

    p is scipy's two-sided p over ``resamples`` random swaps (with the +1 correction), or exact when
    the ``2**d`` swaps of the ``d`` items A and B score differently fit in ``resamples``. The interval is
    the 95% paired bootstrap percentile interval. See the module docstring for non-decomposable
    metrics and pooled seeds.

    Args:
        gold: per item, the gold label (accuracy) or the sentence's gold tags (token_accuracy, span_f1).
        pred_a, pred_b: A's and B's prediction of each item, in the same order as ``gold``.
        metric: ``accuracy``, ``token_accuracy`` or ``span_f1``, computed as :func:`cn3.metrics.score` does.
        tag_scheme: the tags' scheme for span F1 (``BIOES`` or ``IOB2``).
        resamples: randomization trials, and bootstrap resamples for the interval.
        seed: seed of the random trials and resamples; the same seed gives the same result.

    Raises:
        ValueError: unknown metric, span F1 without a tag scheme, fewer than 2 items, or inputs of
            different lengths.
    """
    if metric not in SCORES:
        hint = " (use bleu_paired_test)" if metric == "bleu" else ""
        raise ValueError(f"paired_test scores {', '.join(SCORES)}, not {metric!r}{hint}")
    if metric == "span_f1" and not tag_scheme:
        raise ValueError("span_f1 needs the tag scheme (BIOES or IOB2)")
    check_lengths(gold, pred_a, pred_b, resamples)
    counts_a = item_counts(metric, tag_scheme, gold, pred_a)
    counts_b = item_counts(metric, tag_scheme, gold, pred_b)
    score = SCORES[metric]
    score_a, score_b = float(score(counts_a.sum(axis=0))), float(score(counts_b.sum(axis=0)))
    rng = np.random.default_rng(seed)
    p, method, trials = _randomization(counts_a, counts_b, score, resamples, rng)
    low, high = bootstrap_interval(counts_a, counts_b, score, resamples, rng)
    differ = int(scored_differently(counts_a, counts_b).sum())
    return PairedResult(metric=metric, n_items=len(gold), items_differ=differ,
                        score_a=score_a, score_b=score_b, difference=score_a - score_b, ci_low=low, ci_high=high,
                        p_value=p, method=method, resamples=trials)
