"""``cn3 experiment run|report|compact``: a comparison table (tasks × variants × seeds) as two commands,
and the records of its grid kept small."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from cli.errors import user_errors
from cn3.experiment.spec import SPEC_DIR
from cn3.util.console import console

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
OUT_HELP = ("Where grids live: OUT/<spec>[-<budget>]/<task>/<variant>/seed<S> (seed<S>-fold<F> in a cross-validated "
            "task).")
ONLY_HELP = ("Restrict to some cells, e.g. --only task=trec,sick --only variant=lstm,cn3 --only seed=1 "
             "(or in one: task=trec,sick,variant=lstm); --only fold=1,2 keeps the cells of those folds of the "
             "cross-validated tasks (the spec's `folds`). In a tuned grid the tuning cells of the selected "
             "tasks and variants always belong: the seed cells need them.")


class LauncherName(str, Enum):
    local = "local"
    ray = "ray"
    slurm = "slurm"


class Format(str, Enum):
    md = "md"
    csv = "csv"
    latex = "latex"


def parse_only(values: list[str] | None) -> dict[str, set[str]]:
    """``["task=trec,sick,variant=lstm", "seed=1"]`` ->
    ``{"task": {"trec", "sick"}, "variant": {"lstm"}, "seed": {"1"}}``."""
    only: dict[str, set[str]] = {}
    for text in values or []:
        key = None
        for piece in text.split(","):
            if "=" in piece:
                key, piece = piece.split("=", 1)
                key = key.strip()
                if key not in ("task", "variant", "seed", "fold"):
                    raise typer.BadParameter(f"--only {text!r}: '{key}' is not task, variant, seed or fold")
            if key is None:
                raise typer.BadParameter(f"--only {text!r}: expected key=value, e.g. task=trec")
            only.setdefault(key, set()).add(piece.strip())
    return only


def _experiment(spec_name: str, budget: str | None, out: Path, only: list[str] | None):
    """The grid of ``spec_name`` and its cells selected by ``--only``, of which there must be some."""
    from cn3.config import ConfigError
    from cn3.experiment.run import Experiment

    experiment = Experiment.load(spec_name, out, budget)
    experiment.only = parse_only(only)
    cells = experiment.cells()
    if not cells:
        raise ConfigError(f"--only {' '.join(only or [])}: no cell of {experiment.spec.name} matches")
    return experiment, cells


def _cells(spec_name: str, budget: str | None, out: Path, only: list[str] | None):
    experiment, cells = _experiment(spec_name, budget, out, only)
    return experiment.spec, cells


def parse_slurm_options(values: list[str] | None) -> dict[str, str]:
    """``["account=proj", "mem=16G"]`` -> ``{"account": "proj", "mem": "16G"}``: sbatch's
    ``--account=proj --mem=16G``."""
    options = {}
    for text in values or []:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"--slurm-option {text!r}: expected key=value, e.g. account=myproject")
        options[key.strip().removeprefix("--")] = value.strip()
    return options


def make_launcher(launcher: LauncherName, grid: Path, address: str | None, cpus: float | None,
                  gpus: float | None, partition: str | None, time_min: int | None, slurm_options: list[str] | None,
                  threads: int | None):
    """The launcher ``run`` starts cells with; an option meant for another launcher is an error rather than ignored."""
    from cn3.experiment.launchers import LocalLauncher, RayLauncher, SlurmLauncher

    given = {"--address": address, "--cpus-per-cell": cpus, "--gpus-per-cell": gpus, "--partition": partition,
             "--time": time_min, "--slurm-option": slurm_options or None}
    allowed = {LauncherName.local: set(), LauncherName.ray: {"--address", "--cpus-per-cell", "--gpus-per-cell"},
               LauncherName.slurm: {"--cpus-per-cell", "--gpus-per-cell", "--partition", "--time", "--slurm-option"}}
    for option, value in given.items():
        if value is not None and option not in allowed[launcher]:
            users = [name.value for name, options in allowed.items() if option in options]
            raise typer.BadParameter(f"{option} is for --launcher {' or '.join(users)}, not {launcher.value}")
    cpus = cpus or threads or 1  # a cell's torch threads get a core each
    if launcher is LauncherName.ray:
        return RayLauncher(address, cpus, gpus or 0)
    if launcher is LauncherName.slurm:
        if cpus != int(cpus) or (gpus or 0) != int(gpus or 0):
            raise typer.BadParameter("Slurm allocates whole CPUs and GPUs: give --cpus-per-cell and --gpus-per-cell "
                                     "as integers (several cells share a GPU with --launcher ray)")
        return SlurmLauncher(grid / "submitit", partition, time_min or 720, int(cpus), int(gpus or 0),
                             parse_slurm_options(slurm_options))
    return LocalLauncher()


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


RUN_BUDGET_HELP = ("A budget of the spec (e.g. smoke, cpu, paper): overrides that shrink or grow the grid and its "
                   "trainings.")
JOBS_HELP = ("Cells trained at once: processes on this machine (default 1); with ray or slurm, at most this many "
             "cells handed to the cluster at once (default: all, the cluster queues them).")
THREADS_HELP = ("torch threads per cell (default: the CPU cores divided by --jobs; with ray or slurm, "
                "--cpus-per-cell).")
REUSE_HELP = ("Adopt, instead of training, a cell whose resolved config (seed and threads included) equals a "
              "finished run's anywhere under --out (its files are linked in, RUN/reused.json names the run). "
              "Assumes one data root and one machine per --out; --no-reuse trains every cell itself.")
LAUNCHER_HELP = ("What trains the cells: processes on this machine; Ray tasks on a Ray cluster (pip install "
                 "'cn3\\[ray]'); or Slurm jobs through submitit (pip install 'cn3\\[slurm]'). Ray and Slurm need "
                 "--out, the data and cn3 on a file system every worker sees (README: Grids on a cluster).")
ADDRESS_HELP = ("ray: the cluster to send cells to, e.g. head:6379 or ray://head:10001 (default: $RAY_ADDRESS, "
                "else a Ray started on this machine for the run).")
CPUS_HELP = "ray, slurm: CPUs reserved for each cell (default: --threads, else 1)."
GPUS_HELP = ("ray, slurm: GPUs for each cell (default 0: CPU only). On Ray a fraction shares a GPU, e.g. 0.25 = "
             "four cells on one; each cell sees only its GPUs (CUDA_VISIBLE_DEVICES).")
TIME_HELP = ("slurm: each cell's time limit in minutes (default 720). A cell cut off saves latest.pt and "
             "continues when the grid is run again.")
SLURM_OPTION_HELP = ("slurm: another sbatch option as key=value, e.g. --slurm-option account=myproject "
                     "--slurm-option mem=16G (repeatable).")


@experiment_app.command("run")
def run_command(
    spec: str = typer.Argument(..., help=SPEC_HELP),
    budget: str = typer.Option(None, "--budget", "-b", help=RUN_BUDGET_HELP),
    jobs: int = typer.Option(None, "--jobs", "-j", min=1, help=JOBS_HELP),
    threads: int = typer.Option(None, "--threads", min=1, help=THREADS_HELP),
    only: list[str] = typer.Option(None, "--only", help=ONLY_HELP),
    out: Path = typer.Option(Path("runs/experiments"), "--out", "-o", help=OUT_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help="List the cells, their state and command; train nothing."),
    reuse: bool = typer.Option(True, "--reuse/--no-reuse", help=REUSE_HELP),
    launcher: LauncherName = typer.Option(LauncherName.local, "--launcher", "-l", help=LAUNCHER_HELP),
    address: str = typer.Option(None, "--address", help=ADDRESS_HELP),
    cpus: float = typer.Option(None, "--cpus-per-cell", min=0.01, help=CPUS_HELP),
    gpus: float = typer.Option(None, "--gpus-per-cell", min=0, help=GPUS_HELP),
    partition: str = typer.Option(None, "--partition", help="slurm: the partition (default: the cluster's)."),
    time_min: int = typer.Option(None, "--time", min=1, help=TIME_HELP),
    slurm_options: list[str] = typer.Option(None, "--slurm-option", help=SLURM_OPTION_HELP),
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

    --launcher ray or slurm sends each cell to a cluster instead, as a Ray task or a Slurm job with
    the CPUs and GPUs asked for; the run directories, resume, reuse and the report are the same, and
    the progress table names the worker each cell runs on.

    Examples:

        cn3 experiment run liu-table3 --budget smoke --jobs 2

        cn3 experiment run xu-window --only variant=m1,m2 --dry-run

        cn3 experiment run my-spec.yaml --jobs 4 --threads 2

        cn3 experiment run liu-table3 --launcher ray --address head:6379 --gpus-per-cell 0.25

        cn3 experiment run liu-table3 --launcher slurm --partition gpu --gpus-per-cell 1 --time 120
    """
    from cn3.experiment.run import parallelism
    from cn3.experiment.spec import check_variant_options

    with user_errors():
        experiment, cells = _experiment(spec, budget, out, only)
        check_variant_options(experiment.spec)
        chosen = make_launcher(launcher, experiment.directory, address, cpus, gpus, partition, time_min,
                               slurm_options, threads)
        jobs, threads = parallelism(chosen, jobs, threads)
        if dry_run:
            _print_plan(experiment, cells, chosen.describe(jobs, threads), threads, reuse)
            return
        outcome = _train(experiment, chosen, jobs, threads, reuse)
    _report_outcome(outcome)


def _print_plan(experiment, cells: list, launching: str, threads: int, reuse: bool) -> None:
    """The dry run's table: each cell, its state and the command that would train it."""
    from rich.markup import escape
    from rich.table import Table

    from cn3.experiment.run import plan_cells

    budget = experiment.budget
    table = Table(title=f"{experiment.spec.name}{f' ({budget})' if budget else ''}: {len(cells)} cells, {launching}",
                  title_justify="left")
    for col in ("cell", "state", "command"):
        table.add_column(col)
    for planned in plan_cells(cells, threads, reuse):
        table.add_row(planned.cell.name, planned.state, escape(planned.command))
    console.print(table)


def _train(experiment, launcher, jobs: int | None, threads: int, reuse: bool):
    """Train the grid; Ctrl-C ends the command with exit code 130, every running cell saved."""
    try:
        return experiment.run(launcher, jobs, threads, reuse)
    except KeyboardInterrupt:
        console.print("[yellow]stopped[/]: running cells saved their latest.pt; run the same command to go on")
        raise typer.Exit(130) from None


def _report_outcome(outcome) -> None:
    """How the cells ended, and for each failed one where to look and its last log lines; exit code 1
    when one failed."""
    from rich.markup import escape

    from cn3.experiment.run import failure_lines

    console.print(outcome.summary())
    for s in outcome.failed:
        console.print(f"  [red]{escape(s.cell.name)}[/]: see {s.cell.run_dir / 'experiment.log'}"
                      + (f" (worker {escape(s.worker)})" if s.worker else ""))
        for line in failure_lines(s.cell.run_dir):
            console.print(f"    {escape(line)}", highlight=False, soft_wrap=True)
    if outcome.failed:
        raise typer.Exit(1)


@experiment_app.command("compact")
def compact_command(
    grids: list[Path] = typer.Argument(..., help="Grid directories (OUT/<spec>[-<budget>]), or any folder of "
                                       "finished runs; each keeps the shared gold in its gold/ folder."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would change; write nothing."),
) -> None:
    """Keep each split's gold once per grid: the runs' predictions name it instead of repeating it.

    Every cell of a grid is scored on the same items, so each predictions file repeats the same gold
    (Multi30k's test2016 references are half a translation cell). For every finished run under
    GRID (results.json), each predictions/<split>.json.xz that still holds its gold has it moved into
    GRID/gold/<split>.<sha256>.json.xz, written once, and keeps only a reference to it and, for labels
    and tags, the items where the prediction differs; a log line repeating results.json is shortened.
    Reports, `cn3 compare` and everything else read the predictions as before (a run found away from its
    grid's gold/ says which file it misses). `cn3 experiment run` does this to every cell it finishes;
    this command is for records written before, or by another cn3. Idempotent; every file is written
    atomically and checked to read back as before; a run that a process is training is left alone.

    Examples:

        cn3 experiment compact runs/experiments/xu-table1 runs/experiments/xu-window

        cn3 experiment compact docs/runs/experiments/liu-table3-cpu --dry-run
    """
    from cn3.config import ConfigError
    from cn3.experiment.reuse import _STAGING
    from cn3.runs.compaction import Compaction, compact_run
    from cn3.runs.records import GOLD_DIR, RESULTS_FILE

    with user_errors():
        for grid in grids:
            if not grid.is_dir():
                raise ConfigError(f"{grid}: not a directory")
            stats = Compaction()
            for results in sorted(grid.rglob(RESULTS_FILE)):
                if not any(part.endswith(_STAGING) for part in results.parent.relative_to(grid).parts):
                    compact_run(results.parent, grid / GOLD_DIR, write=not dry_run, into=stats)
            before = sum(b for b, _ in stats.rewritten.values())
            after = sum(a for _, a in stats.rewritten.values())
            added = sum(stats.gold.values())
            console.print(f"{grid}: {stats.runs} runs, {len(stats.rewritten)} files "
                          f"{'to rewrite' if dry_run else 'rewritten'} ({before / 1e3:,.1f} KB -> {after / 1e3:,.1f} "
                          f"KB), {len(stats.gold)} gold files {'to write' if dry_run else 'written'} "
                          f"({added / 1e3:,.1f} KB): {stats.saved() / 1e3:,.1f} KB saved"
                          + (f"; {len(stats.busy)} runs left alone, a process holds them: run again when it is "
                             f"done ({', '.join(map(str, stats.busy[:3]))})" if stats.busy else ""),
                          highlight=False, markup=False, soft_wrap=True)


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
    plot: bool = typer.Option(True, "--plot/--no-plot", help="With --out, also draw report.png. Its bars do not "
                              "depend on --baseline: a --baseline report of the same cells can leave the plot to "
                              "the spec baseline's report (the shipped reports do, to keep the tree lean)."),
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
            text, record = report(spec_obj, cells, fmt.value, out, resamples, draw=plot)
    print(text, end="")
    finished = record["cells"]
    wall = record.get("grid_wall_seconds")
    console.print(f"{finished['finished']}/{finished['total']} cells finished"
                  + (f"; grid wall time {wall / 60:.1f} min" if wall else "")
                  + (f"; wrote {out}/{f'by-{by}' if by else 'report'}.*" if out else ""))
