"""Does encoder A keep a property better than encoder B? Paired tests between ``cn3 probe`` outputs.

Two probes of the same tasks scored the same test items (``probe.json``'s ``test_gold`` and
``test_predictions``), so per task:

* **paired approximate randomization** on the items' correctness (:func:`cn3.stats.paired_test`),
  A's i-th probe paired with B's i-th (matched seeds) and their items concatenated, with a 95%
  paired bootstrap interval;
* **Welch's t-test** on the runs' test accuracies (2 runs a side or more);
* **Holm's correction** over the tasks compared, each kind of test apart.

Both sides may be the same directories with different feature sets (``H_onlstm`` against ``H_san``,
Hao et al. Table 3). A probe record without predictions counts for the means and Welch's test only;
the paired test says how many pairs it pooled. Bad inputs raise :class:`~cn3.config.ConfigError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cn3.config import ConfigError


@dataclass
class ProbeSide:
    """One side of a comparison: probe records of one encoder (one per run, in seed order) and the
    feature set compared."""

    paths: list[Path]
    records: list[dict]
    features: str

    def task(self, index: int, name: str) -> dict:
        return next(t for t in self.records[index]["tasks"] if t["task"] == name)

    def accuracy(self, index: int, name: str) -> float:
        return 100 * self.task(index, name)["features"][self.features]["test_accuracy"]

    def has_predictions(self, index: int, name: str) -> bool:
        task = self.task(index, name)
        return "test_gold" in task and "test_predictions" in task["features"][self.features]


def load_probe(path: Path) -> dict:
    """A ``probe.json`` (or a directory holding one), checked to be a ``cn3 probe`` record."""
    file = path / "probe.json" if path.is_dir() else path
    if not file.is_file():
        raise ConfigError(f"{path}: no probe.json (write one with `cn3 probe RUN --out {path}`)")
    try:
        record = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"{file}: not a readable probe record ({err})") from None
    if not isinstance(record, dict) or not isinstance(record.get("tasks"), list) or "feature_sets" not in record:
        raise ConfigError(f"{file}: not a `cn3 probe` record (no tasks or feature_sets)")
    return record


def probe_side(paths: list[Path], features: str | None) -> ProbeSide:
    """Load ``paths``; ``features`` None means each record's first feature set (``sentence`` or
    ``encoder``), which must then be the same in all."""
    records = [load_probe(p) for p in paths]
    name = features or next(iter(records[0]["feature_sets"]))
    for path, record in zip(paths, records):
        if name not in record["feature_sets"]:
            raise ConfigError(f"{path}: no feature set {name!r} (it has {', '.join(record['feature_sets'])})")
    return ProbeSide(list(paths), records, name)


def compare_probes(a: ProbeSide, b: ProbeSide, resamples: int = 10_000, seed: int = 0) -> dict:
    """Every task both sides probed: each side's mean ± std of test accuracy, the pooled paired test and
    Welch's test of A against B, Holm-adjusted over the tasks. Accuracies in points (0-100).

    Raises:
        ConfigError: sides of different sizes, the same probes and features on both sides, no task in
            common, or a pair of probes that scored different test items.
    """
    from cn3.stats import holm, mean_std, paired_test, welch

    if len(a.records) != len(b.records):
        raise ConfigError(f"A has {len(a.records)} probes and B {len(b.records)}: probes are paired in order "
                          "(seed s of A with seed s of B), so give as many of each")
    if [p.resolve() for p in a.paths] == [p.resolve() for p in b.paths] and a.features == b.features:
        raise ConfigError(f"A and B are the same probes and feature set ({a.features}): nothing to compare")
    names = [t["task"] for t in a.records[0]["tasks"]]
    common = [n for n in names if all(any(t["task"] == n for t in r["tasks"]) for r in a.records + b.records)]
    if not common:
        raise ConfigError("A's and B's probes have no task in common")
    rows = []
    for name in common:
        acc_a = [a.accuracy(i, name) for i in range(len(a.records))]
        acc_b = [b.accuracy(i, name) for i in range(len(b.records))]
        (mean_a, std_a), (mean_b, std_b) = mean_std(acc_a), mean_std(acc_b)
        row = {"task": name, "group": a.task(0, name)["group"], "runs": len(acc_a), "a": acc_a, "b": acc_b,
               "mean_a": mean_a, "mean_b": mean_b, "std_a": std_a, "std_b": std_b}
        gold, pred_a, pred_b, pairs = [], [], [], []
        for i in range(len(a.records)):
            if not (a.has_predictions(i, name) and b.has_predictions(i, name)):
                continue
            task_a, task_b = a.task(i, name), b.task(i, name)
            if task_a["test_gold"] != task_b["test_gold"]:
                raise ConfigError(f"{name}: {a.paths[i]} and {b.paths[i]} scored different test items "
                                  "(probing data of another version, or --limit)")
            gold += task_a["test_gold"]
            pred_a += task_a["features"][a.features]["test_predictions"]
            pred_b += task_b["features"][b.features]["test_predictions"]
            pairs.append(i + 1)
        if len(gold) >= 2:
            result = paired_test(gold, pred_a, pred_b, "accuracy", resamples=resamples, seed=seed)
            row["paired"] = {"pairs": pairs, "items": result.n_items, "difference": result.difference,
                             "ci95": [result.ci_low, result.ci_high], "p": result.p_value, "method": result.method}
        w = welch(acc_a, acc_b)
        if w.p is not None:
            row["welch_p"] = w.p
        rows.append(row)
    paired = [r for r in rows if "paired" in r]
    for row, adjusted in zip(paired, holm([r["paired"]["p"] for r in paired])):
        row["paired"]["p_holm"] = adjusted
    across = [r for r in rows if "welch_p" in r]
    for row, adjusted in zip(across, holm([r["welch_p"] for r in across])):
        row["welch_p_holm"] = adjusted
    return {"a": {"probes": [str(p) for p in a.paths], "features": a.features},
            "b": {"probes": [str(p) for p in b.paths], "features": b.features},
            "correction": "Holm over the tasks, paired and Welch p-values adjusted apart", "tasks": rows}
