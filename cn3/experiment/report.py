"""``cn3 experiment report``: the grid's table, mean ± std over seeds, with significance against the baseline.

Per task the score is the test split's when every finished cell of the task has one, else dev's
(SST here has no test labels), and BLEU on ``test2016`` (else ``val``) for translation; the header
names the split. For each variant against the baseline, per task:

* a **paired test** on per-example predictions (``RUN/predictions/<split>.json.xz``, :func:`cn3.run_dir.load_predictions`), the seeds both
  have pooled (seed s of the variant paired with seed s of the baseline on the same items):
  approximate randomization for accuracy, span F1 and token accuracy, sacreBLEU's paired test for
  BLEU (:mod:`cn3.stats`), with the 95% bootstrap interval of the difference;
* **Welch's t-test across seeds** on the per-seed scores (needs 2 seeds a side), which asks whether
  the difference survives seed variance;
* **Holm's correction** of each variant's paired p-values over the tasks it is tested on (a variant
  is one claim tested on several tasks); both raw and adjusted p are reported;
* beside a test that is **not significant**, the smallest difference it could have detected with
  power 0.8 at level 0.05 (:func:`cn3.stats.detectable_paired` from the per-item paired differences
  of the pooled items, :func:`cn3.stats.detectable_welch` from the seeds' pooled spread and their
  number), so that "no effect" and "too few seeds or items" can be told apart.

Beside each cell: the paper's number (the spec's ``references``) and ``cn3 - paper``; under the
table, where the numbers come from (``paper``) and how the grid differs from the paper (``differs``,
the spec's lines and the budget's). A split that also selected the checkpoint (``dev``, ``val``:
training keeps its best evaluation there) is called so wherever its score is the table's.

In a tuned grid (:mod:`cn3.experiment.tuning`) the table holds the seed cells, each with its task
and variant's chosen option, and a tuning table gives every option's dev score, the chosen one in
bold (Markdown and LaTeX; all formats' JSON record has it). Translation runs of a gated hybrid
encoder record their mean local gate on val; a gate table gives it per variant (Xu et al. Fig. 2
pairs it with each window's BLEU; Markdown, LaTeX and the JSON record).
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import io
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from cn3.experiment.reuse import reused_from
from cn3.experiment.spec import Cell, ExperimentSpec
from cn3.run_dir import finished, read_results, split_scores
from cn3.stats import POWER, mean_std

ALPHA = 0.05
PREFERRED_SPLITS = ("test", "test2016", "dev", "val")
#: splits on which training chose its checkpoint (the best evaluation), so a score there is optimistic
SELECTION_SPLITS = ("dev", "val")


def split_label(split: str | None) -> str:
    """The split as the report names it: ``dev: selects the checkpoint`` for a selection split."""
    if split is None:
        return "-"
    return f"{split}: selects the checkpoint" if split in SELECTION_SPLITS else split


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
    """A finished cell's results with its scores in the one schema (:func:`cn3.run_dir.split_scores`)."""
    if not finished(cell.run_dir):
        return None
    results = read_results(cell.run_dir)
    return {**results, "scores": split_scores(results)}


def table_cells(cells: list[Cell]) -> list[Cell]:
    """The cells of the table: not the tuning cells (their runs are compared on dev only)."""
    return [cell for cell in cells if cell.tune is None]


def cell_counts(cells: list[Cell]) -> dict[str, int]:
    table = table_cells(cells)
    return {"total": len(table),
            "finished": sum(not c.waiting and finished(c.run_dir) for c in table)}


def tuning_rows(cells: list[Cell]) -> list[dict]:
    """Per task and variant of a tuned grid: each option's dev score (None: unfinished) and the chosen
    option (None: not chosen yet), in the grid's order."""
    from cn3.experiment.tuning import choose

    runs: dict[tuple[str, str, int], dict[str, Path]] = {}
    for cell in cells:
        if cell.tune is not None:
            runs.setdefault((cell.task, cell.variant, cell.seed), {})[cell.tune] = cell.run_dir
    out = []
    for (task, variant, seed), options in runs.items():
        choice = choose(options)
        out.append({"task": task, "variant": variant, "seed": seed, "dev": choice.scores, "chosen": choice.option})
    return out


def render_tuning(rows_: list[dict], fmt: str) -> str:
    """The tuning table: variants as rows, tasks as columns, each option's dev score, chosen in bold."""
    tasks = list(dict.fromkeys(r["task"] for r in rows_))
    variants = list(dict.fromkeys(r["variant"] for r in rows_))
    by = {(r["task"], r["variant"]): r for r in rows_}

    def text(r: dict | None) -> str:
        if r is None:
            return "–"
        parts = []
        for option, dev in r["dev"].items():
            part = f"{option} {'…' if dev is None else f'{dev:.2f}'}"
            if option == r["chosen"]:
                part = {"md": f"**{part}**", "latex": f"\\textbf{{{part}}}"}[fmt]
            parts.append(part)
        return (", " if fmt == "latex" else " · ").join(parts)

    table = [[v] + [text(by.get((t, v))) for t in tasks] for v in variants]
    seeds = sorted({r["seed"] for r in rows_})
    if fmt == "latex":
        body = [" & ".join(map(_tex, ["variant", *tasks])) + r" \\ \midrule"] + [" & ".join(map(_tex, r)) + r" \\" for r in table]
        return "\n".join(["", f"% tuning: dev score of each option (seed {', '.join(map(str, seeds))}), chosen in bold",
                           rf"\begin{{tabular}}{{l{'l' * len(tasks)}}}", r"\toprule", *body, r"\bottomrule", r"\end{tabular}"]) + "\n"
    lines = ["", f"## tuning: dev score of each option (seed {', '.join(map(str, seeds))}); the chosen one (bold) "
                 "trains every seed", "", "| " + " | ".join(["variant", *tasks]) + " |", "|" + "---|" * (len(tasks) + 1)]
    lines += ["| " + " | ".join(r) + " |" for r in table]
    return "\n".join(lines) + "\n"


def gate_rows(cells: list[Cell]) -> list[dict]:
    """Per task and variant whose runs record hybrid gates (``results.json``'s ``gates``, which
    ``cn3 nmt train`` writes for a gated hybrid encoder): each seed's mean local weight ``g`` and its
    value per gated layer, in the grid's order."""
    found: dict[tuple[str, str], dict] = {}
    for cell in table_cells(cells):
        gates = None if cell.waiting else (_results(cell) or {}).get("gates")
        if gates:
            row = found.setdefault((cell.task, cell.variant), {"task": cell.task, "variant": cell.variant,
                                                               "split": gates["split"], "seeds": {}, "per_layer": {}})
            row["seeds"][cell.seed] = gates["mean"]
            row["per_layer"][cell.seed] = gates["per_layer"]
    return list(found.values())


def render_gates(rows_: list[dict], fmt: str) -> str:
    """The gate table: per variant the mean local weight ``g`` over seeds and per layer (mean of seeds)."""
    table = []
    for r in rows_:
        mean, std = mean_std(list(r["seeds"].values()))
        layers = list(zip(*r["per_layer"].values()))
        table.append([r["variant"], r["task"], f"{_spread(mean, std, 3)} ({len(r['seeds'])})",
                      " / ".join(f"{statistics.fmean(v):.3f}" for v in layers)])
    split = rows_[0]["split"]
    title = f"mean local gate g on {split}, mean ± std (seeds); per gated layer, lowest first"
    if fmt == "latex":
        body = [" & ".join(["variant", "task", "g", "per layer"]) + r" \\ \midrule"] + [" & ".join(map(_tex, r)) + r" \\" for r in table]
        return "\n".join(["", f"% {title}", r"\begin{tabular}{llrl}", r"\toprule", *body, r"\bottomrule", r"\end{tabular}"]) + "\n"
    lines = ["", f"## {title}", "", "| variant | task | g | per layer |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in table]
    return "\n".join(lines) + "\n"


def collect(cells: list[Cell]) -> dict[str, TaskColumn]:
    """Finished cells grouped by task, each task scored on the split all its cells have (tuning
    cells and cells waiting for tuning left out)."""
    columns: dict[str, TaskColumn] = {}
    finished: dict[str, list[tuple[Cell, dict]]] = {}
    for cell in table_cells(cells):
        columns.setdefault(cell.task, TaskColumn(cell.task))
        if cell.waiting:
            continue
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
        column.metric = first.get("metric")
        for cell, results in items:
            column.scores.setdefault(cell.variant, {})[cell.seed] = results["scores"][column.split]["score"]
            column.runs.setdefault(cell.variant, {})[cell.seed] = cell.run_dir
    return columns


def _pooled_test(pairs: dict[int, tuple], metric: str, resamples: int, items: dict[int, list[int]] | None = None,
                 detectable: bool = False) -> dict:
    """The paired test of A against B on their seeds' predictions pooled: ``pairs`` maps a seed to
    ``(A's, B's)`` :class:`cn3.stats.Predictions`; ``items``, per seed, the item indices to test
    (a group of ``report --by``; None: every item); with ``detectable``, also the smallest difference
    the test could detect (:func:`cn3.stats.detectable_paired`)."""
    from cn3.stats import bleu_paired_test, detectable_paired, paired_differences, paired_test

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


def _paired(column: TaskColumn, variant: str, baseline: str, resamples: int) -> dict:
    """The paired test of ``variant`` against ``baseline`` on the seeds both finished, pooled."""
    from cn3.run_dir import load_predictions

    seeds = sorted(set(column.runs.get(variant, {})) & set(column.runs.get(baseline, {})))
    if not seeds:
        return {"error": "no seed finished for both"}
    pairs = {seed: (load_predictions(column.runs[variant][seed], column.split),
                    load_predictions(column.runs[baseline][seed], column.split)) for seed in seeds}
    return _pooled_test(pairs, column.metric, resamples, detectable=True)


def _add_welch(test: dict, seeds: dict[int, float], baseline_seeds: dict[int, float], detectable: bool = False) -> None:
    """``test["welch_p"]``: Welch's t-test on the per-seed scores, when both sides have 2 seeds or more;
    with ``detectable``, also ``test["welch_detectable"]``, the smallest difference it could detect
    (:func:`cn3.stats.detectable_across_seeds`; None when the seeds do not vary)."""
    from cn3.stats import detectable_across_seeds, welch

    if len(seeds) >= 2 and len(baseline_seeds) >= 2:
        test["welch_p"] = welch(list(seeds.values()), list(baseline_seeds.values()))[1]
        if detectable:
            test["welch_detectable"] = detectable_across_seeds(list(seeds.values()), list(baseline_seeds.values()))


def significance(spec: ExperimentSpec, columns: dict[str, TaskColumn], resamples: int = 10_000) -> None:
    """Fill ``column.tests``: paired and Welch tests of every variant against the baseline, and the
    paired p-values Holm-adjusted over each variant's tasks."""
    from cn3.stats import holm

    for column in columns.values():
        if column.metric is None or spec.baseline not in column.scores:
            continue
        for variant in spec.variants:
            if variant == spec.baseline or variant not in column.scores:
                continue
            test = _paired(column, variant, spec.baseline, resamples)
            _add_welch(test, column.scores[variant], column.scores[spec.baseline], detectable=True)
            column.tests[variant] = test
    for variant in spec.variants:
        tested = [c for c in columns.values() if "p" in c.tests.get(variant, {})]
        for column, adjusted in zip(tested, holm([c.tests[variant]["p"] for c in tested])):
            column.tests[variant]["p_holm"] = adjusted


def _spread(mean: float, std: float | None, digits: int = 2) -> str:
    return f"{mean:.{digits}f}" if std is None else f"{mean:.{digits}f} ± {std:.{digits}f}"


def _str_keys(seeds: dict) -> dict:
    """A seed-keyed mapping as JSON writes it (string keys), for the report's record."""
    return {str(k): v for k, v in seeds.items()}


def rows(spec: ExperimentSpec, columns: dict[str, TaskColumn]) -> list[dict]:
    """One record per (variant, task): mean, std, n, per-seed scores, the paper's number, the test."""
    out = []
    for variant in spec.variants:
        for task, column in columns.items():
            values = list(column.scores.get(variant, {}).values())
            mean, std = mean_std(values) if values else (None, None)
            paper = spec.references.get(task, {}).get(variant)
            out.append({"variant": variant, "task": task, "split": column.split, "metric": column.metric,
                        "selects_checkpoint": column.split in SELECTION_SPLITS,
                        "mean": mean, "std": std, "n": len(values), "seeds": column.scores.get(variant, {}),
                        "paper": paper, "minus_paper": None if paper is None or mean is None else mean - paper,
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
    text = f"{_spread(r['mean'], r['std'])} ({r['n']})"
    if r["mean"] == best.get(r["task"]):
        text = {"md": f"**{text}**", "latex": f"\\textbf{{{text}}}"}.get(fmt, text)
    if r["paper"] is None:
        return f"{text} [×]"
    return f"{text} [{float(r['paper'])}, {r['minus_paper']:+.2f}]"


def _tex(text: str) -> str:
    """A table cell as LaTeX source: TeX's special characters in names escaped (``cn3_dep``,
    ``span_f1``), the symbols the Markdown tables use as math. Leaves the ``\\textbf{...}`` the
    renderers wrap around best cells alone."""
    for plain, tex in (("_", r"\_"), ("%", r"\%"), ("&", r"\&"), ("#", r"\#"), ("±", r"$\pm$"),
                       ("×", r"$\times$"), (UNSEEN_MARK, r"$^\dagger$")):
        text = text.replace(plain, tex)
    return text


def _p_text(test: dict | None) -> str:
    from cn3.stats import format_p  # two significant digits: a resampling test's p is never printed as 0

    if not test:
        return ""
    if "error" in test:
        return test["error"]
    star = "*" if test.get("p_holm", test["p"]) < ALPHA else ""
    detects = (f"; detectable {test['detectable']:.2f}"
               if not star and test.get("detectable") is not None else "")
    welch = ""
    if test.get("welch_p") is not None:
        seen = test.get("welch_detectable")
        welch = f", Welch {format_p(test['welch_p'])}" + (
            f" (detectable {seen:.2f})" if test["welch_p"] >= ALPHA and seen is not None else "")
    return (f"{test['difference']:+.2f} [{test['ci95'][0]:+.2f}, {test['ci95'][1]:+.2f}] "
            f"p {format_p(test['p'])} (Holm {format_p(test.get('p_holm', test['p']))}{detects}){star}{welch}")


def _untested(record: dict, baseline: dict, name: str) -> str:
    """Why a cell with scores has no test: the baseline has no finished run on that task yet."""
    return f"no {name} run yet" if record["mean"] is not None and baseline["mean"] is None else ""


def render_reused(reused: dict[str, str]) -> str:
    """Which cells were adopted from another finished run (:mod:`cn3.experiment.reuse`), if any."""
    if not reused:
        return ""
    return ("\nReused (same resolved config and seed, so trained once): "
            + "; ".join(f"{name} is {source}" for name, source in reused.items()) + ".\n")


def paper_notes(spec: ExperimentSpec, budget: str | None = None) -> list[str]:
    """The lines under the table: where the paper's numbers come from, and how the grid differs."""
    lines = [f"Paper: {spec.paper}."] if spec.paper else []
    differs = spec.differences(budget)
    if differs:
        lines += ["Differs from the paper:", *(f"- {line}" for line in differs)]
    return lines


def render(spec: ExperimentSpec, columns: dict[str, TaskColumn], fmt: str = "md", budget: str | None = None) -> str:
    """The results table and the significance table, as Markdown, CSV or LaTeX (``budget``: the grid's,
    whose ``differs`` lines join the spec's under the table)."""
    records = rows(spec, columns)
    best = _best(records)
    tasks = list(columns)
    header = ["variant"] + [f"{t} ({columns[t].metric or '?'}, {split_label(columns[t].split)})" for t in tasks]
    by = {(r["variant"], r["task"]): r for r in records}
    table = [[v] + [_cell_text(by[(v, t)], best, fmt) for t in tasks] for v in spec.variants]
    tests = [[v] + [_p_text(by[(v, t)]["test"]) or _untested(by[(v, t)], by[(spec.baseline, t)], spec.baseline)
                    for t in tasks] for v in spec.variants if v != spec.baseline]
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(["variant", "task", "split", "metric", "mean", "std", "n", "paper", "minus_paper", "difference",
                         "ci_low", "ci_high", "p_paired", "p_holm", "detectable_paired", "p_welch", "detectable_welch",
                         "selects_checkpoint"])
        for r in records:
            t = r["test"] if r["test"] and "error" not in r["test"] else {}
            writer.writerow([r["variant"], r["task"], r["split"], r["metric"], r["mean"], r["std"], r["n"], r["paper"],
                             r["minus_paper"], t.get("difference"), *(t.get("ci95") or [None, None]), t.get("p"),
                             t.get("p_holm"), t.get("detectable"), t.get("welch_p"), t.get("welch_detectable"),
                             r["selects_checkpoint"]])
        return buffer.getvalue()
    notes = paper_notes(spec, budget)
    if fmt == "latex":
        cols = "l" + "r" * len(tasks)
        body = [" & ".join(map(_tex, header)) + r" \\ \midrule"] + [" & ".join(map(_tex, r)) + r" \\" for r in table]
        return "\n".join(["% mean and std over seeds (seeds) [paper, cn3 - paper]; [x]: no number in the paper",
                          rf"\begin{{tabular}}{{{cols}}}", r"\toprule", *body, r"\bottomrule", r"\end{tabular}",
                          *(f"% {line}" for line in notes)])
    lines = [f"## {spec.name}: mean ± std (seeds) [paper, cn3 − paper]", "", "| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in table]
    lines += ["", f"## against {spec.baseline}: difference [95% CI], paired p (Holm over tasks), Welch p across seeds",
              "", "| " + " | ".join(["variant", *tasks]) + " |", "|" + "---|" * (len(tasks) + 1)]
    lines += ["| " + " | ".join(r) + " |" for r in tests]
    lines += ["", f"`*`: Holm-adjusted paired p < {ALPHA}. Paired test: approximate randomization (sacreBLEU's "
              "paired test for BLEU) on the per-example predictions of the seeds both variants finished, pooled. "
              "Detectable: beside a test not significant at 0.05, the smallest difference it finds with power 0.8 "
              "(paired: from the per-item differences, normal approximation; Welch: from the seeds' pooled std). "
              "Best mean per task in bold; [paper's number, cn3 − paper]; [×]: no number in the paper."]
    if any(columns[t].split in SELECTION_SPLITS for t in tasks):
        lines += ["", "A split that selects the checkpoint (training kept its best evaluation there) flatters "
                      "every row alike; the paper's numbers are test scores."]
    if notes:
        lines += ["", *notes]
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


def _gridded(spec: ExperimentSpec, cells: list[Cell]) -> ExperimentSpec:
    """``spec`` with only the variants that have cells in this grid (a budget's or ``--only``'s
    selection), in the spec's order: the tables get no empty rows."""
    present = {cell.variant for cell in cells}
    return dataclasses.replace(spec, variants={v: o for v, o in spec.variants.items() if v in present})


def grid_wall_seconds(invocations: list[dict]) -> float:
    """The time during which at least one ``run`` of the grid was running: the union of the
    invocations' intervals, so two runs with disjoint ``--only`` side by side count once, and a grid
    continued over several sessions counts only the time it ran."""
    spans = sorted((start := datetime.datetime.fromisoformat(i["started"]).timestamp(), start + i["wall_seconds"])
                   for i in invocations)
    total, end = 0.0, float("-inf")
    for start, stop in spans:
        total += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return round(total, 1)


def report(spec: ExperimentSpec, cells: list[Cell], fmt: str = "md", out: Path | None = None,
           resamples: int = 10_000) -> tuple[str, dict]:
    """Collect, test and render; with ``out`` also write ``report.{md,csv,tex}``, ``report.json`` and
    ``report.png`` there. Returns the rendered table and the JSON record."""
    spec = _gridded(spec, cells)
    budget = next((c.budget for c in cells), None)
    columns = collect(cells)
    significance(spec, columns, resamples)
    tuning, gates = tuning_rows(cells), gate_rows(cells)
    reused = {c.name: source for c in cells if (source := reused_from(c.run_dir))}

    def rendered(kind: str) -> str:
        if kind == "csv":
            return render(spec, columns, kind, budget)
        return (render(spec, columns, kind, budget) + (render_tuning(tuning, kind) if tuning else "")
                + (render_gates(gates, kind) if gates else "") + (render_reused(reused) if kind == "md" else ""))

    text = rendered(fmt)
    grid = cells[0].run_dir.parents[2] if cells else None
    wall = None
    if grid is not None and (grid / "grid.json").is_file():
        wall = grid_wall_seconds(json.loads((grid / "grid.json").read_text())["invocations"])
    record = {"spec": spec.name, "baseline": spec.baseline, "alpha": ALPHA, "correction": "holm over tasks",
              "power": POWER, "paper": spec.paper or None, "differs": spec.differences(budget),
              "grid_wall_seconds": wall,
              "cells": cell_counts(cells),
              **({"reused": reused} if reused else {}),
              "rows": [{**r, "seeds": _str_keys(r["seeds"])} for r in rows(spec, columns)],
              **({"tuning": tuning} if tuning else {}),
              **({"gates": [{**g, "seeds": _str_keys(g["seeds"]), "per_layer": _str_keys(g["per_layer"])} for g in gates]}
                 if gates else {})}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for name, kind in (("report.md", "md"), ("report.csv", "csv"), ("report.tex", "latex")):
            (out / name).write_text(text if kind == fmt else rendered(kind), encoding="utf-8")
        (out / "report.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        plot(spec, columns, out / "report.png")
    return text, record


# ---------------------------------------------------------------- --by FIELD: scores per group of items

BY_NOTE = ("Against the baseline, per group: difference, Holm-adjusted paired p (approximate randomization on "
           "the group's items of the seeds both variants finished, pooled; Holm over the groups of each variant "
           "and task), `*` below 0.05; W: Welch's t-test on the per-seed group scores (both sides 2 seeds or more).")


@dataclass
class GroupedColumn:
    """One task's scores per group of items (``cn3 experiment report --by FIELD``).

    ``groups``: the group labels in table order (:func:`cn3.grouped.grouped_scores`'s order);
    ``scores``: variant -> group label -> seed -> score within the group; ``items``: group label ->
    the group's sizes over the cells (one value when every cell scored the same items); ``unseen``:
    group label -> whether no training item of any cell has the value (``None``: not known, e.g.
    for ``source``).
    """

    task: str
    split: str | None
    metric: str | None
    by: str
    groups: list[str] = field(default_factory=list)
    values: dict[str, object] = field(default_factory=dict)  # label -> the group's key (numbers for n_ops)
    scores: dict[str, dict[str, dict[int, float]]] = field(default_factory=dict)
    items: dict[str, set[int]] = field(default_factory=dict)
    unseen: dict[str, bool | None] = field(default_factory=dict)
    note: str | None = None  # why the task is not grouped
    # variant -> seed -> (group label -> its items' indices, the run's predictions), for the paired tests
    runs: dict[str, dict[int, tuple[dict[str, list[int]], object]]] = field(default_factory=dict)
    tests: dict[str, dict[str, dict]] = field(default_factory=dict)  # variant -> group label -> test


def _run_data(run_dir: Path):
    """A config holding the data section a finished cell trained with (from its ``RUN/config.yaml``;
    the rest of the config is not needed, nor read, so a run of another cn3 version still reports)."""
    import yaml

    from cn3.compat import upgrade_sentence_config
    from cn3.config import ConfigError, from_dict
    from cn3.sentence.config import DataConfig, RunConfig

    path = run_dir / "config.yaml"
    if not path.is_file():
        raise ConfigError(f"{run_dir} has no config.yaml: cannot tell which data it was scored on")
    saved = upgrade_sentence_config(yaml.safe_load(path.read_text(encoding="utf-8")) or {}, None)
    try:
        return RunConfig(data=from_dict(DataConfig, saved.get("data", {}), "data."))
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None


def _split_records(cfg, split: str, cache: dict) -> tuple[str, list[dict], list[dict]]:
    """The level of the run's dataset, and the records of ``split`` and of ``train`` as the run trained
    and scored them: the prepared dataset of its config (as ``cn3 train`` found it) with its
    ``data.limit`` applied to both (:func:`cn3.sentence.trainer._train`)."""
    from cn3.sentence.trainer import prepared_path
    from data_prep.dataset import load_prepared

    data = repr(dataclasses.replace(cfg.data, limit=0))  # cells differing only in data.limit share a dataset
    if ("path", data) not in cache:  # found once per data config, as `cn3 train` found it; never prepared here
        cache["path", data] = prepared_path(cfg, prepare=False)
    path = cache["path", data]
    key = (str(path.resolve()), split, cfg.data.limit)
    if key not in cache:
        ds = load_prepared(path)
        limit = cfg.data.limit

        def records(name: str) -> list[dict]:
            data = ds.splits[name].spread(limit) if limit else ds.splits[name]
            return [data.record(i) for i in range(len(data))]

        cache[key] = (ds.level, records(split), records("train") if "train" in ds.splits else [])
    return cache[key]


def collect_grouped(columns: dict[str, TaskColumn], by: str) -> dict[str, GroupedColumn]:
    """Every finished cell's predictions on its task's split (the split :func:`collect` chose),
    joined item by item with the items' ``by`` field (:func:`cn3.grouped.group_keys`) and scored per
    group with the task's metric (:func:`cn3.grouped.grouped_scores`). Groups are marked unseen in
    training against each cell's own training items (:func:`cn3.grouped.seen_keys`).

    Raises:
        ConfigError: no item has the field (naming the fields they have), or a cell's predictions do
            not match its dataset's items.
    """
    from cn3.config import ConfigError
    from cn3.grouped import group_keys, group_label, group_order, grouped_scores, seen_keys
    from cn3.run_dir import load_predictions

    out: dict[str, GroupedColumn] = {}
    cache: dict = {}
    for task, column in columns.items():
        grouped = out[task] = GroupedColumn(task, column.split, column.metric, by)
        if column.metric is None:
            grouped.note = "no finished cell"
            continue
        if column.metric == "bleu":
            grouped.note = "translation items carry no per-item fields"
            continue
        unseen: dict[str, list[bool | None]] = {}
        for variant, runs in column.runs.items():
            for seed, run_dir in sorted(runs.items()):
                level, records, train = _split_records(_run_data(run_dir), column.split, cache)
                predictions = load_predictions(run_dir, column.split)
                if len(predictions.gold) != len(records):
                    raise ConfigError(f"{run_dir}: {len(predictions.gold):,} predictions on {column.split} but its "
                                      f"dataset has {len(records):,} items there (prepared again since it trained?)")
                for i, (gold, record) in enumerate(zip(predictions.gold, records)):
                    if isinstance(gold, str) and record.get("label") is not None and gold != record["label"]:
                        raise ConfigError(f"{run_dir}: item {i} of {column.split} is {gold!r} in its predictions but "
                                          f"{record['label']!r} in its dataset (prepared again since it trained?)")
                try:
                    keys = group_keys(records, by)
                except ConfigError as err:
                    raise ConfigError(f"{task}: {err}") from None
                seen = None if by == "source" else seen_keys(train, by)
                members: dict[str, list[int]] = {}
                for i, key in enumerate(keys):
                    members.setdefault(group_label(key, by), []).append(i)
                grouped.runs.setdefault(variant, {})[seed] = (members, predictions)
                for g in grouped_scores(keys, predictions.gold, predictions.pred, level, predictions.tag_scheme,
                                        by, seen):
                    grouped.values.setdefault(g.label, g.value)
                    grouped.scores.setdefault(variant, {}).setdefault(g.label, {})[seed] = g.score
                    grouped.items.setdefault(g.label, set()).add(g.items)
                    unseen.setdefault(g.label, []).append(g.unseen)
        grouped.groups = sorted(grouped.values, key=lambda label: group_order(grouped.values[label]))
        grouped.unseen = {label: None if None in marks else all(marks) for label, marks in unseen.items()}
    return out


def grouped_significance(spec: ExperimentSpec, grouped: dict[str, GroupedColumn], resamples: int = 10_000) -> None:
    """Fill ``column.tests``: per group, the paired test of every variant against the baseline on the
    group's items of the seeds both finished, pooled (as :func:`significance` does for the whole
    split), and the p-values Holm-adjusted over the groups of each variant and task; per group also
    Welch's t-test on the per-seed group scores where both sides have 2 seeds or more."""
    from cn3.stats import holm

    for column in grouped.values():
        base = column.runs.get(spec.baseline, {})
        for variant, runs in column.runs.items():
            seeds = sorted(set(runs) & set(base))
            if variant == spec.baseline or not seeds:
                continue
            pairs = {seed: (runs[seed][1], base[seed][1]) for seed in seeds}
            tests = {label: _pooled_test(pairs, column.metric, resamples,
                                         {seed: runs[seed][0].get(label, []) for seed in seeds})
                     for label in column.groups}
            tested = [t for t in tests.values() if "p" in t]
            for test, adjusted in zip(tested, holm([t["p"] for t in tested])):
                test["p_holm"] = adjusted
            for label, test in tests.items():
                if "p" in test:
                    _add_welch(test, column.scores.get(variant, {}).get(label, {}),
                               column.scores.get(spec.baseline, {}).get(label, {}))
            column.tests[variant] = tests


def grouped_rows(spec: ExperimentSpec, grouped: dict[str, GroupedColumn]) -> list[dict]:
    """One record per (task, variant, group): mean, std and n over seeds, the per-seed scores."""
    out = []
    for task, column in grouped.items():
        for variant in spec.variants:
            for label in column.groups:
                seeds = column.scores.get(variant, {}).get(label, {})
                mean, std = mean_std(list(seeds.values())) if seeds else (None, None)
                out.append({"task": task, "split": column.split, "metric": column.metric, "field": column.by,
                            "group": label, "unseen_in_training": column.unseen.get(label),
                            "items": sorted(column.items.get(label, ())), "variant": variant,
                            "mean": mean, "std": std, "n": len(seeds), "seeds": dict(sorted(seeds.items())),
                            "test": column.tests.get(variant, {}).get(label)})
    return out


def _group_test_text(test: dict | None) -> str:
    """``+4.69 (0.0002)* W 0.031``: the difference to the baseline, its Holm-adjusted paired p, and
    Welch's p across seeds when there is one."""
    from cn3.stats import format_p

    if not test:
        return ""
    if "error" in test:
        return test["error"]
    star = "*" if test["p_holm"] < ALPHA else ""
    welch = f" W {format_p(test['welch_p'])}" if test.get("welch_p") is not None else ""
    return f"{test['difference']:+.2f} ({format_p(test['p_holm'])}){star}{welch}"


UNSEEN_MARK = "†"


def _items_text(sizes: set[int]) -> str:
    return f"{min(sizes):,}" if len(sizes) == 1 else f"{min(sizes):,}–{max(sizes):,}"


def render_grouped(spec: ExperimentSpec, grouped: dict[str, GroupedColumn], fmt: str = "md") -> str:
    """The per-group table of every task (rows: variants; columns: the groups, those unseen in
    training marked †), as Markdown, CSV (one line per task, variant and group) or LaTeX."""
    records = grouped_rows(spec, grouped)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(["task", "split", "metric", "field", "group", "unseen_in_training", "items", "variant",
                         "mean", "std", "n", "seed_scores", "difference", "ci_low", "ci_high", "p_paired", "p_holm",
                         "p_welch"])
        for r in records:
            t = r["test"] if r["test"] and "error" not in r["test"] else {}
            writer.writerow([r["task"], r["split"], r["metric"], r["field"], r["group"], r["unseen_in_training"],
                             ";".join(map(str, r["items"])), r["variant"], r["mean"], r["std"], r["n"],
                             ";".join(f"{s}:{v}" for s, v in r["seeds"].items()), t.get("difference"),
                             *(t.get("ci95") or [None, None]), t.get("p"), t.get("p_holm"), t.get("welch_p")])
        return buffer.getvalue()
    by = {(r["task"], r["variant"], r["group"]): r for r in records}
    blocks = []
    for task, column in grouped.items():
        if column.note or not column.groups:
            blocks.append(("note", task, column, f"{task}: not grouped by {column.by}: {column.note or 'no groups'}"))
            continue
        best = {}
        for label in column.groups:
            means = [by[(task, v, label)]["mean"] for v in spec.variants if by[(task, v, label)]["mean"] is not None]
            best[label] = max(means) if means else None
        header = [column.by] + [label + (UNSEEN_MARK if column.unseen.get(label) else "") for label in column.groups]
        body = [["items"] + [_items_text(column.items[label]) for label in column.groups]]
        for variant in spec.variants:
            cells = []
            for label in column.groups:
                r = by[(task, variant, label)]
                if r["mean"] is None:
                    cells.append("–")
                    continue
                text = _spread(r["mean"], r["std"])
                if r["mean"] == best[label] and len(spec.variants) > 1:
                    text = {"md": f"**{text}**", "latex": f"\\textbf{{{text}}}"}.get(fmt, text)
                cells.append(text)
            n = sorted({by[(task, variant, label)]["n"] for label in column.groups} - {0})
            body.append([f"{variant} ({'/'.join(map(str, n)) or 0})"] + cells)
        blocks.append(("table", task, column, (header, body)))
    unseen_note = (f"{UNSEEN_MARK}: no training item has this value (unseen in training). ")
    if fmt == "latex":
        out = []
        for kind, task, column, content in blocks:
            if kind == "note":
                out.append(f"% {content}")
                continue
            header, body = content
            out += [f"% {task}: {column.metric} by {column.by} ({column.split}), mean ± std over seeds",
                    rf"\begin{{tabular}}{{l{'r' * (len(header) - 1)}}}", r"\toprule",
                    " & ".join(map(_tex, header)) + r" \\ \midrule",
                    *(" & ".join(map(_tex, row)) + r" \\" for row in body),
                    r"\bottomrule", r"\end{tabular}"]
        return "\n".join(out) + "\n"
    lines = []
    for kind, task, column, content in blocks:
        if kind == "note":
            lines += [content, ""]
            continue
        header, body = content
        lines += [f"## {spec.name}: {task}, {column.metric} by {column.by} ({column.split}), mean ± std over seeds",
                  "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        tested = [v for v in spec.variants if column.tests.get(v)]
        if tested:
            lines += ["", f"against {spec.baseline}: difference (Holm-adjusted paired p), W: Welch p across seeds", "",
                      "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            lines += ["| " + " | ".join([v] + [_group_test_text(column.tests[v].get(label)) for label in column.groups])
                      + " |" for v in tested]
        lines.append("")
    lines.append(f"{unseen_note}Rows: variant (seeds finished); items: the group's size in the scored split; "
                 f"best mean per group in bold. {BY_NOTE}")
    return "\n".join(lines) + "\n"


def plot_grouped(spec: ExperimentSpec, grouped: dict[str, GroupedColumn], path: Path) -> bool:
    """One panel per task: the score against the group (numeric groups on a numeric axis), a line
    per variant with the seeds' std as error bars, the groups unseen in training shaded. Returns
    whether anything was drawn."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from cn3.util.atomic import atomic_write

    tasks = [t for t, c in grouped.items() if c.groups and not c.note]
    if not tasks:
        return False
    fig = Figure(figsize=(8.0 * len(tasks), 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(tasks), squeeze=False)[0]
    for ax, task in zip(axes, tasks):
        column = grouped[task]
        numeric = all(isinstance(column.values[g], (int, float)) and not isinstance(column.values[g], bool)
                      for g in column.groups)
        xs = {g: (column.values[g] if numeric else i) for i, g in enumerate(column.groups)}
        shaded = False
        for g in column.groups:
            if column.unseen.get(g):
                ax.axvspan(xs[g] - 0.5, xs[g] + 0.5, color="0.9", zorder=0, lw=0,
                           label=None if shaded else "unseen in training")
                shaded = True
        for k, variant in enumerate(spec.variants):
            points = [(xs[g], statistics.fmean(s.values()), mean_std(list(s.values()))[1] or 0.0)
                      for g in column.groups if (s := column.scores.get(variant, {}).get(g))]
            if points:
                x, mean, std = zip(*points)
                ax.errorbar(x, mean, yerr=std, marker="o", markersize=3.5, capsize=2.5, linewidth=1.2,
                            label=variant, color=f"C{k % 10}", zorder=2)
        if not numeric:
            ax.set_xticks(list(xs.values()), column.groups, rotation=45 if sum(map(len, column.groups)) > 60 else 0)
        else:
            ax.set_xticks(sorted(set(xs.values())))
        ax.set_xlabel(column.by)
        ax.set_ylabel(f"{column.metric} ({column.split})")
        ax.set_title(f"{spec.name}: {task}, mean ± std over seeds", fontsize="medium")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside, not on, the curves
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda handle: fig.savefig(handle, format="png", dpi=120))
    return True


def report_by(spec: ExperimentSpec, cells: list[Cell], by: str, fmt: str = "md",
              out: Path | None = None, resamples: int = 10_000) -> tuple[str, dict]:
    """The grid's scores per group of items (``--by FIELD``), with the paired tests against the
    baseline per group; with ``out`` also write ``by-<field>.{md,csv,tex,json,png}`` there. Returns
    the rendered table and the JSON record."""
    spec = _gridded(spec, cells)
    grouped = collect_grouped(collect(cells), by)
    grouped_significance(spec, grouped, resamples)
    text = render_grouped(spec, grouped, fmt)
    record = {"spec": spec.name, "by": by, "note": BY_NOTE,
              "cells": cell_counts(cells),
              "tasks": {t: {"split": c.split, "metric": c.metric, "groups": c.groups, "note": c.note,
                            "unseen_in_training": {g: c.unseen.get(g) for g in c.groups}}
                        for t, c in grouped.items()},
              "rows": [{**r, "seeds": _str_keys(r["seeds"])} for r in grouped_rows(spec, grouped)]}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        stem = f"by-{by}"
        for suffix, kind in (("md", "md"), ("csv", "csv"), ("tex", "latex")):
            (out / f"{stem}.{suffix}").write_text(text if kind == fmt else render_grouped(spec, grouped, kind),
                                                  encoding="utf-8")
        (out / f"{stem}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        record["plot"] = str(out / f"{stem}.png") if plot_grouped(spec, grouped, out / f"{stem}.png") else None
    return text, record
