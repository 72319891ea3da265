"""``cn3 experiment report``: the grid's table, mean ± std over seeds, with significance against the baseline.

Per task the score is the test split's when every finished cell of the task has one, else dev's
(SST has no test labels), and BLEU on ``test2016`` (else ``val``) for translation; the header
names the split, and calls it a selection split where training also chose its checkpoint there.
For each variant against the baseline, per task:

* a **paired test** on per-example predictions (``RUN/predictions/<split>.json.xz``), matched seeds
  pooled: approximate randomization for accuracy, span F1 and token accuracy, sacreBLEU's paired
  test for BLEU (:mod:`cn3.stats`), with the 95% bootstrap interval of the difference;
* **Welch's t-test across seeds** on the per-seed scores (2 seeds a side or more);
* **Holm's correction** of each variant's paired p over the tasks it is tested on (raw and adjusted
  p are reported);
* beside a test that is **not significant**, the smallest difference it could have detected
  (:func:`cn3.stats.detectable_paired`, :func:`cn3.stats.detectable_welch`).

Beside each cell: the spec's ``references`` and ``cn3 - paper``; under the table, ``paper`` and
``differs``. A tuned grid (:mod:`cn3.experiment.tuning`) adds a tuning table (every option's dev
score, the chosen one in bold); translation runs of a gated hybrid encoder add a table of their
mean local gate on val (Xu et al. Fig. 2). ``--by FIELD`` (:func:`report_by`) scores and tests the
same columns per group of items (Holm over the groups of each variant and task).

Steps: :mod:`.collect` (cells -> columns), :mod:`.significance` (the tests), :mod:`.render`
(Markdown, LaTeX, CSV, JSON; reads no file), :mod:`.plot` (PNGs). :func:`report` and
:func:`report_by` run the same steps in that order.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from cn3.experiment.report.collect import (
    cell_counts,
    collect,
    collect_grouped,
    gate_rows,
    grid_wall,
    reused_cells,
    tuning_rows,
)
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
