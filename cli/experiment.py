"""``cn3 experiment run|report``: a comparison table (tasks × variants × seeds) as two commands."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from cli.errors import user_errors
from cn3.experiment.spec import SPEC_DIR
from data_prep.console import console

experiment_app = typer.Typer(
    help="The papers' comparison tables as commands: train a grid of cells, then report mean ± std "
         "over seeds with paired significance tests against a baseline.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

SPEC_HELP = ("An experiment spec: a YAML file, or the name of a shipped one "
             f"({', '.join(sorted(p.stem for p in SPEC_DIR.glob('*.yaml')))}), by name or as "
             "configs/experiments/<name>.yaml (they live in cn3/configs/experiments/).")
OUT_HELP = "Where grids live: OUT/<spec>[-<budget>]/<task>/<variant>/seed<S>."
ONLY_HELP = ("Restrict to some cells, e.g. --only task=trec,sick --only variant=lstm,cn3 --only seed=1 "
             "(or in one: task=trec,sick,variant=lstm). In a tuned grid the tuning cells of the selected "
             "tasks and variants always belong: the seed cells need them.")


class Format(str, Enum):
    md = "md"
    csv = "csv"
    latex = "latex"


def parse_only(values: list[str] | None) -> dict[str, set[str]]:
    """``["task=trec,sick,variant=lstm", "seed=1"]`` -> ``{"task": {"trec", "sick"}, "variant": {"lstm"}, "seed": {"1"}}``."""
    only: dict[str, set[str]] = {}
    for text in values or []:
        key = None
        for piece in text.split(","):
            if "=" in piece:
                key, piece = piece.split("=", 1)
                key = key.strip()
                if key not in ("task", "variant", "seed"):
                    raise typer.BadParameter(f"--only {text!r}: '{key}' is not task, variant or seed")
            if key is None:
                raise typer.BadParameter(f"--only {text!r}: expected key=value, e.g. task=trec")
            only.setdefault(key, set()).add(piece.strip())
    return only


def _cells(spec_name: str, budget: str | None, out: Path, only: list[str] | None):
    from cn3.config import ConfigError
    from cn3.experiment.spec import load_spec

    spec = load_spec(spec_name)
    cells = spec.cells(out, budget, parse_only(only))
    if not cells:
        raise ConfigError(f"--only {' '.join(only or [])}: no cell of {spec.name} matches")
    return spec, cells


def with_baseline(spec, baseline: str, cells):
    """``spec`` with another baseline, which must be a variant with cells in this grid."""
    import dataclasses
    import difflib

    from cn3.config import ConfigError

    present = [v for v in spec.variants if any(c.variant == v for c in cells)]
    if baseline not in present:
        close = difflib.get_close_matches(baseline, present, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ConfigError(f"--baseline {baseline}: not a variant of this grid{hint} (variants: {', '.join(present)})")
    return dataclasses.replace(spec, baseline=baseline)


@experiment_app.command("run")
def run_command(
    spec: str = typer.Argument(..., help=SPEC_HELP),
    budget: str = typer.Option(None, "--budget", "-b", help="A budget of the spec (e.g. smoke, cpu, paper): "
                               "overrides that shrink or grow the grid and its trainings."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Cells trained at once, as separate processes."),
    threads: int = typer.Option(None, "--threads", min=1, help="torch threads per cell (default: the CPU "
                                "cores divided by --jobs)."),
    only: list[str] = typer.Option(None, "--only", help=ONLY_HELP),
    out: Path = typer.Option(Path("runs/experiments"), "--out", "-o", help=OUT_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help="List the cells, their state and command; train nothing."),
    reuse: bool = typer.Option(True, "--reuse/--no-reuse", help="Adopt, instead of training, a cell whose resolved "
                               "config (seed and threads included) equals a finished run's anywhere under --out "
                               "(its files are linked in, RUN/reused.json names the run). Assumes one data root "
                               "and one machine per --out; --no-reuse trains every cell itself."),
) -> None:
    """Train every cell of a spec that is not finished.

    Every cell's config is checked before anything trains (a bad key or value names the cell). A
    finished cell is skipped, an interrupted one continues exactly where it stopped, a failed one is
    recorded (RUN/cell.failed, RUN/experiment.log) and the grid goes on. Ctrl-C stops the grid with
    every running cell saved; run the same command again to finish it.

    Grids overlap (xu-window's m1 is xu-table1's hybrid-gate): a cell that a finished run under --out
    already is, same config and seed, is adopted rather than trained again (state "reused").

    A spec with a `tune` block first trains each option for every task and variant (cells
    tune-<option>), then every seed with the option that scored best on dev.

    Examples:

        cn3 experiment run liu-table3 --budget smoke --jobs 2

        cn3 experiment run xu-window --only variant=m1,m2 --dry-run

        cn3 experiment run my-spec.yaml --jobs 4 --threads 2
    """
    from rich.markup import escape
    from rich.table import Table

    from cn3.experiment.reuse import FinishedRuns
    from cn3.experiment.runner import cell_state, check_cells, default_threads, run_spec

    with user_errors():
        spec_obj, cells = _cells(spec, budget, out, only)
        threads = threads or default_threads(jobs)
        if dry_run:
            resolved, finished = check_cells(cells, threads), FinishedRuns()
            table = Table(title=f"{spec_obj.name}{f' ({budget})' if budget else ''}: {len(cells)} cells, "
                                f"{jobs} at a time, {threads} thread(s) each", title_justify="left")
            for col in ("cell", "state", "command"):
                table.add_column(col)
            for cell in cells:
                state = cell_state(cell)
                twin = finished.twin(cell, resolved[cell.name]) if reuse and state == "queued" else None
                if twin is not None:
                    state, command = "reusable", f"(adopts {twin}: same config and seed)"
                elif cell.waiting:
                    command = "(its config is known once its task and variant are tuned)"
                else:
                    command = "cn3 " + " ".join(cell.command(threads, state == "interrupted"))
                table.add_row(cell.name, state, escape(command))
            console.print(table)
            return
        try:
            states = run_spec(spec_obj, lambda: _cells(spec, budget, out, only)[1], jobs, threads, reuse)
        except KeyboardInterrupt:
            console.print("[yellow]stopped[/]: running cells saved their latest.pt; run the same command to go on")
            raise typer.Exit(130) from None
    failed = [s for s in states if s.state == "failed"]
    done = sum(s.state in ("done", "skipped", "reused") for s in states)
    reused = sum(s.state == "reused" for s in states)
    elsewhere = sum(s.state == "elsewhere" for s in states)
    waiting = sum(s.state == "waiting" for s in states)
    console.print(f"{done}/{len(states)} cells finished"
                  + (f" ({reused} reused from finished runs with the same config)" if reused else "")
                  + (f", {elsewhere} being trained by another process" if elsewhere else "")
                  + (f", {waiting} waiting for tuning that is not finished" if waiting else "")
                  + (f", {len(failed)} failed:" if failed else ""))
    for s in failed:
        console.print(f"  [red]{s.cell.name}[/]: see {s.cell.run_dir / 'experiment.log'}")
    if failed:
        raise typer.Exit(1)


@experiment_app.command("report")
def report_command(
    spec: str = typer.Argument(..., help=SPEC_HELP),
    budget: str = typer.Option(None, "--budget", "-b", help="The budget the grid was run with."),
    fmt: Format = typer.Option(Format.md, "--format", "-f", help="Table format on stdout."),
    out: Path = typer.Option(None, "--out", help="Also write report.md/.csv/.tex/.json and report.png here."),
    only: list[str] = typer.Option(None, "--only", help=ONLY_HELP),
    runs: Path = typer.Option(Path("runs/experiments"), "--runs", help=OUT_HELP),
    resamples: int = typer.Option(10_000, "--resamples", min=100, help="Trials of the paired tests."),
    baseline: str = typer.Option(None, "--baseline", help="Test every variant against this one instead of the "
                                 "spec's baseline (e.g. --baseline pdgraph: does CN3 beat the dependency GCN?)."),
    by: str = typer.Option(None, "--by", help="Instead: the score per group of items, by a per-item field (a "
                           "key of the items' meta, e.g. n_ops for logic; length; source): a table per task, "
                           "variants x groups, groups unseen in training marked; --out writes "
                           "by-FIELD.md/.csv/.tex/.json/.png."),
) -> None:
    """Tabulate a grid: mean ± std over seeds per variant and task, the paper's number beside it, and
    each variant against the spec's baseline (paired test on per-example predictions of matched
    seeds, Holm-corrected over tasks; Welch's t across seeds).

    Examples:

        cn3 experiment report liu-table3 --budget smoke

        cn3 experiment report xu-table1 --format latex --out docs/runs/xu-table1

        cn3 experiment report logic-length --budget cpu --by n_ops --out docs/runs/logic-length

        cn3 experiment report liu-table3 --budget cpu --baseline pdgraph

    --by FIELD scores each finished cell's predictions per group of items instead (as `cn3 evaluate
    --by` scores one run): mean ± std over seeds per variant and group, the groups that no training
    item has marked †, and each variant's paired test against the baseline per group (Holm over the
    groups) with Welch's t across seeds.

    A tuned grid's report adds each option's dev score per task and variant, the chosen one in bold.
    """
    from cn3.experiment.report import report, report_by

    with user_errors():
        spec_obj, cells = _cells(spec, budget, runs, only)
        if baseline is not None:
            spec_obj = with_baseline(spec_obj, baseline, cells)
        if by is not None:
            text, record = report_by(spec_obj, cells, by, fmt.value, out, resamples)
        else:
            text, record = report(spec_obj, cells, fmt.value, out, resamples)
    print(text, end="")
    finished = record["cells"]
    wall = record.get("grid_wall_seconds")
    console.print(f"{finished['finished']}/{finished['total']} cells finished"
                  + (f"; grid wall time {wall / 60:.1f} min" if wall else "")
                  + (f"; wrote {out}/{f'by-{by}' if by else 'report'}.*" if out else ""))
