"""Learning curves from ``RUN/metrics.jsonl``: one or several runs on one figure (matplotlib, Agg).

Each run draws its own (``RUN/curves.png``); ``cn3 plot`` draws several, one colour per run. Panels:
``loss`` (train loss, dev loss dashed where recorded), ``dev`` (``dev`` under its ``metric`` name, or
``dev_bleu``), or any other numeric key of the records. The x axis is the update step.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from cn3.config import ConfigError
from cn3.runs.layout import RunDir
from cn3.util.atomic import atomic_write

#: the panels of a run's own figure
DEFAULT_PANELS = ("loss", "dev")
#: ``--out`` extensions matplotlib writes without extra packages
FORMATS = (".png", ".svg", ".pdf")


def read_metrics(run: str | Path) -> list[dict]:
    """The evaluation records of ``run``; a ConfigError when it has none to draw."""
    path = RunDir(run).metrics
    if not path.is_file():
        raise ConfigError(f"{run} has no metrics.jsonl (not a training run, or stopped before its first evaluation)")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                raise ConfigError(f"{path}, line {number}: not a JSON record") from None
    if not records:
        raise ConfigError(f"{path} is empty: the run has not finished an evaluation yet")
    return records


def run_labels(runs: Sequence[str | Path]) -> list[str]:
    """Legend names: each run's directory name, or the path as given when two runs share a name."""
    names = [Path(run).name for run in runs]
    return names if len(set(names)) == len(names) else [str(run) for run in runs]


def dev_key(records: list[dict]) -> str:
    """The key holding the run's dev score (the one ``best.pt`` follows)."""
    return "dev" if any("dev" in r for r in records) else "dev_bleu"


def is_number(value) -> bool:
    """A value that can be drawn (not a flag such as ``"stop": true``, nor the ``metric`` name)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def series(records: list[dict], key: str) -> tuple[list[int], list[float]]:
    """``(steps, values)`` of ``key`` over the records that have a number under it."""
    points = [(r["step"], r[key]) for r in records if is_number(r.get(key))]
    return [s for s, _ in points], [v for _, v in points]


def lines(records: list[dict], panel: str, label: str) -> list[tuple[list, list, str, str]]:
    """What one run draws on ``panel``: ``(steps, values, legend label, line style)`` per line;
    a ConfigError naming the keys the run has when it has nothing for the panel."""
    if panel == "loss":
        wanted = [("train_loss", label, "-")]
        if series(records, "dev_loss")[0]:
            wanted = [("train_loss", f"{label} (train)", "-"), ("dev_loss", f"{label} (dev)", "--")]
    else:
        wanted = [(dev_key(records) if panel == "dev" else panel, label, "-")]
    drawn = [(*series(records, key), text, style) for key, text, style in wanted]
    if not drawn[0][0]:
        keys = sorted({k for r in records for k, v in r.items() if is_number(v)})
        raise ConfigError(f"{label}: metrics.jsonl has no {wanted[0][0]!r} (it has: {', '.join(keys)})")
    return drawn


def panel_title(panel: str, runs: list[list[dict]]) -> str:
    """The y-axis label: the dev panel names its metrics (``accuracy``, ``span_f1``, ``BLEU``); the
    loss panel says it is the train loss alone when no run records a dev loss."""
    if panel == "loss":
        return "loss" if any(series(records, "dev_loss")[0] for records in runs) else "train loss"
    if panel != "dev":
        return panel
    names = sorted({(r.get("metric") or "score") if dev_key(records) == "dev" else "BLEU"
                    for records in runs for r in records})
    return "dev " + " / ".join(names)


def plot_runs(runs: Sequence[str | Path], out: str | Path, panels: Sequence[str] = DEFAULT_PANELS) -> Path:
    """Draw ``runs`` (each a run directory) on one figure with one panel per name of ``panels`` and
    write it to ``out`` (format from the extension), atomically. Every run is read and checked
    before anything is drawn, so a bad run leaves no half figure. Returns ``out``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out = Path(out)
    if out.suffix.lower() not in FORMATS:
        raise ConfigError(f"--out {out}: unsupported extension {out.suffix or '(none)'!r}; "
                          f"use one of {', '.join(FORMATS)}")
    labels = run_labels(runs)
    records = [read_metrics(run) for run in runs]
    drawn = [[lines(r, panel, label) for r, label in zip(records, labels)] for panel in panels]
    # a Figure on its own Agg canvas: no pyplot, so no global backend or figure state to disturb
    fig = Figure(figsize=(5.5 * len(panels), 4.0), layout="constrained")
    FigureCanvasAgg(fig)
    for ax, panel, per_run in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels, drawn):
        for colour, run_lines in enumerate(per_run):
            for steps, values, text, style in run_lines:
                ax.plot(steps, values, style, color=f"C{colour % 10}", marker="o", markersize=3, label=text)
        ax.set_xlabel("step")
        ax.set_ylabel(panel_title(panel, records))
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    atomic_write(out, lambda handle: fig.savefig(handle, format=out.suffix[1:].lower(), dpi=120))
    return out
