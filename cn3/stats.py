"""Is run A better than run B? Paired significance tests on per-example predictions, and friends.

Thin wrappers around maintained libraries (scipy, sacreBLEU, deepsig), each naming its method:

* :func:`paired_test` — two systems' predictions on the same items, scored with accuracy, token
  accuracy or span F1 exactly as :mod:`cn3.metrics` scores them. The p-value is **paired approximate
  randomization** (Noreen, 1989; Riezler & Maxwell, 2005): under the null hypothesis A's and B's
  prediction of an item are exchangeable, so each trial swaps them on a random subset of items and
  recomputes the metric's difference; two-sided. ``scipy.stats.permutation_test(permutation_type=
  "samples")`` runs it, and enumerates all ``2**n`` swaps exactly when that is no more than
  ``resamples``. The interval is a 95% **paired bootstrap** percentile interval of the difference
  (Koehn, 2004): items are resampled with replacement, A's and B's prediction of an item together
  (``scipy.stats.bootstrap(paired=True)``).
* :func:`bleu_paired_test` — translations: sacreBLEU's own ``PairedTest`` (approximate randomization
  by default, or paired bootstrap resampling, Koehn 2004), so the scores and p equal
  ``sacrebleu --paired-ar``/``--paired-bs``; the interval as in :func:`paired_test`, on sacreBLEU's
  per-sentence BLEU statistics.
* :func:`compare` — two runs' :class:`cn3.run_dir.Predictions` on the same items: :func:`paired_test`, or
  :func:`bleu_paired_test` for BLEU.
* :func:`welch` — scores across seeds: Welch's unequal-variance t-test (Welch, 1947),
  ``scipy.stats.ttest_ind(equal_var=False)``.
* :func:`mean_std` — scores across seeds: mean and sample standard deviation (None for one seed).
* :func:`holm`, :func:`bonferroni` — adjusted p-values for a family of comparisons (Holm, 1979).
* :func:`detectable_welch`, :func:`detectable_paired` — what a comparison that found nothing could
  have found: the smallest difference detected with power 0.8 at level 0.05, across seeds from the
  pooled per-seed spread (the exact power of Welch's test, :func:`welch_power`; the textbook pooled
  t-test's through the noncentral t, :func:`t_test_power`), and on items from the per-item paired
  differences (:func:`paired_differences`; normal approximation).
* :func:`aso` — scores across seeds: Almost Stochastic Order (del Barrio et al., 2018; Dror et al.,
  2019) from deepsig (Ulmer et al., 2022), which needs numpy, scipy, pandas and joblib but not torch.

Runs' predictions are read by :func:`cn3.run_dir.load_predictions`; this module only tests them.

**Non-decomposable metrics through scipy.** Span F1 (and BLEU) is not a mean over items, but it is a
function of per-item counts summed over the items: true positives, predicted spans and gold spans per
sentence. The two "samples" handed to scipy are therefore *row numbers* into one table of counts,
A's rows ``0..n-1`` and B's rows ``n..2n-1``: a permutation swaps row ``i`` with row ``n + i`` (A's and B's
prediction of item ``i``), a bootstrap resample picks the same items for both, and the statistic sums
the rows it is given and recomputes the metric, vectorised along scipy's ``axis``.

**Pooling seeds.** Runs of matched seeds (seed s of A paired with seed s of B, on the same items) are
compared by concatenating their items: ``gold`` repeated once per seed, and each system's predictions
of seed 1, seed 2, ... in the same order. Swaps and resamples then stay within a (seed, item) pair.
The pooled score is the metric over the concatenation: the mean accuracy over seeds, and the
micro-averaged span F1 or BLEU over all seeds' items.

**Reproducible.** Every test takes a seed (default 0; sacreBLEU's default 12345 for BLEU): the same
inputs and seed give the same figures.
"""

from __future__ import annotations

import functools
import os
import reprlib
import statistics
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from cn3.config import ConfigError

if TYPE_CHECKING:
    from cn3.run_dir import Predictions

#: Significance level of :meth:`PairedResult.sentence`.
ALPHA = 0.05

#: Metric names as ``results.json`` records them, and as a sentence says them.
METRIC_WORDS = {"accuracy": "accuracy", "token_accuracy": "token accuracy", "span_f1": "span F1", "bleu": "BLEU"}

# Elements gathered at once per count (``batch * items``, float64): 32 MiB, so 10,000 trials over
# SNLI's 9,824 test pairs never hold a whole (10,000, n) array.
_GATHER_BUDGET = 1 << 22


@dataclass
class PairedResult:
    """A paired comparison of systems A and B on the same items. Scores in the metric's points (0-100).

    Attributes:
        metric: ``accuracy``, ``token_accuracy``, ``span_f1`` or ``bleu``.
        n_items: items compared (all seeds' items when seeds are pooled).
        items_differ: items whose score A's and B's predictions change differently (e.g. one right,
            the other wrong); only these carry information about the difference.
        score_a, score_b: each system's score on the items.
        difference: ``score_a - score_b``.
        ci_low, ci_high: 95% paired bootstrap percentile interval of the difference.
        p_value: two-sided p-value of the test (``method``).
        method: ``approximate randomization``, ``exact randomization`` (all ``2**items_differ``
            swaps) or ``bootstrap resampling`` (sacreBLEU's paired bootstrap test).
        resamples: trials of the test (swaps enumerated, for the exact test); the interval uses the
            number asked for as bootstrap resamples.
    """

    metric: str
    n_items: int
    items_differ: int
    score_a: float
    score_b: float
    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    method: str
    resamples: int

    def sentence(self, split: str | None = None, alpha: float = ALPHA) -> str:
        """The result in words, to quote, e.g. "A scores 94.87 and B 94.67 accuracy on 500 test items:
        A - B = +0.20 points (95% CI -0.80 to +1.20); paired approximate randomization (10,000 trials):
        p = 0.71, not significant at 0.05."

        Args:
            split: the items' split, named in the sentence ("500 test items").
            alpha: significance level; significant when ``p_value <= alpha``.
        """
        items = f"{self.n_items:,} {split} items" if split else f"{self.n_items:,} items"
        verdict = "significant" if self.p_value <= alpha else "not significant"
        if not self.items_differ:
            trials = "A and B score every item alike"
        elif self.method.startswith("exact"):
            trials = f"all {self.resamples:,} swaps of the {self.items_differ:,} items A and B score differently"
        elif "bootstrap" in self.method:
            trials = f"{self.resamples:,} resamples"
        else:
            trials = f"{self.resamples:,} trials"
        # ``+ 0.0`` turns a -0.0 into 0.0, so no "-0.00" is printed for an empty interval.
        return (f"A scores {self.score_a:.2f} and B {self.score_b:.2f} {METRIC_WORDS.get(self.metric, self.metric)} "
                f"on {items}: A - B = {self.difference + 0.0:+.2f} points (95% CI {self.ci_low + 0.0:+.2f} to "
                f"{self.ci_high + 0.0:+.2f}); paired {self.method} ({trials}): p = {format_p(self.p_value)}, "
                f"{verdict} at {alpha:g}.")


def format_p(p: float) -> str:
    """At most two significant digits, positional (no exponent): 0.71, 0.049, 0.0007, 1.0."""
    return np.format_float_positional(p, precision=2, unique=False, fractional=False, trim="k")


# ---------------------------------------------------------------------------------------------------
# Per-item counts: a corpus-level metric is ``score(counts.sum(axis=items))``.


def _percent(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    # As cn3.metrics: correct / max(total, 1), times 100 afterwards.
    return 100 * (numerator / np.maximum(denominator, 1))


def _f1(counts: np.ndarray) -> np.ndarray:
    """Micro F1 in points from summed (true positives, predicted spans, gold spans): 2tp / (pred + gold),
    which is seqeval's 2PR / (P + R), and 0 when there are no spans at all (seqeval's zero_division=0)."""
    tp, predicted, gold = counts[..., 0], counts[..., 1], counts[..., 2]
    spans = predicted + gold
    return 100 * np.divide(2 * tp, spans, out=np.zeros(np.shape(spans)), where=spans > 0)


_SCORES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "accuracy": lambda c: _percent(c[..., 0], c[..., 1]),
    "token_accuracy": lambda c: _percent(c[..., 0], c[..., 1]),
    "span_f1": _f1,
}


def _counts(metric: str, tag_scheme: str | None, gold: Sequence, pred: Sequence) -> np.ndarray:
    """Per-item counts ``(n, k)`` whose column sums give cn3.metrics' score of ``pred`` against ``gold``."""
    if metric == "accuracy":
        return np.array([[g == p, 1] for g, p in zip(gold, pred)], dtype=float)
    if metric == "token_accuracy":
        # cn3.metrics.token_accuracy zips each sentence's tags: a sentence counts min(len(g), len(p)) tokens.
        return np.array([[sum(a == b for a, b in zip(g, p)), min(len(g), len(p))] for g, p in zip(gold, pred)],
                        dtype=float)
    from seqeval.scheme import BILOU, IOB2, IOBES, Entities

    # The strict-mode schemes of cn3.metrics.span_f1: spans found as seqeval finds them there.
    scheme = {"BIOES": IOBES, "IOBES": IOBES, "IOB2": IOB2, "BILOU": BILOU}[tag_scheme.upper()]
    rows = []
    for gold_spans, pred_spans in zip(Entities(list(gold), scheme).entities, Entities(list(pred), scheme).entities):
        g, p = {e.to_tuple() for e in gold_spans}, {e.to_tuple() for e in pred_spans}
        rows.append([len(g & p), len(p), len(g)])
    return np.array(rows, dtype=float)


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
    differ = _differ(counts_a, counts_b)
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


def _bootstrap_interval(counts_a: np.ndarray, counts_b: np.ndarray, score: Callable[[np.ndarray], np.ndarray],
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


def _differ(counts_a: np.ndarray, counts_b: np.ndarray) -> np.ndarray:
    """Per item, whether A's and B's predictions give it different counts."""
    return np.any(counts_a != counts_b, axis=1)


def _check_lengths(gold: Sequence, pred_a: Sequence, pred_b: Sequence, resamples: int) -> None:
    if not len(gold) == len(pred_a) == len(pred_b):
        raise ValueError(f"not paired: {len(gold)} gold items, {len(pred_a)} predictions of A, {len(pred_b)} of B")
    if len(gold) < 2:  # nothing to resample in fewer (scipy's bootstrap refuses them)
        raise ValueError(f"a paired test needs at least 2 items, got {len(gold)}")
    if resamples < 1:
        raise ValueError(f"resamples must be positive, got {resamples}")


def paired_test(gold: Sequence, pred_a: Sequence, pred_b: Sequence, metric: str, *, tag_scheme: str | None = None,
                resamples: int = 10_000, seed: int = 0) -> PairedResult:
    """Paired approximate randomization test and bootstrap interval of A's minus B's score.

    The p-value is two-sided paired approximate randomization (Riezler & Maxwell, 2005): each of
    ``resamples`` trials swaps A's and B's prediction on a random subset of items and recomputes the
    difference; p is scipy's two-sided p, twice the smaller tail beyond the observed difference (with
    the +1 correction). Swapping all items negates the difference, so the distribution is symmetric
    and, when the ``2**d`` swaps of the ``d`` items A and B score differently fit in ``resamples``
    and are enumerated exactly, p is the share of swaps whose difference is at least the observed
    one in absolute value. The interval is the 95% paired bootstrap percentile interval (Koehn, 2004). Both through scipy; see the module docstring for how a
    non-decomposable metric such as span F1 goes through it, and for pooling matched seeds.

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
    if metric not in _SCORES:
        hint = " (use bleu_paired_test)" if metric == "bleu" else ""
        raise ValueError(f"paired_test scores {', '.join(_SCORES)}, not {metric!r}{hint}")
    if metric == "span_f1" and not tag_scheme:
        raise ValueError("span_f1 needs the tag scheme (BIOES or IOB2)")
    _check_lengths(gold, pred_a, pred_b, resamples)
    counts_a, counts_b = _counts(metric, tag_scheme, gold, pred_a), _counts(metric, tag_scheme, gold, pred_b)
    score = _SCORES[metric]
    score_a, score_b = float(score(counts_a.sum(axis=0))), float(score(counts_b.sum(axis=0)))
    rng = np.random.default_rng(seed)
    p, method, trials = _randomization(counts_a, counts_b, score, resamples, rng)
    low, high = _bootstrap_interval(counts_a, counts_b, score, resamples, rng)
    return PairedResult(metric=metric, n_items=len(gold), items_differ=int(_differ(counts_a, counts_b).sum()),
                        score_a=score_a, score_b=score_b, difference=score_a - score_b, ci_low=low, ci_high=high,
                        p_value=p, method=method, resamples=trials)


@contextmanager
def _sacrebleu_seed(seed: int) -> Iterator[None]:
    # PairedTest takes its seed from $SACREBLEU_SEED only (as the sacrebleu command line does); set it
    # for the call and put back what was there.
    saved = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["SACREBLEU_SEED"]
        else:
            os.environ["SACREBLEU_SEED"] = saved


def bleu_paired_test(references: Sequence[str], hyps_a: Sequence[str], hyps_b: Sequence[str], *, test: str = "ar",
                     resamples: int | None = None, seed: int = 12345) -> PairedResult:
    """sacreBLEU's paired test of A's against B's corpus BLEU, with a bootstrap interval of the difference.

    ``sacrebleu.significance.PairedTest`` with B as the baseline: approximate randomization
    (``test="ar"``, Riezler & Maxwell, 2005; 10,000 trials by default) or paired bootstrap resampling
    (``test="bs"``, Koehn, 2004; 1,000 resamples by default), so the scores and p are sacreBLEU's own
    (default BLEU: 13a tokenization, exponential smoothing). Both tests are symmetric in A and B. The
    95% interval of the difference is a paired bootstrap percentile interval as in :func:`paired_test`,
    on sacreBLEU's per-sentence statistics (n-gram matches and totals, lengths), which sum to the
    corpus BLEU.

    p-value convention: sacreBLEU follows multeval and counts only trials whose difference *exceeds*
    the observed one, so two systems with the same statistics on every sentence would get its smallest
    p (1 / (trials + 1)). There is nothing to test then, and p is reported as 1 instead.

    Args:
        references: the reference translation of each sentence.
        hyps_a, hyps_b: A's and B's translation of each sentence, in the same order.
        test: ``"ar"`` (approximate randomization) or ``"bs"`` (paired bootstrap resampling).
        resamples: trials (``ar``) or resamples (``bs``); default sacreBLEU's (10,000 or 1,000). The
            interval uses as many bootstrap resamples.
        seed: a positive seed (sacreBLEU reads 0 as "no seed"); 12345, sacreBLEU's default, gives the
            figures of the ``sacrebleu`` command line.

    Raises:
        ValueError: unknown test, seed < 1, fewer than 2 sentences, or inputs of different lengths.
    """
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    if test not in ("ar", "bs"):
        raise ValueError(f'test is "ar" (approximate randomization) or "bs" (paired bootstrap), not {test!r}')
    if seed < 1:
        raise ValueError(f"sacreBLEU reads seed {seed} as unseeded: give a positive seed")
    resamples = resamples or {"ar": 10_000, "bs": 1_000}[test]  # sacreBLEU's defaults
    _check_lengths(references, hyps_a, hyps_b, resamples)
    refs = [list(references)]
    bleu = BLEU()
    with _sacrebleu_seed(seed):
        _, scores = PairedTest([("B", list(hyps_b)), ("A", list(hyps_a))], {"BLEU": bleu}, refs, test_type=test,
                               n_samples=resamples)()
    baseline, system = scores["BLEU"]
    # The per-sentence statistics PairedTest itself resamples; the metric's private hooks are the ones
    # sacrebleu.significance calls.
    counts_a = np.array(bleu._extract_corpus_statistics(list(hyps_a), refs), dtype=float)
    counts_b = np.array(bleu._extract_corpus_statistics(list(hyps_b), refs), dtype=float)

    def score(sums: np.ndarray) -> np.ndarray:
        flat = sums.reshape(-1, sums.shape[-1])
        return np.array([bleu._compute_score_from_stats(row).score for row in flat]).reshape(sums.shape[:-1])

    low, high = _bootstrap_interval(counts_a, counts_b, score, resamples, np.random.default_rng(seed))
    differ = int(_differ(counts_a, counts_b).sum())
    return PairedResult(metric="bleu", n_items=len(references), items_differ=differ, score_a=float(system.score),
                        score_b=float(baseline.score), difference=float(system.score - baseline.score),
                        ci_low=low, ci_high=high, p_value=float(system.p_value) if differ else 1.0,
                        method="approximate randomization" if test == "ar" else "bootstrap resampling",
                        resamples=resamples)


def check_paired(a: Predictions, b: Predictions) -> None:
    """Raise :class:`ConfigError` unless ``a`` and ``b`` score the same items the same way.

    Same metric and tag scheme, as many items (at least 2), and the same gold item by item (the first
    difference is named).
    """
    if (a.metric, a.tag_scheme) != (b.metric, b.tag_scheme):
        raise ConfigError(f"{a.run} and {b.run} are scored differently on {a.split}: {a.metric} "
                          f"({a.tag_scheme or 'no tag scheme'}) and {b.metric} ({b.tag_scheme or 'no tag scheme'})")
    if len(a.gold) != len(b.gold):
        raise ConfigError(f"{a.run} and {b.run} are not scored on the same {a.split} items: {len(a.gold):,} and "
                          f"{len(b.gold):,} items")
    if len(a.gold) < 2:
        raise ConfigError(f"{a.path} holds {len(a.gold)} item(s): a paired test needs at least 2")
    for i, (x, y) in enumerate(zip(a.gold, b.gold)):
        if x != y:
            raise ConfigError(f"{a.run} and {b.run} are not scored on the same {a.split} items: item {i} is "
                              f"{reprlib.repr(x)} in {a.path} and {reprlib.repr(y)} in {b.path}")


def compare(a: Predictions, b: Predictions, *, resamples: int = 10_000) -> PairedResult:
    """Paired test of run A against run B on the same items (checked with :func:`check_paired`).

    BLEU goes to :func:`bleu_paired_test` (approximate randomization, seed 12345), every other metric
    to :func:`paired_test` (seed 0).

    Args:
        a, b: the two runs' predictions on one split (:func:`load_predictions`).
        resamples: randomization trials, and bootstrap resamples for the interval.
    """
    check_paired(a, b)
    if a.metric == "bleu":
        return bleu_paired_test(a.gold, a.pred, b.pred, resamples=resamples)
    return paired_test(a.gold, a.pred, b.pred, a.metric, tag_scheme=a.tag_scheme, resamples=resamples)


# ---------------------------------------------------------------------------------------------------
# Scores across seeds, and families of comparisons.


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
    """Welch's unequal-variance t-test (Welch, 1947), two-sided: ``scipy.stats.ttest_ind(equal_var=False)``.

    For scores across seeds (one score per run): does the difference of the means survive seed variance?

    Args:
        scores_a, scores_b: one score per run of A and of B (the two sides may differ in size).

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
    the adjusted values in the order of the raw ones (a hypothesis is rejected only if every smaller one
    is), capped at 1. Controls the family-wise error rate like Bonferroni, and rejects at least as much.
    Written here (five lines) rather than taken from ``statsmodels.stats.multitest``: statsmodels would
    be a heavy dependency for it.

    Args:
        pvalues: the family's raw p-values.
    """
    p = _check_pvalues(pvalues)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate((p.size - np.arange(p.size)) * p[order]))
    return adjusted.tolist()


def aso(scores_a: Sequence[float], scores_b: Sequence[float], *, seed: int = 0, confidence_level: float = 0.95,
        num_comparisons: int = 1, bootstrap_iterations: int = 1000) -> float:
    """Almost Stochastic Order (del Barrio et al., 2018; Dror et al., 2019): deepsig's ``aso``.

    Returns ``epsilon_min``, an upper bound (at ``confidence_level``) of how much A's score distribution
    violates stochastic dominance over B's: 0 when A is better everywhere, 1 when B is. Below 0.5, A is
    almost stochastically dominant; deepsig's authors (Ulmer et al., 2022) recommend reading below 0.2
    as a confident result, and reporting epsilon_min with the confidence level. No assumption on the
    scores' distribution; meant for scores across seeds (a few to a few dozen per side).

    Args:
        scores_a, scores_b: one score per run of A and of B, higher is better.
        seed: seed of deepsig's bootstrap; the same seed gives the same epsilon_min.
        confidence_level: deepsig's confidence level.
        num_comparisons: comparisons in the family; deepsig raises the confidence level accordingly
            (Bonferroni).
        bootstrap_iterations: deepsig's bootstrap iterations when estimating the violation ratio's spread.
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


# ---------------------------------------------------------------------------------------------------
# What a comparison could have detected: the smallest difference at a given power.

#: Power at which :func:`detectable_welch` and :func:`detectable_paired` give the smallest difference.
POWER = 0.8


def pooled_std(scores_a: Sequence[float], scores_b: Sequence[float]) -> float | None:
    """The two sides' sample variances pooled, ``sqrt(((na-1) va + (nb-1) vb) / (na + nb - 2))``: one
    per-seed spread for both sides of a comparison across seeds (None when a side has fewer than 2)."""
    a, b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
    if min(a.size, b.size) < 2:
        return None
    return float(np.sqrt(((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / (a.size + b.size - 2)))


def _welch_df(n_a: int, n_b: int) -> float:
    # Welch-Satterthwaite degrees of freedom when both sides have the same variance: n_a + n_b - 2
    # for equal sides, a little fewer for unequal ones.
    return (1 / n_a + 1 / n_b) ** 2 / (1 / (n_a**2 * (n_a - 1)) + 1 / (n_b**2 * (n_b - 1)))


def t_test_power(difference: float, std: float, n_a: int, n_b: int, *, alpha: float = ALPHA) -> float:
    """Power of the two-sided pooled-variance t-test of two means (Student's), for a true difference
    ``difference`` when every run's score has standard deviation ``std`` and the sides have ``n_a`` and
    ``n_b`` runs: the noncentral t (``scipy.stats.nct``) with ``n_a + n_b - 2`` degrees of freedom and
    noncentrality ``difference / (std * sqrt(1/n_a + 1/n_b))``, beyond either critical value
    ``t_{1 - alpha/2}``. The textbook figure (R's ``power.t.test``: 64 runs a side detect half a
    standard deviation with power 0.8015; Cohen 1988, Table 2.4.1)."""
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
    """Welch's rejection threshold ``t_{df^, 1 - alpha/2} * S / tau`` for unit-variance scores, on a
    ``grid x grid`` midpoint grid of the two sample variances' quantiles (each ``chi2(n - 1) / (n - 1)``):
    ``S = sqrt(va/n_a + vb/n_b)`` is the test's standard error, ``df^`` its Welch-Satterthwaite degrees
    of freedom from the same variances, ``tau = sqrt(1/n_a + 1/n_b)`` the true one."""
    from scipy import stats

    u = (np.arange(grid) + 0.5) / grid
    qa = (stats.chi2.ppf(u, n_a - 1) / (n_a - 1))[:, None] / n_a
    qb = (stats.chi2.ppf(u, n_b - 1) / (n_b - 1))[None, :] / n_b
    df = (qa + qb) ** 2 / (qa**2 / (n_a - 1) + qb**2 / (n_b - 1))
    return (stats.t.ppf(1 - alpha / 2, df) * np.sqrt(qa + qb) / np.sqrt(1 / n_a + 1 / n_b)).ravel()


def welch_power(difference: float, std: float, n_a: int, n_b: int, *, alpha: float = ALPHA) -> float:
    """Power of Welch's two-sided t-test (:func:`welch`) across seeds, for a true difference of means
    ``difference`` when every run's score is normal with standard deviation ``std`` on both sides, with
    ``n_a`` and ``n_b`` runs.

    Welch's test estimates its degrees of freedom from the two sample variances, so its power is not
    the noncentral t's of the pooled test (:func:`t_test_power`): with few runs it is lower (at 2 runs a
    side, the difference the pooled test finds with power 0.8 Welch's finds with 0.48; 0.70 at 3 runs,
    0.79 at 6; they agree as the runs grow). Computed exactly up to quadrature: given the sample
    variances, the difference of means is normal and independent of them, so the power is the mean,
    over a 400 x 400 grid of the variances' quantiles (:func:`_welch_thresholds`), of
    ``Phi(delta/tau - R) + Phi(-delta/tau - R)`` with ``R`` Welch's threshold over the true standard
    error ``tau``. Brute-force simulation agrees to 0.005 (``tests/test_stats.py``).
    """
    from scipy import stats

    _check_power_inputs(std, n_a, n_b)
    thresholds = _welch_thresholds(int(n_a), int(n_b), float(alpha))
    shift = difference / (std * np.sqrt(1 / n_a + 1 / n_b))
    return float((stats.norm.cdf(shift - thresholds) + stats.norm.cdf(-shift - thresholds)).mean())


def detectable_welch(std: float | None, n_a: int, n_b: int, *, alpha: float = ALPHA,
                     power: float = POWER) -> float | None:
    """The smallest difference of means (absolute, in the scores' points) that Welch's two-sided
    t-test across seeds detects with probability ``power`` at level ``alpha``, when each run's score
    varies with standard deviation ``std``: the root of :func:`welch_power` ``= power`` in the
    difference (``scipy.optimize.brentq``).

    For a comparison that was not significant across seeds, this tells "no effect" from "too few
    seeds": a true difference below it would usually be missed. ``std`` is the per-seed spread of
    both sides pooled (:func:`pooled_std`), an estimate from the same few runs. None when it cannot be
    said: fewer than 2 runs a side, or no spread (``std`` None or 0).
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
    """The smallest difference (absolute, in points) that a two-sided paired test on ``n`` items
    detects with probability ``power`` at level ``alpha``, by the normal approximation:
    ``(z_{1 - alpha/2} + z_power) * sd(d) / sqrt(n)`` (2.80 standard errors at 0.05 and 0.8), where
    ``d`` are the per-item paired differences (:func:`item_differences`) and ``sd`` their sample
    standard deviation. A paired randomization test on many items has about the power of this z-test.
    None for fewer than 2 items.
    """
    from scipy import stats

    d = np.asarray(differences, dtype=float)
    if d.size < 2:
        return None
    return float((stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) * d.std(ddof=1) / np.sqrt(d.size))


def _linearized(counts: np.ndarray, score: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Per item, its first-order (delta-method) contribution to ``score(counts.sum(axis=0))``:
    ``n * grad(score)(S) . x_i`` with ``S`` the summed counts, the gradient by central differences.
    For a score that is unchanged when every count is scaled (accuracy, span F1, BLEU) they average
    to 0, and for accuracy they are exactly 100 * (right or not) less the accuracy."""
    total = counts.sum(axis=0)
    steps = 1e-4 * np.maximum(np.abs(total), 1.0)
    shifted = np.concatenate([total + np.diag(steps), total - np.diag(steps)])
    values = np.asarray(score(shifted), dtype=float)
    k = total.size
    gradient = (values[:k] - values[k:]) / (2 * steps)
    return len(counts) * counts @ gradient


def item_differences(counts_a: np.ndarray, counts_b: np.ndarray, score: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Per item, A's minus B's linearized contribution to the score (:func:`_linearized`): for accuracy
    100 * (A right - B right), for span F1, token accuracy and BLEU their delta-method counterpart, whose
    standard deviation over sqrt(n) is the standard error of the difference of the corpus scores."""
    return _linearized(np.asarray(counts_a, dtype=float), score) - _linearized(np.asarray(counts_b, dtype=float), score)


def _smooth_bleu(sums: np.ndarray) -> np.ndarray:
    """Corpus BLEU (points) from summed sacreBLEU statistics ``(sys_len, ref_len, correct_1..4,
    total_1..4)`` along the last axis, as a smooth function of every count: sacreBLEU's own
    (``BLEU._compute_score_from_stats``) casts the lengths to int, which a numerical gradient cannot
    differentiate. Equal to sacreBLEU's score when every n-gram order has a match (any corpus)."""
    sys_len, ref_len = sums[..., 0], sums[..., 1]
    log_precision = np.log(sums[..., 2:6] / sums[..., 6:10]).mean(axis=-1)
    brevity = np.where(sys_len < ref_len, 1 - ref_len / sys_len, 0.0)
    return 100 * np.exp(log_precision + brevity)


def paired_differences(gold: Sequence, pred_a: Sequence, pred_b: Sequence, metric: str, *,
                       tag_scheme: str | None = None) -> np.ndarray:
    """:func:`item_differences` of two systems' predictions, counted as :func:`paired_test` (or, for
    ``bleu``, :func:`bleu_paired_test`: ``gold`` the references, the predictions the translations)
    counts them."""
    if metric == "bleu":
        from sacrebleu.metrics import BLEU

        bleu, refs = BLEU(), [list(gold)]
        counts_a = np.array(bleu._extract_corpus_statistics(list(pred_a), refs), dtype=float)
        counts_b = np.array(bleu._extract_corpus_statistics(list(pred_b), refs), dtype=float)

        return item_differences(counts_a, counts_b, _smooth_bleu)
    if metric not in _SCORES:
        raise ValueError(f"no per-item differences for metric {metric!r}")
    return item_differences(_counts(metric, tag_scheme, gold, pred_a), _counts(metric, tag_scheme, gold, pred_b),
                            _SCORES[metric])
