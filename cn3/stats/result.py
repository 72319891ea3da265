"""What a paired test of two systems returns, and how it reads in a sentence."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Significance level of :meth:`PairedResult.sentence`.
ALPHA = 0.05

#: Metric names as ``results.json`` records them, and as a sentence says them.
METRIC_WORDS = {"accuracy": "accuracy", "token_accuracy": "token accuracy", "span_f1": "span F1", "bleu": "BLEU"}


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
