"""What a comparison that found nothing could have found: the smallest difference detected with a
given power and level, across seeds (Welch's test, :func:`detectable_welch`) or on items (the
per-item paired differences, :func:`detectable_paired`; normal approximation). An item's difference
is its first-order (delta-method) contribution to the corpus score, so span F1 and BLEU, which are
not means over items, get one too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from cn3.stats.counts import SCORES, item_counts
from cn3.stats.result import ALPHA

#: Power at which :func:`detectable_welch` and :func:`detectable_paired` give the smallest difference.
POWER = 0.8


def pooled_std(scores_a: Sequence[float], scores_b: Sequence[float]) -> float | None:
    """The two sides' sample variances pooled, ``sqrt(((na-1) va + (nb-1) vb) / (na + nb - 2))``: one
    per-seed spread for both sides of a comparison across seeds (None when a side has fewer than 2)."""
    a, b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
    if min(a.size, b.size) < 2:
        return None
    return float(np.sqrt(((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / (a.size + b.size - 2)))


def t_test_power(difference: float, std: float, n_a: int, n_b: int, *, alpha: float = ALPHA) -> float:
    """Power of the two-sided pooled-variance (Student's) t-test of two means, for a true difference
    ``difference``, per-run standard deviation ``std`` and ``n_a``, ``n_b`` runs: the noncentral t
    with ``n_a + n_b - 2`` degrees of freedom and noncentrality ``difference / (std * sqrt(1/n_a +
    1/n_b))`` beyond either critical value ``t_{1 - alpha/2}`` (as R's ``power.t.test``; Cohen 1988).
    """
    from scipy import stats

    _check_power_inputs(std, n_a, n_b)
    df = n_a + n_b - 2
    critical = stats.t.ppf(1 - alpha / 2, df)
    noncentrality = difference / (std * np.sqrt(1 / n_a + 1 / n_b))
    return float(stats.nct.sf(critical, df, noncentrality) + stats.nct.cdf(-critical, df, noncentrality))


def _check_power_inputs(std: float, n_a: int, n_b: int) -> None:
    if min(n_a, n_b) < 2:
        raise ValueError(f"a t-test across runs needs at least 2 runs a side, got {n_a} and {n_b}")
    if not std > 0:
        raise ValueError(f"std must be positive, got {std}")


@functools.lru_cache(maxsize=64)
def _welch_thresholds(n_a: int, n_b: int, alpha: float, grid: int = 400) -> np.ndarray:
    """Welch's rejection threshold ``t_{df^, 1 - alpha/2} * S / tau`` for unit-variance scores on a
    ``grid x grid`` midpoint grid of the sample variances' quantiles (each ``chi2(n - 1) / (n - 1)``):
    ``S = sqrt(va/n_a + vb/n_b)``, ``df^`` Welch-Satterthwaite's, ``tau = sqrt(1/n_a + 1/n_b)``.
    """
    from scipy import stats

    u = (np.arange(grid) + 0.5) / grid
    qa = (stats.chi2.ppf(u, n_a - 1) / (n_a - 1))[:, None] / n_a
    qb = (stats.chi2.ppf(u, n_b - 1) / (n_b - 1))[None, :] / n_b
    df = (qa + qb) ** 2 / (qa**2 / (n_a - 1) + qb**2 / (n_b - 1))
    return (stats.t.ppf(1 - alpha / 2, df) * np.sqrt(qa + qb) / np.sqrt(1 / n_a + 1 / n_b)).ravel()


def welch_power(difference: float, std: float, n_a: int, n_b: int, *, alpha: float = ALPHA) -> float:
    """Power of Welch's two-sided t-test (:func:`cn3.stats.welch`) for a true difference of means ``difference``
    when every run's score is normal with standard deviation ``std``, with ``n_a`` and ``n_b`` runs.

    WHY not the noncentral t of :func:`t_test_power`: Welch's test estimates its degrees of freedom from
    the sample variances, so with few runs its power is lower. Computed exactly up to quadrature: given
    the sample variances the difference of means is normal and independent of them, so the power is the
    mean, over a 400 x 400 grid of the variances' quantiles (:func:`_welch_thresholds`), of
    ``Phi(delta/tau - R) + Phi(-delta/tau - R)``, ``R`` Welch's threshold over the true standard error
    ``tau``.
    """
    from scipy import stats

    _check_power_inputs(std, n_a, n_b)
    thresholds = _welch_thresholds(int(n_a), int(n_b), float(alpha))
    shift = difference / (std * np.sqrt(1 / n_a + 1 / n_b))
    return float((stats.norm.cdf(shift - thresholds) + stats.norm.cdf(-shift - thresholds)).mean())


def detectable_welch(std: float | None, n_a: int, n_b: int, *, alpha: float = ALPHA,
                     power: float = POWER) -> float | None:
    """The smallest difference of means (absolute, in points) that Welch's two-sided t-test detects with
    probability ``power`` at level ``alpha`` when each run's score has standard deviation ``std``: the
    root of :func:`welch_power` ``= power`` (``scipy.optimize.brentq``).

    Tells "no effect" from "too few seeds" for a comparison that was not significant. ``std`` is
    usually :func:`pooled_std` of the same runs. None for fewer than 2 runs a side or no spread
    (``std`` None or 0).
    """
    from scipy import optimize

    if std is None or not std > 0 or min(n_a, n_b) < 2:
        return None
    high = std
    while welch_power(high, std, n_a, n_b, alpha=alpha) < power:
        high *= 2
    return float(optimize.brentq(lambda d: welch_power(d, std, n_a, n_b, alpha=alpha) - power, 0.0, high,
                                 xtol=1e-8 * std))


def detectable_across_seeds(scores_a: Sequence[float], scores_b: Sequence[float], *, alpha: float = ALPHA,
                            power: float = POWER) -> float | None:
    """:func:`detectable_welch` of two sets of per-seed scores: their :func:`pooled_std` and sizes."""
    return detectable_welch(pooled_std(scores_a, scores_b), len(scores_a), len(scores_b), alpha=alpha, power=power)


def detectable_paired(differences: Sequence[float], *, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """The smallest difference (absolute, in points) that a two-sided paired test on ``n`` items detects
    with probability ``power`` at level ``alpha``, by the normal approximation
    ``(z_{1 - alpha/2} + z_power) * sd(d) / sqrt(n)``, ``d`` the per-item paired differences
    (:func:`item_differences`). None for fewer than 2 items.
    """
    from scipy import stats

    d = np.asarray(differences, dtype=float)
    if d.size < 2:
        return None
    return float((stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) * d.std(ddof=1) / np.sqrt(d.size))


def _linearized(counts: np.ndarray, score: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Per item, its first-order (delta-method) contribution to ``score(counts.sum(axis=0))``:
    ``n * grad(score)(S) . x_i`` (``S`` the summed counts, gradient by central differences); for
    accuracy exactly 100 * (right or not) less the accuracy.
    """
    total = counts.sum(axis=0)
    steps = 1e-4 * np.maximum(np.abs(total), 1.0)
    shifted = np.concatenate([total + np.diag(steps), total - np.diag(steps)])
    values = np.asarray(score(shifted), dtype=float)
    k = total.size
    gradient = (values[:k] - values[k:]) / (2 * steps)
    return len(counts) * counts @ gradient


def item_differences(counts_a: np.ndarray, counts_b: np.ndarray,
                     score: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Per item, A's minus B's linearized contribution (:func:`_linearized`), whose standard deviation
    over sqrt(n) is the standard error of the difference of the corpus scores.
    """
    return _linearized(np.asarray(counts_a, dtype=float), score) - _linearized(np.asarray(counts_b, dtype=float), score)


def _smooth_bleu(sums: np.ndarray) -> np.ndarray:
    """Corpus BLEU (points) from summed sacreBLEU statistics ``(sys_len, ref_len, correct_1..4,
    total_1..4)`` (last axis), smooth in every count (sacreBLEU's own casts lengths to int, which a
    numerical gradient cannot differentiate); equal to sacreBLEU's when every order has a match.
    """
    sys_len, ref_len = sums[..., 0], sums[..., 1]
    log_precision = np.log(sums[..., 2:6] / sums[..., 6:10]).mean(axis=-1)
    brevity = np.where(sys_len < ref_len, 1 - ref_len / sys_len, 0.0)
    return 100 * np.exp(log_precision + brevity)


def paired_differences(gold: Sequence, pred_a: Sequence, pred_b: Sequence, metric: str, *,
                       tag_scheme: str | None = None) -> np.ndarray:
    """:func:`item_differences` of two systems' predictions, counted as :func:`cn3.stats.paired_test` (for ``bleu``,
    :func:`cn3.stats.bleu_paired_test`: ``gold`` the references) counts them.
    """
    if metric == "bleu":
        from sacrebleu.metrics import BLEU

        bleu, refs = BLEU(), [list(gold)]
        counts_a = np.array(bleu._extract_corpus_statistics(list(pred_a), refs), dtype=float)
        counts_b = np.array(bleu._extract_corpus_statistics(list(pred_b), refs), dtype=float)

        return item_differences(counts_a, counts_b, _smooth_bleu)
    if metric not in SCORES:
        raise ValueError(f"no per-item differences for metric {metric!r}")
    return item_differences(item_counts(metric, tag_scheme, gold, pred_a),
                            item_counts(metric, tag_scheme, gold, pred_b), SCORES[metric])
