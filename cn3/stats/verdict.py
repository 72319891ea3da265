"""Does a paper's claim reproduce? One rule, applied the same way in both directions.

A claim compares A with B and the paper reports an effect ``e = A - B`` (or only its sign). cn3's records
give two levels of evidence, each with a 95% interval and a p-value adjusted by Holm within the claim's
family (the sub-claims judged together, e.g. one claim over four tasks):

* the item level: the paired test on the items of the matched seeds pooled (approximate randomization
  or sacreBLEU's paired test, with the paired bootstrap interval), :func:`item_level`;
* the seed level: one score per seed, Welch's t-test and its interval (and a t-test paired by seed where
  the seeds are matched, reported beside it), :func:`seed_level`.

The verdict (:func:`judge`), from a fixed vocabulary, :data:`VERDICTS`, the first that applies (the
claim's direction first, then the paper's effect size):

* **holds**: the paper's sign, significant at both levels;
* **holds on items**: the paper's sign, significant at the item level but not across seeds;
* **does not hold**: the item level does not have the paper's sign significant, and both levels' intervals exclude
  the paper's effect on zero's side (strictly: an interval that touches it does not exclude it; one
  wholly beyond it, a larger effect of the paper's sign, does not refute), or the opposite sign is
  significant at both levels;
* **does not hold on items**: the same at the item level only (the mirror of "holds on items");
* **undecided**: none of these; :class:`Verdict` keeps the differences each level could have detected;
* **no signal**: the measurement itself reads chance for every system compared (a probe at chance),
  so its difference says nothing about the claim;
* **waits**: the records lack the comparison, or it pools fewer seeds than planned and is not decided.

"Significant" is ``p_holm <= alpha`` (``alpha`` 0.05). A sign-only claim (the paper prints no number) has
no effect to exclude: it does not hold only by the opposite sign, significant at both levels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from cn3.stats.across_seeds import welch
from cn3.stats.corrections import holm
from cn3.stats.power import detectable_across_seeds
from cn3.stats.result import ALPHA

HOLDS, HOLDS_ON_ITEMS = "holds", "holds on items"
FAILS, FAILS_ON_ITEMS = "does not hold", "does not hold on items"
UNDECIDED, NO_SIGNAL, WAITS = "undecided", "no signal", "waits"
#: Every verdict :func:`judge` returns, strongest first.
VERDICTS = (HOLDS, HOLDS_ON_ITEMS, FAILS, FAILS_ON_ITEMS, UNDECIDED, NO_SIGNAL, WAITS)


@dataclass(frozen=True)
class Level:
    """One level of evidence for ``A - B``, in the metric's points.

    Attributes:
        difference: cn3's effect, A's score minus B's.
        ci: its 95% interval ``(low, high)``.
        p: the raw two-sided p-value.
        p_holm: p adjusted by Holm within the claim's family (:func:`adjust`); ``p`` until then.
        detectable: the smallest difference the test detects with power 0.8 (None: unknown).
        n: items (item level) or seeds a side (seed level) the test pooled.
        p_paired: seed level only: the t-test paired by seed, where the seeds are matched.
    """

    difference: float
    ci: tuple[float, float]
    p: float
    p_holm: float | None = None
    detectable: float | None = None
    n: int | None = None
    p_paired: float | None = None

    def __post_init__(self) -> None:
        if self.p_holm is None:
            object.__setattr__(self, "p_holm", self.p)

    def significant(self, alpha: float = ALPHA) -> bool:
        return self.p_holm <= alpha

    def excludes(self, effect: float) -> bool:
        """Whether the interval leaves ``effect`` out, strictly (touching it keeps it in)."""
        return effect < self.ci[0] or effect > self.ci[1]

    def short_of(self, effect: float) -> bool:
        """Whether the whole interval lies on zero's side of a nonzero ``effect``, strictly: the effect is
        smaller than the paper's, or of the other sign. (An interval wholly beyond the paper's effect, a
        larger effect of the paper's sign, does not refute the claim.)"""
        return self.ci[1] < effect if effect > 0 else self.ci[0] > effect


def item_level(difference: float, ci: Sequence[float], p: float, detectable: float | None = None,
               n: int | None = None) -> Level:
    """The item level from a paired test's record (:func:`cn3.stats.paired_test`, ``report.json``'s
    ``test``: ``difference``, ``ci95``, ``p``, ``detectable``, ``items``)."""
    return Level(float(difference), (float(ci[0]), float(ci[1])), float(p), detectable=detectable, n=n)


def seed_level(scores_a: Sequence[float], scores_b: Sequence[float], *, matched: bool = False,
               detectable: bool = True) -> Level | None:
    """The seed level from one score per seed of A and of B: Welch's t-test (``cn3.stats.welch``), its
    95% interval of the difference of means (Welch-Satterthwaite degrees of freedom) and the difference
    it could detect; with ``matched`` (``scores_a[i]`` and ``scores_b[i]`` the same seed) also the
    t-test paired by seed. ``detectable=False`` skips the detectable difference (a root search, the
    slow part), for a caller that needs it only where the verdict is undecided.

    Returns:
        None when Welch's test cannot run (fewer than 2 seeds a side, or no spread on either side).
    """
    from scipy import stats

    a, b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
    result = welch(a, b)
    if result.p is None:
        return None
    difference = float(a.mean() - b.mean())
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    half = float(stats.t.ppf(0.975, result.df)) * se
    paired = None
    if matched and a.size == b.size and a.size >= 2 and np.ptp(a - b) > 0:
        paired = float(stats.ttest_rel(a, b).pvalue)
    return Level(difference, (difference - half, difference + half), result.p,
                 detectable=detectable_across_seeds(a, b) if detectable else None, n=min(a.size, b.size),
                 p_paired=paired)


def adjust(levels: Sequence[Level | None]) -> list[Level | None]:
    """Holm within a family: each level's ``p_holm`` from the raw ``p`` of every level present."""
    present = [i for i, level in enumerate(levels) if level is not None]
    adjusted = holm([levels[i].p for i in present]) if present else []
    out = list(levels)
    for i, p in zip(present, adjusted):
        out[i] = replace(levels[i], p_holm=float(p))
    return out


@dataclass(frozen=True)
class Verdict:
    """A verdict of :data:`VERDICTS` and why: ``reason`` in words; ``detectable`` the item and seed
    levels' detectable differences (for "undecided")."""

    verdict: str
    reason: str
    detectable: tuple[float | None, float | None] = (None, None)


def _refuted(level: Level, paper: float | None, sign: int, alpha: float) -> bool:
    """The level's interval excludes the paper's effect, or the opposite sign is significant."""
    opposite = level.significant(alpha) and np.sign(level.difference) == -sign
    return bool(opposite or (paper is not None and level.short_of(paper)))


def judge(paper: float | None, item: Level | None, seed: Level | None, *, sign: int | None = None,
          alpha: float = ALPHA, no_signal: bool = False, waits: bool = False) -> Verdict:
    """The verdict of one sub-claim (see the module docstring for the rule).

    Args:
        paper: the paper's effect ``A - B``; None for a claim the paper states by sign only.
        item, seed: the two levels (Holm-adjusted within the family); None where a level is missing.
        sign: the paper's sign (+1 or -1) when ``paper`` is None.
        alpha: the significance level.
        no_signal: the measurement reads chance for every system compared.
        waits: more seeds are planned than the levels pool.

    Raises:
        ValueError: neither ``paper`` nor ``sign``, or a paper's effect of 0 (no direction to test).
    """
    direction = int(np.sign(paper)) if paper is not None else sign
    if direction not in (1, -1):
        raise ValueError(f"a claim needs the paper's sign: effect {paper!r}, sign {sign!r}")
    if item is None and seed is None:
        return Verdict(WAITS, "no comparison in the records yet")
    if no_signal:
        return Verdict(NO_SIGNAL, "every system compared reads chance on this measurement")
    detectable = (item.detectable if item else None, seed.detectable if seed else None)
    levels = [lv for lv in (item, seed) if lv is not None]
    agrees = [bool(lv.significant(alpha) and np.sign(lv.difference) == direction) for lv in levels]
    refuted = [_refuted(lv, paper, direction, alpha) for lv in levels]
    both = item is not None and seed is not None
    if both and all(agrees):
        return Verdict(HOLDS, "the paper's sign, significant on items and across seeds", detectable)
    if item is not None and agrees[0]:
        if waits:
            return Verdict(WAITS, "the paper's sign on items; the planned seeds are not all in", detectable)
        return Verdict(HOLDS_ON_ITEMS, "the paper's sign, significant on items only", detectable)
    if both and all(refuted):
        return Verdict(FAILS, "refuted on items and across seeds", detectable)
    if not waits and item is not None and refuted[0]:
        return Verdict(FAILS_ON_ITEMS, "refuted on items only", detectable)
    if waits:
        return Verdict(WAITS, "not decided on the seeds so far; more are planned", detectable)
    return Verdict(UNDECIDED, "neither level decides", detectable)
