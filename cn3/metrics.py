"""Scores: accuracy for classification, token accuracy for POS, span F1 for chunking and NER.

Span F1 is seqeval's strict mode with the dataset's tag scheme (BIOES or IOB2), which matches
conlleval on well-formed sequences.
"""

from __future__ import annotations

from collections import Counter


def accuracy(gold: list, pred: list) -> float:
    return sum(g == p for g, p in zip(gold, pred)) / max(len(gold), 1)


def token_accuracy(gold: list[list[str]], pred: list[list[str]]) -> float:
    pairs = [(g, p) for gs, ps in zip(gold, pred) for g, p in zip(gs, ps)]
    return sum(g == p for g, p in pairs) / max(len(pairs), 1)


def span_f1(gold: list[list[str]], pred: list[list[str]], scheme: str) -> dict:
    """Micro precision/recall/F1 over entity spans and a per-type report (percentages)."""
    from seqeval.metrics import classification_report, f1_score, precision_score, recall_score
    from seqeval.scheme import BILOU, IOB2, IOBES

    mode = {"BIOES": IOBES, "IOBES": IOBES, "IOB2": IOB2, "BILOU": BILOU}[scheme.upper()]
    kwargs = {"mode": "strict", "scheme": mode}
    report = classification_report(gold, pred, output_dict=True, zero_division=0, **kwargs)
    return {
        "f1": 100 * f1_score(gold, pred, **kwargs),
        "precision": 100 * precision_score(gold, pred, **kwargs),
        "recall": 100 * recall_score(gold, pred, **kwargs),
        "per_label": {label: {"precision": 100 * d["precision"], "recall": 100 * d["recall"],
                              "f1": 100 * d["f1-score"], "support": int(d["support"])}
                      for label, d in report.items() if not label.endswith("avg")},
    }


def per_label_report(gold: list[str], pred: list[str]) -> dict:
    """Precision, recall, F1 (percent) and support for each label."""
    labels = sorted(set(gold) | set(pred))
    tp = Counter(g for g, p in zip(gold, pred) if g == p)
    n_gold, n_pred = Counter(gold), Counter(pred)
    report = {}
    for label in labels:
        p = tp[label] / n_pred[label] if n_pred[label] else 0.0
        r = tp[label] / n_gold[label] if n_gold[label] else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        report[label] = {"precision": 100 * p, "recall": 100 * r, "f1": 100 * f, "support": n_gold[label]}
    return report


def score(level: str, tag_scheme: str | None, gold, pred) -> dict:
    """The task's main metric under ``"score"`` (higher is better) with its name and details.

    ``gold``/``pred``: label strings per item (graph/pair) or tag-string lists per sentence (node).
    """
    if level != "node":
        return {"metric": "accuracy", "score": 100 * accuracy(gold, pred), "per_label": per_label_report(gold, pred)}
    if tag_scheme:
        result = span_f1(gold, pred, tag_scheme)
        return {"metric": "span_f1", "score": result["f1"], **result}
    flat_gold = [t for s in gold for t in s]
    flat_pred = [t for s in pred for t in s]
    return {"metric": "token_accuracy", "score": 100 * token_accuracy(gold, pred),
            "per_label": per_label_report(flat_gold, flat_pred)}
