"""The report's figures: per task the variants' seeds (:func:`plot`, ``report.png``) and per group of
items the variants' curves (:func:`plot_grouped`, ``by-<field>.png``). Both draw on matplotlib's
``Figure`` with its Agg canvas, as :mod:`cn3.sentence.grouped` does: no pyplot, so no backend is chosen and
no global figure state is left behind by a report written from a notebook or a test."""

from __future__ import annotations

import statistics
from pathlib import Path

from cn3.experiment.report.collect import GroupedColumn, TaskColumn
from cn3.experiment.spec import ExperimentSpec
from cn3.stats import mean_std
from cn3.util.atomic import atomic_write


def _panels(count: int, width: float, height: float, layout: str):
    """A figure of ``count`` panels side by side, each ``width`` by ``height`` inches, and its axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * count, height), layout=layout)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(1, count, squeeze=False)[0]


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda handle: fig.savefig(handle, format="png", dpi=120))


def plot(spec: ExperimentSpec, columns: dict[str, TaskColumn], path: Path) -> None:
    """One panel per task: each variant's per-seed scores (dots) and mean (bar), the paper's number as a red x."""
    tasks = [t for t, c in columns.items() if c.scores]
    if not tasks:
        return
    variants = list(spec.variants)
    fig, axes = _panels(len(tasks), max(4, 0.5 * len(variants)), 4, layout="tight")
    for ax, task in zip(axes, tasks):
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
    _save(fig, path)


def plot_grouped(spec: ExperimentSpec, grouped: dict[str, GroupedColumn], path: Path) -> bool:
    """One panel per task: the score against the group (numeric groups on a numeric axis), a line
    per variant with the seeds' std as error bars, the groups unseen in training shaded. Returns
    whether anything was drawn."""
    tasks = [t for t, c in grouped.items() if c.groups and not c.note]
    if not tasks:
        return False
    fig, axes = _panels(len(tasks), 8.0, 4.2, layout="constrained")
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
    _save(fig, path)
    return True
