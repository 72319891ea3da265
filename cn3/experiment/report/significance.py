"""The tests of a report, every variant against the baseline, on the whole split
(:func:`significance`) or per group of items (:func:`grouped_significance`): the pooled paired test
(:func:`pooled_test`), Welch's t-test across seeds (:func:`add_welch`), Holm's correction (:func:`holm_adjust`).
"""

from __future__ import annotations

from collections.abc import Iterable

from cn3.experiment.report.collect import GroupedColumn, TaskColumn, cell_predictions
from cn3.experiment.spec import ExperimentSpec
from cn3.runs.records import Predictions
from cn3.stats import (
    bleu_paired_test,
    detectable_across_seeds,
    detectable_paired,
    holm,
    paired_differences,
    paired_test,
    welch,
)


def pooled_test(pairs: dict[int, tuple[Predictions, Predictions]], metric: str, resamples: int,
                items: dict[int, list[int]] | None = None, detectable: bool = False) -> dict:
    """The paired test of A against B on their seeds' predictions pooled (``pairs``: seed -> ``(A's, B's)``);
    ``items``: per seed, the item indices to test (None: all); ``detectable``: also the smallest
    detectable difference (:func:`cn3.stats.detectable_paired`).
    """
    gold, pred_a, pred_b = [], [], []
    for seed, (a, b) in sorted(pairs.items()):
        if a.gold != b.gold:
            return {"error": f"seed {seed}: the two runs scored different items"}
        idx = range(len(a.gold)) if items is None else items[seed]
        gold += [a.gold[i] for i in idx]
        pred_a += [a.pred[i] for i in idx]
        pred_b += [b.pred[i] for i in idx]
    if len(gold) < 2:
        return {"error": "fewer than 2 items"}
    if metric == "bleu":
        result = bleu_paired_test(gold, pred_a, pred_b)
    else:
        result = paired_test(gold, pred_a, pred_b, metric, tag_scheme=a.tag_scheme, resamples=resamples)
    out = {"seeds": sorted(pairs), "difference": result.difference, "ci95": [result.ci_low, result.ci_high],
           "p": result.p_value, "method": result.method, "items": result.n_items}
    if detectable:
        out["detectable"] = detectable_paired(paired_differences(gold, pred_a, pred_b, metric, tag_scheme=a.tag_scheme))
    return out


def add_welch(test: dict, seeds: dict[int, float], baseline_seeds: dict[int, float], detectable: bool = False) -> None:
    """``test["welch_p"]``: Welch's t-test on the per-seed scores (2 seeds a side or more); with
    ``detectable``, also ``test["welch_detectable"]`` (:func:`cn3.stats.detectable_across_seeds`).
    """
    if len(seeds) >= 2 and len(baseline_seeds) >= 2:
        test["welch_p"] = welch(list(seeds.values()), list(baseline_seeds.values()))[1]
        if detectable:
            test["welch_detectable"] = detectable_across_seeds(list(seeds.values()), list(baseline_seeds.values()))


def holm_adjust(tests: Iterable[dict]) -> None:
    """``test["p_holm"]``: the paired p-values of one family of tests Holm-adjusted together (the tests
    that failed, with no ``p``, are left out of the family)."""
    tested = [test for test in tests if "p" in test]
    for test, adjusted in zip(tested, holm([test["p"] for test in tested])):
        test["p_holm"] = adjusted


def significance(spec: ExperimentSpec, columns: dict[str, TaskColumn], resamples: int = 10_000) -> None:
    """Fill ``column.tests``: paired and Welch tests of every variant against the baseline, the paired p
    Holm-adjusted over each variant's tasks (a variant is one claim tested on several tasks).
    """
    for column in columns.values():
        if column.metric is None or spec.baseline not in column.scores:
            continue
        base = column.runs[spec.baseline]
        for variant in spec.variants:
            if variant == spec.baseline or variant not in column.scores:
                continue
            runs = column.runs[variant]
            seeds = sorted(set(runs) & set(base))
            if seeds:
                pairs = {seed: (cell_predictions(runs[seed], column.split), cell_predictions(base[seed], column.split))
                         for seed in seeds}
                test = pooled_test(pairs, column.metric, resamples, detectable=True)
            else:
                test = {"error": "no seed finished for both"}
            add_welch(test, column.scores[variant], column.scores[spec.baseline], detectable=True)
            column.tests[variant] = test
    for variant in spec.variants:
        holm_adjust(column.tests[variant] for column in columns.values() if variant in column.tests)


def grouped_significance(spec: ExperimentSpec, grouped: dict[str, GroupedColumn], resamples: int = 10_000) -> None:
    """Fill ``column.tests`` per group: the pooled paired test of every variant against the baseline on the
    group's items, Holm-adjusted over the groups of each variant and task, and Welch's t-test on the
    per-seed group scores.
    """
    for column in grouped.values():
        base = column.runs.get(spec.baseline, {})
        for variant, runs in column.runs.items():
            seeds = sorted(set(runs) & set(base))
            if variant == spec.baseline or not seeds:
                continue
            pairs = {seed: (runs[seed][1], base[seed][1]) for seed in seeds}
            tests = {label: pooled_test(pairs, column.metric, resamples,
                                        {seed: runs[seed][0].get(label, []) for seed in seeds})
                     for label in column.groups}
            holm_adjust(tests.values())
            for label, test in tests.items():
                if "p" in test:
                    add_welch(test, column.scores.get(variant, {}).get(label, {}),
                              column.scores.get(spec.baseline, {}).get(label, {}))
            column.tests[variant] = tests
