"""``cn3 experiment report``: the grid's table, mean ± std over seeds, with significance against the baseline.

Per task the score is the test split's when every finished cell of the task has one, else dev's
(SST here has no test labels), and BLEU on ``test2016`` (else ``val``) for translation; the header
names the split. For each variant against the baseline, per task:

* a **paired test** on per-example predictions (``RUN/predictions/<split>.jsonl``), the seeds both
  have pooled (seed s of the variant paired with seed s of the baseline on the same items):
  approximate randomization for accuracy, span F1 and token accuracy, sacreBLEU's paired test for
  BLEU (:mod:`cn3.stats`), with the 95% bootstrap interval of the difference;
* **Welch's t-test across seeds** on the per-seed scores (needs 2 seeds a side), which asks whether
  the difference survives seed variance;
* **Holm's correction** of each variant's paired p-values over the tasks it is tested on (a variant
  is one claim tested on several tasks); both raw and adjusted p are reported.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from cn3.experiment.spec import Cell, ExperimentSpec

ALPHA = 0.05
PREFERRED_SPLITS = ("test", "test2016", "dev", "val")


@dataclass
class TaskColumn:
    """One task's results: the split and metric scored, and per variant the per-seed scores."""

    task: str
    split: str | None = None
    metric: str | None = None
    scores: dict[str, dict[int, float]] = field(default_factory=dict)  # variant -> seed -> score
    runs: dict[str, dict[int, Path]] = field(default_factory=dict)  # variant -> seed -> run dir
    tests: dict[str, dict] = field(default_factory=dict)  # variant -> significance against the baseline


def _results(cell: Cell) -> dict | None:
    path = cell.run_dir / "results.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _value(entry: dict) -> float | None:
    return entry.get("score", entry.get("bleu"))


def collect(cells: list[Cell]) -> dict[str, TaskColumn]:
    """Finished cells grouped by task, each task scored on the split all its cells have."""
    columns: dict[str, TaskColumn] = {}
    finished: dict[str, list[tuple[Cell, dict]]] = {}
    for cell in cells:
        columns.setdefault(cell.task, TaskColumn(cell.task))
        results = _results(cell)
        if results is not None:
            finished.setdefault(cell.task, []).append((cell, results))
    for task, items in finished.items():
        column = columns[task]
        common = set.intersection(*(set(r["scores"]) for _, r in items))
        column.split = next((s for s in PREFERRED_SPLITS if s in common), None)
        if column.split is None:
            continue
        first = items[0][1]["scores"][column.split]
        column.metric = first.get("metric", "bleu" if "bleu" in first else None)
        for cell, results in items:
            column.scores.setdefault(cell.variant, {})[cell.seed] = _value(results["scores"][column.split])
            column.runs.setdefault(cell.variant, {})[cell.seed] = cell.run_dir
    return columns


def _paired(column: TaskColumn, variant: str, baseline: str, resamples: int) -> dict:
    """The paired test of ``variant`` against ``baseline`` on the seeds both finished, pooled."""
    from cn3.stats import bleu_paired_test, load_predictions, paired_test

    seeds = sorted(set(column.runs.get(variant, {})) & set(column.runs.get(baseline, {})))
    if not seeds:
        return {"error": "no seed finished for both"}
    gold, pred_a, pred_b = [], [], []
    for seed in seeds:
        a = load_predictions(column.runs[variant][seed], column.split)
        b = load_predictions(column.runs[baseline][seed], column.split)
        if a.gold != b.gold:
            return {"error": f"seed {seed}: the two runs scored different items"}
        gold += a.gold
        pred_a += a.pred
        pred_b += b.pred
    if column.metric == "bleu":
        result = bleu_paired_test(gold, pred_a, pred_b)
    else:
        result = paired_test(gold, pred_a, pred_b, column.metric, tag_scheme=a.tag_scheme, resamples=resamples)
    return {"seeds": seeds, "difference": result.difference, "ci95": [result.ci_low, result.ci_high],
            "p": result.p_value, "method": result.method, "items": result.n_items}


def significance(spec: ExperimentSpec, columns: dict[str, TaskColumn], resamples: int = 10_000) -> None:
    """Fill ``column.tests``: paired and Welch tests of every variant against the baseline, and the
    paired p-values Holm-adjusted over each variant's tasks."""
    from cn3.stats import holm, welch

    for column in columns.values():
        if column.metric is None or spec.baseline not in column.scores:
            continue
        for variant in spec.variants:
            if variant == spec.baseline or variant not in column.scores:
                continue
            test = _paired(column, variant, spec.baseline, resamples)
            a, b = list(column.scores[variant].values()), list(column.scores[spec.baseline].values())
            if len(a) >= 2 and len(b) >= 2:
                test["welch_p"] = welch(a, b)[1]
            column.tests[variant] = test
    for variant in spec.variants:
        tested = [c for c in columns.values() if "p" in c.tests.get(variant, {})]
        for column, adjusted in zip(tested, holm([c.tests[variant]["p"] for c in tested])):
            column.tests[variant]["p_holm"] = adjusted


def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def rows(spec: ExperimentSpec, columns: dict[str, TaskColumn]) -> list[dict]:
    """One record per (variant, task): mean, std, n, per-seed scores, the paper's number, the test."""
    out = []
    for variant in spec.variants:
        for task, column in columns.items():
            values = list(column.scores.get(variant, {}).values())
            mean, std = _mean_std(values) if values else (None, None)
            out.append({"variant": variant, "task": task, "split": column.split, "metric": column.metric,
                        "mean": mean, "std": std, "n": len(values), "seeds": column.scores.get(variant, {}),
                        "paper": spec.references.get(task, {}).get(variant),
                        "test": column.tests.get(variant)})
    return out


def _best(records: list[dict]) -> dict[str, float]:
    best: dict[str, float] = {}
    for r in records:
        if r["mean"] is not None:
            best[r["task"]] = max(best.get(r["task"], r["mean"]), r["mean"])
    return best


def _cell_text(r: dict, best: dict, fmt: str) -> str:
    if r["mean"] is None:
        return "–"
    text = f"{r['mean']:.2f} ± {r['std']:.2f} ({r['n']})"
    if r["mean"] == best.get(r["task"]):
        text = {"md": f"**{text}**", "latex": f"\\textbf{{{text}}}"}.get(fmt, text)
    paper = "×" if r["paper"] is None else f"{r['paper']:.1f}"
    return f"{text} [{paper}]"


def _p_text(test: dict | None) -> str:
    if not test:
        return ""
    if "error" in test:
        return test["error"]
    star = "*" if test.get("p_holm", test["p"]) < ALPHA else ""
    welch = f", Welch {test['welch_p']:.3f}" if test.get("welch_p") is not None else ""
    return (f"{test['difference']:+.2f} [{test['ci95'][0]:+.2f}, {test['ci95'][1]:+.2f}] "
            f"p {test['p']:.3f} (Holm {test.get('p_holm', test['p']):.3f}){star}{welch}")


def render(spec: ExperimentSpec, columns: dict[str, TaskColumn], fmt: str = "md") -> str:
    """The results table and the significance table, as Markdown, CSV or LaTeX."""
    records = rows(spec, columns)
    best = _best(records)
    tasks = list(columns)
    header = ["variant"] + [f"{t} ({columns[t].metric or '?'}, {columns[t].split or '-'})" for t in tasks]
    by = {(r["variant"], r["task"]): r for r in records}
    table = [[v] + [_cell_text(by[(v, t)], best, fmt) for t in tasks] for v in spec.variants]
    tests = [[v] + [_p_text(by[(v, t)]["test"]) for t in tasks] for v in spec.variants if v != spec.baseline]
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(["variant", "task", "split", "metric", "mean", "std", "n", "paper", "difference",
                         "ci_low", "ci_high", "p_paired", "p_holm", "p_welch"])
        for r in records:
            t = r["test"] if r["test"] and "error" not in r["test"] else {}
            writer.writerow([r["variant"], r["task"], r["split"], r["metric"], r["mean"], r["std"], r["n"], r["paper"],
                             t.get("difference"), *(t.get("ci95") or [None, None]), t.get("p"), t.get("p_holm"),
                             t.get("welch_p")])
        return buffer.getvalue()
    if fmt == "latex":
        cols = "l" + "r" * len(tasks)
        body = [" & ".join(header) + r" \\ \midrule"] + [" & ".join(r) + r" \\" for r in table]
        return "\n".join([rf"\begin{{tabular}}{{{cols}}}", r"\toprule", *body, r"\bottomrule", r"\end{tabular}"])
    lines = [f"## {spec.name}: mean ± std (seeds) [paper]", "", "| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in table]
    lines += ["", f"## against {spec.baseline}: difference [95% CI], paired p (Holm over tasks), Welch p across seeds",
              "", "| " + " | ".join(["variant", *tasks]) + " |", "|" + "---|" * (len(tasks) + 1)]
    lines += ["| " + " | ".join(r) + " |" for r in tests]
    lines += ["", f"`*`: Holm-adjusted paired p < {ALPHA}. Paired test: approximate randomization (sacreBLEU's "
              "paired test for BLEU) on the per-example predictions of the seeds both variants finished, pooled. "
              "Best mean per task in bold; [×]: no number in the paper."]
    return "\n".join(lines) + "\n"


def plot(spec: ExperimentSpec, columns: dict[str, TaskColumn], path: Path) -> None:
    """One panel per task: each variant's per-seed scores (dots) and mean (bar), the paper's number as a red x."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [t for t, c in columns.items() if c.scores]
    if not tasks:
        return
    variants = list(spec.variants)
    fig, axes = plt.subplots(1, len(tasks), figsize=(max(4, 0.5 * len(variants)) * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        column = columns[task]
        for x, variant in enumerate(variants):
            values = list(column.scores.get(variant, {}).values())
            if values:
                ax.bar(x, statistics.fmean(values), color="#9ecae1", width=0.7)
                ax.plot([x] * len(values), values, "k.", markersize=4)
            paper = spec.references.get(task, {}).get(variant)
            if paper is not None:
                ax.plot(x, paper, "rx", markersize=8)
        ax.set_xticks(range(len(variants)), variants, rotation=60, ha="right", fontsize=8)
        ax.set_title(f"{task} ({column.metric}, {column.split})", fontsize=9)
        finite = [v for vs in column.scores.values() for v in vs.values()]
        if finite:
            ax.set_ylim(max(0.0, min(finite) - 5), max(finite) + 2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report(spec: ExperimentSpec, cells: list[Cell], fmt: str = "md", out: Path | None = None,
           resamples: int = 10_000) -> tuple[str, dict]:
    """Collect, test and render; with ``out`` also write ``report.{md,csv,tex}``, ``report.json`` and
    ``report.png`` there. Returns the rendered table and the JSON record."""
    columns = collect(cells)
    significance(spec, columns, resamples)
    text = render(spec, columns, fmt)
    grid = cells[0].run_dir.parents[2] if cells else None
    wall = None
    if grid is not None and (grid / "grid.json").is_file():
        wall = sum(i["wall_seconds"] for i in json.loads((grid / "grid.json").read_text())["invocations"])
    record = {"spec": spec.name, "baseline": spec.baseline, "alpha": ALPHA, "correction": "holm over tasks",
              "grid_wall_seconds": wall,
              "cells": {"total": len(cells), "finished": sum((c.run_dir / "results.json").is_file() for c in cells)},
              "rows": [{**r, "seeds": {str(k): v for k, v in r["seeds"].items()}} for r in rows(spec, columns)]}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for name, kind in (("report.md", "md"), ("report.csv", "csv"), ("report.tex", "latex")):
            (out / name).write_text(text if kind == fmt else render(spec, columns, kind), encoding="utf-8")
        (out / "report.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        plot(spec, columns, out / "report.png")
    return text, record
