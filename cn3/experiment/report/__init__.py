"""``cn3 experiment report``: the grid's table, mean ± std over seeds, with significance against the baseline.

Per task the score is the test split's when every finished cell of the task has one, else dev's
(SST here has no test labels), and BLEU on ``test2016`` (else ``val``) for translation; the header
names the split. For each variant against the baseline, per task:

* a **paired test** on per-example predictions (``RUN/predictions/<split>.json.xz``,
  :func:`cn3.run_dir.load_predictions`), the seeds both have pooled (seed s of the variant paired
  with seed s of the baseline on the same items):
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

``--by FIELD`` (:func:`report_by`) scores the same columns per group of items and tests every group
the same way (Holm over the groups of each variant and task).

The package is the report's three steps, each a module a reader can check alone, and the figures:

* :mod:`.collect`: cells -> :class:`~.collect.TaskColumn` (per group :class:`~.collect.GroupedColumn`,
  with the predictions and the data each run was scored on), and the grid's tuning, gates, reused
  cells and wall time;
* :mod:`.significance`: fills the columns' ``tests``, the whole split and the groups alike from one
  paired test, one Welch test and one Holm family; it loads the predictions of the whole split
  itself, only for the pairs it tests;
* :mod:`.render`: Markdown, LaTeX, CSV and the JSON record, from the columns alone (it reads no file);
* :mod:`.plot`: the PNGs.

Runs' results and predictions are read through :mod:`cn3.run_dir` only. Both pipelines below are
those steps in that order, so a change to how a cell is read, tested or printed is made once for
the table and ``--by``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from cn3.experiment.report.collect import (cell_counts, collect, collect_grouped, gate_rows, grid_wall,
                                           reused_cells, tuning_rows)
from cn3.experiment.report.plot import plot, plot_grouped
from cn3.experiment.report.render import grouped_record, render_grouped, render_report, report_record
from cn3.experiment.report.significance import grouped_significance, significance
from cn3.experiment.spec import Cell, ExperimentSpec


def _gridded(spec: ExperimentSpec, cells: list[Cell]) -> ExperimentSpec:
    """``spec`` with only the variants that have cells in this grid (a budget's or ``--only``'s
    selection), in the spec's order: the tables get no empty rows."""
    present = {cell.variant for cell in cells}
    return dataclasses.replace(spec, variants={v: o for v, o in spec.variants.items() if v in present})


def _write(out: Path, stem: str, fmt: str, text: str, rendered: Callable[[str], str], record: dict) -> None:
    """``<stem>.{md,csv,tex,json}`` in ``out`` (``text``, already rendered in ``fmt``, written as it is)."""
    out.mkdir(parents=True, exist_ok=True)
    for suffix, kind in (("md", "md"), ("csv", "csv"), ("tex", "latex")):
        (out / f"{stem}.{suffix}").write_text(text if kind == fmt else rendered(kind), encoding="utf-8")
    (out / f"{stem}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def report(spec: ExperimentSpec, cells: list[Cell], fmt: str = "md", out: Path | None = None,
           resamples: int = 10_000, draw: bool = True) -> tuple[str, dict]:
    """Collect, test and render; with ``out`` also write ``report.{md,csv,tex}``, ``report.json`` and
    (with ``draw``) ``report.png`` there. Returns the rendered table and the JSON record."""
    spec = _gridded(spec, cells)
    budget = next((c.budget for c in cells), None)
    columns = collect(cells)
    significance(spec, columns, resamples)
    tuning, gates, reused = tuning_rows(cells), gate_rows(cells), reused_cells(cells)

    def rendered(kind: str) -> str:
        return render_report(spec, columns, kind, budget, tuning, gates, reused)

    text = rendered(fmt)
    record = report_record(spec, columns, budget, grid_wall(cells), cell_counts(cells), tuning, gates, reused)
    if out is not None:
        _write(out, "report", fmt, text, rendered, record)
        if draw:
            plot(spec, columns, out / "report.png")
    return text, record


def report_by(spec: ExperimentSpec, cells: list[Cell], by: str, fmt: str = "md",
              out: Path | None = None, resamples: int = 10_000) -> tuple[str, dict]:
    """The grid's scores per group of items (``--by FIELD``), with the paired tests against the
    baseline per group; with ``out`` also write ``by-<field>.{md,csv,tex,json,png}`` there. Returns
    the rendered table and the JSON record (with ``plot``: the PNG's path, None when nothing was drawn)."""
    spec = _gridded(spec, cells)
    grouped = collect_grouped(collect(cells), by)
    grouped_significance(spec, grouped, resamples)

    def rendered(kind: str) -> str:
        return render_grouped(spec, grouped, kind)

    text = rendered(fmt)
    record = grouped_record(spec, grouped, by, cell_counts(cells))
    if out is not None:
        _write(out, f"by-{by}", fmt, text, rendered, record)
        record["plot"] = str(out / f"by-{by}.png") if plot_grouped(spec, grouped, out / f"by-{by}.png") else None
    return text, record
