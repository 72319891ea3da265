"""Two runs' predictions on the same items -> the paired test their metric takes (:func:`compare`)."""

from __future__ import annotations

import reprlib
from typing import TYPE_CHECKING

from cn3.config import ConfigError
from cn3.stats.bleu import bleu_paired_test
from cn3.stats.paired import paired_test
from cn3.stats.result import PairedResult

if TYPE_CHECKING:
    from cn3.runs.records import Predictions


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
        a, b: the two runs' predictions on one split (:func:`cn3.runs.records.load_predictions`).
        resamples: randomization trials, and bootstrap resamples for the interval.
    """
    check_paired(a, b)
    if a.metric == "bleu":
        return bleu_paired_test(a.gold, a.pred, b.pred, resamples=resamples)
    return paired_test(a.gold, a.pred, b.pred, a.metric, tag_scheme=a.tag_scheme, resamples=resamples)
