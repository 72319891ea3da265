"""Per-item counts whose sums give a corpus-level score: ``score(counts.sum(axis=items))``.

Accuracy and token accuracy: (right, total) per item; span F1: (true positives, predicted spans,
gold spans) per sentence. So a metric that is not a mean over items is still a function of summed
per-item counts, which resampling tests need (:mod:`cn3.stats.paired`). Scored exactly as
:mod:`cn3.metrics` scores them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def _percent(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    # As cn3.metrics: correct / max(total, 1), times 100 afterwards.
    return 100 * (numerator / np.maximum(denominator, 1))


def _f1(counts: np.ndarray) -> np.ndarray:
    """Micro F1 in points from summed (true positives, predicted spans, gold spans): 2tp / (pred + gold),
    which is seqeval's 2PR / (P + R), and 0 when there are no spans at all (seqeval's zero_division=0)."""
    tp, predicted, gold = counts[..., 0], counts[..., 1], counts[..., 2]
    spans = predicted + gold
    return 100 * np.divide(2 * tp, spans, out=np.zeros(np.shape(spans)), where=spans > 0)


SCORES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "accuracy": lambda c: _percent(c[..., 0], c[..., 1]),
    "token_accuracy": lambda c: _percent(c[..., 0], c[..., 1]),
    "span_f1": _f1,
}


def item_counts(metric: str, tag_scheme: str | None, gold: Sequence, pred: Sequence) -> np.ndarray:
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
