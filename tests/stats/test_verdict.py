"""cn3.stats.verdict: the levels against scipy's own figures, Holm within a family by hand, and the rule
on constructed records: every verdict, in both directions, and every edge (an interval touching the
paper's effect, a larger effect than the paper's, a missing level, a sign-only claim)."""

from __future__ import annotations

import pytest
from scipy import stats

from cn3.stats.verdict import (
    FAILS,
    FAILS_ON_ITEMS,
    HOLDS,
    HOLDS_ON_ITEMS,
    NO_SIGNAL,
    UNDECIDED,
    VERDICTS,
    WAITS,
    Level,
    adjust,
    item_level,
    judge,
    seed_level,
)

A, B = [80.0, 81.0, 82.5], [78.0, 79.0, 80.2]


def test_seed_level_is_welch_with_scipys_interval():
    level = seed_level(A, B, matched=True)
    reference = stats.ttest_ind(A, B, equal_var=False)
    low, high = reference.confidence_interval(0.95)
    assert level.difference == pytest.approx(sum(A) / 3 - sum(B) / 3)
    assert level.ci == pytest.approx((low, high))
    assert level.p == pytest.approx(reference.pvalue) and level.p_holm == level.p
    assert level.p_paired == pytest.approx(stats.ttest_rel(A, B).pvalue)
    assert level.n == 3 and level.detectable > abs(level.difference)  # not significant: it could not see 2.1


def test_seed_level_needs_two_seeds_and_a_spread():
    assert seed_level([80.0], [79.0, 78.0]) is None
    assert seed_level([80.0, 80.0], [79.0, 79.0]) is None
    assert seed_level([80.0, 81.0], [79.0, 79.5]).p_paired is None  # not matched: no paired test


def test_item_level_reads_a_reports_test():
    level = item_level(1.5, [0.2, 2.8], 0.01, detectable=1.1, n=1500)
    assert (level.difference, level.ci, level.p, level.p_holm, level.detectable, level.n) == (
        1.5, (0.2, 2.8), 0.01, 0.01, 1.1, 1500)


def test_holm_within_the_family_skips_missing_levels():
    family = [item_level(1, (0, 2), 0.01), None, item_level(1, (0, 2), 0.04), item_level(1, (0, 2), 0.03)]
    adjusted = adjust(family)
    assert adjusted[1] is None
    assert [lv.p for lv in (adjusted[0], adjusted[2], adjusted[3])] == [0.01, 0.04, 0.03]
    # by hand: 0.01 * 3 = 0.03; 0.03 * 2 = 0.06; 0.04 * 1 = 0.04, raised to the running max 0.06
    assert [adjusted[i].p_holm for i in (0, 2, 3)] == pytest.approx([0.03, 0.06, 0.06])


def lv(difference: float, low: float, high: float, p: float, detectable: float | None = None) -> Level:
    return Level(difference, (low, high), p, detectable=detectable)


@pytest.mark.parametrize("sign", [1, -1], ids=["A>B", "A<B"])
@pytest.mark.parametrize("case, paper, item, seed, expected", [
    ("both levels significant, paper's sign", 2.0, (1.5, 0.5, 2.5, 0.001), (1.6, 0.2, 3.0, 0.01), HOLDS),
    ("smaller than the paper's, both significant", 3.7, (2.3, 1.9, 2.7, 0.0002), (2.3, 1.0, 3.6, 0.007), HOLDS),
    ("larger than the paper's, items only", 0.5, (1.4, 1.0, 1.8, 0.0001), (1.4, -0.5, 3.3, 0.09), HOLDS_ON_ITEMS),
    ("items significant, seeds span the effect", 2.0, (2.4, 1.8, 3.0, 0.0002), (2.4, -2.0, 6.8, 0.2), HOLDS_ON_ITEMS),
    ("smaller than the paper's, items only", 3.6, (0.99, 0.64, 1.34, 0.0002), (0.99, -0.46, 2.45, 0.13),
     HOLDS_ON_ITEMS),
    ("the direction before the size", 3.7, (2.3, 1.9, 2.7, 0.0002), (2.3, 1.3, 3.3, 0.072), HOLDS_ON_ITEMS),
    ("no difference, both exclude the effect", 1.0, (0.0, -0.2, 0.2, 0.8), (0.0, -0.5, 0.5, 0.9), FAILS),
    ("the other sign significant at both", 0.1, (-0.8, -1.2, -0.4, 0.0001), (-0.8, -1.5, -0.1, 0.03), FAILS),
    ("items exclude, seeds contain the effect", 1.1, (0.35, -0.02, 0.73, 0.06), (0.35, -1.0, 1.7, 0.5),
     FAILS_ON_ITEMS),
    ("the other sign on items only", 1.0, (-0.4, -0.6, -0.2, 0.0002), (-0.4, -1.2, 2.0, 0.1), FAILS_ON_ITEMS),
    ("both contain the effect", 0.2, (0.1, -0.3, 0.5, 0.6, ), (0.1, -0.6, 0.8, 0.7), UNDECIDED),
    ("items' interval touches the effect", 1.7, (0.44, -0.82, 1.7, 0.56), (0.44, -0.8, 1.7, 0.5), UNDECIDED),
])
def test_the_rule(sign, case, paper, item, seed, expected):
    """The same records mirrored (A and B swapped, the paper's effect too) get the same verdict."""
    def mirrored(d, lo, hi, p):
        return lv(d, lo, hi, p) if sign > 0 else lv(-d, -hi, -lo, p)
    verdict = judge(sign * paper, mirrored(*item), mirrored(*seed))
    assert verdict.verdict == expected, (case, verdict)


def test_an_interval_just_short_of_the_effect_excludes_it():
    """The issue's SST-2 case: +1.7 against an upper bound of 1.6957 is excluded; at 1.7 it is not."""
    short = judge(1.7, lv(0.44, -0.82, 1.6957, 0.56), lv(0.43, -1.5, 1.69, 0.49))
    touching = judge(1.7, lv(0.44, -0.82, 1.7, 0.56), lv(0.43, -1.5, 1.69, 0.49))
    assert (short.verdict, touching.verdict) == (FAILS, UNDECIDED)


def test_significance_is_judged_on_holms_p_at_the_edge():
    item = Level(1.0, (0.1, 1.9), 0.02, p_holm=0.05)
    assert judge(1.0, item, Level(1.0, (0.1, 1.9), 0.04, p_holm=0.05)).verdict == HOLDS  # p <= alpha
    assert judge(1.0, item, Level(1.0, (0.1, 1.9), 0.04, p_holm=0.0501)).verdict == HOLDS_ON_ITEMS
    assert judge(1.0, Level(1.0, (0.1, 1.9), 0.02, p_holm=0.06), None).verdict == UNDECIDED


def test_undecided_keeps_what_each_level_could_detect():
    verdict = judge(0.18, lv(0.11, -0.29, 0.51, 0.57, 0.57), lv(0.11, -0.6, 0.8, 0.68, 0.85))
    assert verdict.verdict == UNDECIDED and verdict.detectable == (0.57, 0.85)


def test_a_sign_only_claim_fails_only_by_the_other_sign():
    below = (lv(-1.0, -1.5, -0.5, 0.0001), lv(-1.0, -1.6, -0.4, 0.004))
    assert judge(None, *below, sign=-1).verdict == HOLDS
    assert judge(None, *below, sign=1).verdict == FAILS
    assert judge(None, lv(0.1, -0.2, 0.4, 0.5), lv(0.1, -0.5, 0.7, 0.6), sign=1).verdict == UNDECIDED
    with pytest.raises(ValueError, match="paper's sign"):
        judge(None, *below)
    with pytest.raises(ValueError, match="paper's sign"):
        judge(0.0, *below)


def test_waits_no_signal_and_a_missing_level():
    assert judge(1.0, None, None).verdict == WAITS
    undecided = (lv(0.3, -0.1, 0.7, 0.1), lv(0.3, -1.0, 1.6, 0.5))
    assert judge(1.0, *undecided, waits=True).verdict == WAITS
    items_only = (lv(0.9, 0.4, 1.5, 0.0009), lv(0.9, -0.6, 2.4, 0.16))
    assert judge(0.13, *items_only, waits=True).verdict == WAITS  # "on items" waits for the seeds
    decided = (lv(1.9, 1.3, 2.5, 0.0001), lv(1.9, 0.6, 3.2, 0.016))
    assert judge(-0.08, *decided, waits=True).verdict == FAILS  # refuted at both: more seeds change nothing
    assert judge(29.2, lv(0.5, -3.6, 4.5, 0.84), lv(0.8, -9, 10, 0.67), no_signal=True).verdict == NO_SIGNAL
    assert judge(1.0, lv(1.0, 0.5, 1.5, 0.001), None).verdict == HOLDS_ON_ITEMS
    assert set(VERDICTS) == {HOLDS, HOLDS_ON_ITEMS, FAILS, FAILS_ON_ITEMS, UNDECIDED, NO_SIGNAL, WAITS}
