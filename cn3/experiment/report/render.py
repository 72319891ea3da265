"""Rendering a report as Markdown, LaTeX, CSV and the JSON record, for the whole split
(:func:`render_report`, :func:`report_record`) and per group of items (:func:`render_grouped`,
:func:`grouped_record`), from the collected and tested columns alone.
"""

from __future__ import annotations

import csv
import io
import statistics

from cn3.experiment.report.collect import GroupedColumn, TaskColumn
from cn3.experiment.spec import ExperimentSpec
from cn3.stats import ALPHA, POWER, format_p, mean_std

#: splits on which training chose its checkpoint (the best evaluation), so a score there is optimistic
SELECTION_SPLITS = ("dev", "val")
#: beside a group no training item has
UNSEEN_MARK = "†"
BY_NOTE = ("Against the baseline, per group: difference, Holm-adjusted paired p (approximate randomization on "
           "the group's items of the seeds both variants finished, pooled; Holm over the groups of each variant "
           "and task), `*` below 0.05; W: Welch's t-test on the per-seed group scores (both sides 2 seeds or more).")


def split_label(split: str | None) -> str:
    """The split as the report names it: ``dev: selects the checkpoint`` for a selection split."""
    if split is None:
        return "-"
    return f"{split}: selects the checkpoint" if split in SELECTION_SPLITS else split


# ---------------------------------------------------------------- the pieces every table is made of


def _spread(mean: float, std: float | None, digits: int = 2) -> str:
    return f"{mean:.{digits}f}" if std is None else f"{mean:.{digits}f} ± {std:.{digits}f}"


def _bold(text: str, fmt: str) -> str:
    """A best cell, bold in Markdown and LaTeX (CSV has no emphasis)."""
    return {"md": f"**{text}**", "latex": f"\\textbf{{{text}}}"}.get(fmt, text)


def _tex(text: str) -> str:
    """A table cell as LaTeX source: special characters escaped, the Markdown tables' symbols as math;
    ``\\textbf{...}`` around best cells left alone.
    """
    for plain, tex in (("_", r"\_"), ("%", r"\%"), ("&", r"\&"), ("#", r"\#"), ("±", r"$\pm$"),
                       ("×", r"$\times$"), (UNSEEN_MARK, r"$^\dagger$")):
        text = text.replace(plain, tex)
    return text


def _md_table(header: list[str], body: list[list[str]]) -> list[str]:
    """A Markdown table's lines."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in body)]


def _tex_table(columns: str, header: list[str], body: list[list[str]]) -> list[str]:
    """A booktabs ``tabular``'s lines, every cell through :func:`_tex`."""
    return [rf"\begin{{tabular}}{{{columns}}}", r"\toprule", " & ".join(map(_tex, header)) + r" \\ \midrule",
            *(" & ".join(map(_tex, r)) + r" \\" for r in body), r"\bottomrule", r"\end{tabular}"]


def _csv(header: list[str], body: list[list]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(header)
    writer.writerows(body)
    return buffer.getvalue()


def _test_columns(test: dict | None, *keys: str) -> list:
    """A test's ``keys`` as CSV columns (``ci95`` as its two ends); empty for a missing or failed test."""
    found = test if test and "error" not in test else {}
    out = []
    for key in keys:
        out += (found.get("ci95") or [None, None]) if key == "ci95" else [found.get(key)]
    return out


def _mean_std(seeds: dict[int, float]) -> tuple[float | None, float | None]:
    """Mean and std over the seeds' scores (:func:`cn3.stats.mean_std`); ``(None, None)`` for no seed."""
    return mean_std(list(seeds.values())) if seeds else (None, None)


def _str_keys(seeds: dict) -> dict:
    """A seed-keyed mapping as JSON writes it (string keys), for the report's record."""
    return {str(k): v for k, v in seeds.items()}


# ---------------------------------------------------------------- the whole split


def rows(spec: ExperimentSpec, columns: dict[str, TaskColumn]) -> list[dict]:
    """One record per (variant, task): mean, std, n, per-seed scores, the paper's number, the test."""
    out = []
    for variant in spec.variants:
        for task, column in columns.items():
            seeds = column.scores.get(variant, {})
            mean, std = _mean_std(seeds)
            paper = spec.references.get(task, {}).get(variant)
            out.append({"variant": variant, "task": task, "split": column.split, "metric": column.metric,
                        **({"folds": column.folds} if column.folds else {}),
                        "selects_checkpoint": column.split in SELECTION_SPLITS,
                        "mean": mean, "std": std, "n": len(seeds), "seeds": seeds,
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
        text = _bold(text, fmt)
    if r["paper"] is None:
        return f"{text} [×]"
    return f"{text} [{float(r['paper'])}, {r['minus_paper']:+.2f}]"


def _p_text(test: dict | None) -> str:
    """A cell of the significance table: the difference [95% CI], the paired p (Holm-adjusted; beside one
    not significant, the detectable difference), Welch's p (:func:`cn3.stats.format_p`: never 0).
    """
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
    if fmt == "csv":
        return _csv(["variant", "task", "split", "metric", "mean", "std", "n", "paper", "minus_paper", "difference",
                     "ci_low", "ci_high", "p_paired", "p_holm", "detectable_paired", "p_welch", "detectable_welch",
                     "selects_checkpoint"],
                    [[r["variant"], r["task"], r["split"], r["metric"], r["mean"], r["std"], r["n"], r["paper"],
                      r["minus_paper"], *_test_columns(r["test"], "difference", "ci95", "p", "p_holm", "detectable",
                                                       "welch_p", "welch_detectable"),
                      r["selects_checkpoint"]] for r in records])
    best = _best(records)
    tasks = list(columns)
    header = ["variant"] + [f"{t} ({columns[t].metric or '?'}, {split_label(columns[t].split)}"
                            + (f", mean of {len(columns[t].folds)} folds" if columns[t].folds else "") + ")"
                            for t in tasks]
    by = {(r["variant"], r["task"]): r for r in records}
    table = [[v] + [_cell_text(by[(v, t)], best, fmt) for t in tasks] for v in spec.variants]
    notes = paper_notes(spec, budget)
    if fmt == "latex":
        return "\n".join(["% mean and std over seeds (seeds) [paper, cn3 - paper]; [x]: no number in the paper",
                          *_tex_table("l" + "r" * len(tasks), header, table), *(f"% {line}" for line in notes)])
    tests = [[v] + [_p_text(by[(v, t)]["test"]) or _untested(by[(v, t)], by[(spec.baseline, t)], spec.baseline)
                    for t in tasks] for v in spec.variants if v != spec.baseline]
    lines = [f"## {spec.name}: mean ± std (seeds) [paper, cn3 − paper]", "", *_md_table(header, table)]
    lines += ["", f"## against {spec.baseline}: difference [95% CI], paired p (Holm over tasks), Welch p across seeds",
              "", *_md_table(["variant", *tasks], tests)]
    lines += ["", f"`*`: Holm-adjusted paired p < {ALPHA}. Paired test: approximate randomization (sacreBLEU's "
              "paired test for BLEU) on the per-example predictions of the seeds both variants finished, pooled. "
              "Detectable: beside a test not significant at 0.05, the smallest difference it finds with power 0.8 "
              "(paired: from the per-item differences, normal approximation; Welch: from the seeds' pooled std). "
              "Best mean per task in bold; [paper's number, cn3 − paper]; [×]: no number in the paper."]
    if any(columns[t].split in SELECTION_SPLITS for t in tasks):
        lines += ["", "A split that selects the checkpoint (training kept its best evaluation there) flatters "
                      "every row alike; the paper's numbers are test scores."]
    if any(columns[t].folds for t in tasks):
        lines += ["", ("Cross-validated tasks (mean of n folds): a seed's score is the mean over its folds, counted "
                       "once all of them finished; the paired test pools every fold's test items "
                       "(each item once a seed).")]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


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
            parts.append(_bold(part, fmt) if option == r["chosen"] else part)
        return (", " if fmt == "latex" else " · ").join(parts)

    table = [[v] + [text(by.get((t, v))) for t in tasks] for v in variants]
    seeds = ", ".join(map(str, sorted({r["seed"] for r in rows_})))
    title = f"tuning: dev score of each option (seed {seeds})"
    if fmt == "latex":
        return "\n".join(["", f"% {title}, chosen in bold",
                          *_tex_table("l" + "l" * len(tasks), ["variant", *tasks], table)]) + "\n"
    return "\n".join(["", f"## {title}; the chosen one (bold) trains every seed", "",
                      *_md_table(["variant", *tasks], table)]) + "\n"


def render_gates(rows_: list[dict], fmt: str) -> str:
    """The gate table: per variant the mean local weight ``g`` over seeds and per layer (mean of seeds)."""
    table = []
    for r in rows_:
        mean, std = mean_std(list(r["seeds"].values()))
        layers = list(zip(*r["per_layer"].values()))
        table.append([r["variant"], r["task"], f"{_spread(mean, std, 3)} ({len(r['seeds'])})",
                      " / ".join(f"{statistics.fmean(v):.3f}" for v in layers)])
    header = ["variant", "task", "g", "per layer"]
    title = f"mean local gate g on {rows_[0]['split']}, mean ± std (seeds); per gated layer, lowest first"
    if fmt == "latex":
        return "\n".join(["", f"% {title}", *_tex_table("llrl", header, table)]) + "\n"
    return "\n".join(["", f"## {title}", "", *_md_table(header, table)]) + "\n"


def render_reused(reused: dict[str, str]) -> str:
    """Which cells were adopted from another finished run (:mod:`cn3.experiment.reuse`), if any."""
    if not reused:
        return ""
    return ("\nReused (same resolved config and seed, so trained once): "
            + "; ".join(f"{name} is {source}" for name, source in reused.items()) + ".\n")


def render_report(spec: ExperimentSpec, columns: dict[str, TaskColumn], fmt: str, budget: str | None,
                  tuning: list[dict], gates: list[dict], reused: dict[str, str]) -> str:
    """The report in one format: :func:`render`'s tables, then (not in CSV, whose lines are the main
    table's) the tuning and gate tables a grid has, and in Markdown the reused cells."""
    if fmt == "csv":
        return render(spec, columns, fmt, budget)
    return (render(spec, columns, fmt, budget) + (render_tuning(tuning, fmt) if tuning else "")
            + (render_gates(gates, fmt) if gates else "") + (render_reused(reused) if fmt == "md" else ""))


def report_record(spec: ExperimentSpec, columns: dict[str, TaskColumn], budget: str | None, wall: float | None,
                  counts: dict[str, int], tuning: list[dict], gates: list[dict], reused: dict[str, str]) -> dict:
    """The report as JSON (``report.json``): the settings of the tests, every row with its test, and
    the tuning, gates and reused cells a grid has."""
    return {"spec": spec.name, "baseline": spec.baseline, "alpha": ALPHA, "correction": "holm over tasks",
            "power": POWER, "paper": spec.paper or None, "differs": spec.differences(budget),
            "grid_wall_seconds": wall,
            "cells": counts,
            **({"reused": reused} if reused else {}),
            "rows": [{**r, "seeds": _str_keys(r["seeds"])} for r in rows(spec, columns)],
            **({"tuning": tuning} if tuning else {}),
            **({"gates": [{**g, "seeds": _str_keys(g["seeds"]), "per_layer": _str_keys(g["per_layer"])} for g in gates]}
               if gates else {})}


# ---------------------------------------------------------------- --by FIELD: per group of items


def grouped_rows(spec: ExperimentSpec, grouped: dict[str, GroupedColumn]) -> list[dict]:
    """One record per (task, variant, group): mean, std and n over seeds, the per-seed scores."""
    out = []
    for task, column in grouped.items():
        for variant in spec.variants:
            for label in column.groups:
                seeds = column.scores.get(variant, {}).get(label, {})
                mean, std = _mean_std(seeds)
                out.append({"task": task, "split": column.split, "metric": column.metric, "field": column.by,
                            "group": label, "unseen_in_training": column.unseen.get(label),
                            "items": sorted(column.items.get(label, ())), "variant": variant,
                            "mean": mean, "std": std, "n": len(seeds), "seeds": dict(sorted(seeds.items())),
                            "test": column.tests.get(variant, {}).get(label)})
    return out


def _group_test_text(test: dict | None) -> str:
    """``+4.69 (0.0002)* W 0.031``: the difference to the baseline, its Holm-adjusted paired p, and
    Welch's p across seeds when there is one."""
    if not test:
        return ""
    if "error" in test:
        return test["error"]
    star = "*" if test["p_holm"] < ALPHA else ""
    welch = f" W {format_p(test['welch_p'])}" if test.get("welch_p") is not None else ""
    return f"{test['difference']:+.2f} ({format_p(test['p_holm'])}){star}{welch}"


def _items_text(sizes: set[int]) -> str:
    return f"{min(sizes):,}" if len(sizes) == 1 else f"{min(sizes):,}–{max(sizes):,}"


def render_grouped(spec: ExperimentSpec, grouped: dict[str, GroupedColumn], fmt: str = "md") -> str:
    """The per-group table of every task (rows: variants; columns: the groups, those unseen in
    training marked †), as Markdown, CSV (one line per task, variant and group) or LaTeX."""
    records = grouped_rows(spec, grouped)
    if fmt == "csv":
        return _csv(["task", "split", "metric", "field", "group", "unseen_in_training", "items", "variant",
                     "mean", "std", "n", "seed_scores", "difference", "ci_low", "ci_high", "p_paired", "p_holm",
                     "p_welch"],
                    [[r["task"], r["split"], r["metric"], r["field"], r["group"], r["unseen_in_training"],
                      ";".join(map(str, r["items"])), r["variant"], r["mean"], r["std"], r["n"],
                      ";".join(f"{s}:{v}" for s, v in r["seeds"].items()),
                      *_test_columns(r["test"], "difference", "ci95", "p", "p_holm", "welch_p")] for r in records])
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
                cells.append(_bold(text, fmt) if r["mean"] == best[label] and len(spec.variants) > 1 else text)
            n = sorted({by[(task, variant, label)]["n"] for label in column.groups} - {0})
            body.append([f"{variant} ({'/'.join(map(str, n)) or 0})"] + cells)
        blocks.append(("table", task, column, (header, body)))
    if fmt == "latex":
        out = []
        for kind, task, column, content in blocks:
            if kind == "note":
                out.append(f"% {content}")
                continue
            header, body = content
            out += [f"% {task}: {column.metric} by {column.by} ({column.split}), mean ± std over seeds",
                    *_tex_table("l" + "r" * (len(header) - 1), header, body)]
        return "\n".join(out) + "\n"
    lines = []
    for kind, task, column, content in blocks:
        if kind == "note":
            lines += [content, ""]
            continue
        header, body = content
        lines += [f"## {spec.name}: {task}, {column.metric} by {column.by} ({column.split}), mean ± std over seeds",
                  "", *_md_table(header, body)]
        tested = [v for v in spec.variants if column.tests.get(v)]
        if tested:
            tests = [[v] + [_group_test_text(column.tests[v].get(label)) for label in column.groups] for v in tested]
            lines += ["", f"against {spec.baseline}: difference (Holm-adjusted paired p), W: Welch p across seeds", "",
                      *_md_table(header, tests)]
        lines.append("")
    lines.append(f"{UNSEEN_MARK}: no training item has this value (unseen in training). Rows: variant (seeds "
                 f"finished); items: the group's size in the scored split; best mean per group in bold. {BY_NOTE}")
    return "\n".join(lines) + "\n"


def grouped_record(spec: ExperimentSpec, grouped: dict[str, GroupedColumn], by: str, counts: dict[str, int]) -> dict:
    """The per-group report as JSON (``by-<field>.json``): every task's groups and every row with its test."""
    return {"spec": spec.name, "by": by, "note": BY_NOTE,
            "cells": counts,
            "tasks": {t: {"split": c.split, "metric": c.metric, "groups": c.groups, "note": c.note,
                          "unseen_in_training": {g: c.unseen.get(g) for g in c.groups}}
                      for t, c in grouped.items()},
            "rows": [{**r, "seeds": _str_keys(r["seeds"])} for r in grouped_rows(spec, grouped)]}
