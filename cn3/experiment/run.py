"""Train a spec's grid from Python, as ``cn3 experiment run`` does: pick its cells, list what a run
would do (the dry run), train every cell that is not finished, and sum up how the cells ended.

The training itself is :func:`cn3.experiment.runner.run_spec`; this module adds the grid's selection,
the launcher's parallelism defaults, opening and closing the launcher, and the outcome.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from cn3.experiment.launchers import Launcher, LocalLauncher
from cn3.experiment.runner import FAILED, CellState
from cn3.experiment.spec import Cell, ExperimentSpec

#: where grids live unless told otherwise: OUT/<spec>[-<budget>]/<task>/<variant>/seed<S>
DEFAULT_OUT = Path("runs/experiments")


@dataclass
class Experiment:
    """A spec's grid under ``out`` and ``budget``, narrowed to some cells by ``only``
    (``{"task": {...}, "variant": {...}, "seed": {...}, "fold": {...}}``, as :meth:`ExperimentSpec.cells`)."""

    spec: ExperimentSpec
    out: Path = DEFAULT_OUT
    budget: str | None = None
    only: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def load(cls, spec: str | Path | ExperimentSpec, out: str | Path = DEFAULT_OUT, budget: str | None = None,
             only: dict[str, set[str]] | None = None) -> Experiment:
        """The grid of ``spec``: a spec, its YAML file, or the name of a shipped one.

        Raises:
            ConfigError: no such spec, or a bad one.
        """
        from cn3.experiment.spec import load_spec

        spec = spec if isinstance(spec, ExperimentSpec) else load_spec(spec)
        return cls(spec, Path(out), budget, dict(only or {}))

    @property
    def directory(self) -> Path:
        """Where the grid's cells (and its report) live."""
        return self.spec.directory(self.out, self.budget)

    def cells(self) -> list[Cell]:
        """The selected cells, in the order they run; listed anew each time (tuning resolves cells).

        Raises:
            ConfigError: no such budget.
        """
        return self.spec.cells(self.out, self.budget, self.only)

    def plan(self, threads: int, reuse: bool = True) -> list[PlannedCell]:
        """What :meth:`run` would do with each cell, training nothing (``--dry-run``).

        Raises:
            ConfigError: a cell's config does not resolve, or its run directory holds another config.
        """
        return plan_cells(self.cells(), threads, reuse)

    def run(self, launcher: Launcher | None = None, jobs: int | None = None, threads: int | None = None,
            reuse: bool = True) -> GridOutcome:
        """Train every selected cell that is not finished (:func:`cn3.experiment.runner.run_spec`).

        Args:
            launcher: what trains the cells (default :class:`LocalLauncher`); opened here and closed
                when the grid ends, however it ends.
            jobs, threads: as :func:`parallelism` settles them.
            reuse: adopt a queued cell's finished twin under ``out`` instead of training it.

        Returns:
            The :class:`GridOutcome`.

        Raises:
            ConfigError: a cell's config does not resolve (before anything trains); a cluster that
                cannot be reached.
            KeyboardInterrupt: Ctrl-C or SIGTERM, every running cell saved.
        """
        from cn3.experiment.runner import run_spec

        launcher = launcher or LocalLauncher()
        jobs, threads = parallelism(launcher, jobs, threads)
        try:
            launcher.open()  # a cluster that cannot be reached fails here, before any cell is listed as started
            states = run_spec(self.spec, self.cells, jobs, threads, reuse, launcher)
        finally:
            launcher.close()
        return GridOutcome(states)


def parallelism(launcher: Launcher, jobs: int | None, threads: int | None) -> tuple[int | None, int]:
    """``(jobs, threads)`` as a grid runs with ``launcher``: on this machine one cell at a time unless
    told otherwise (a cluster takes all at once, ``None``, and queues them); torch threads per cell as
    the launcher divides its cores (:meth:`Launcher.default_threads`) unless given."""
    if launcher.name == "local":
        jobs = jobs or 1
    return jobs, threads or launcher.default_threads(jobs)


@dataclass
class PlannedCell:
    """A cell in a dry run: its ``state`` (:func:`cn3.experiment.runner.cell_state`, or ``reusable``)
    and what running the grid would do with it (``command``: its ``cn3`` command line, or a sentence)."""

    cell: Cell
    state: str
    command: str


def plan_cells(cells: list[Cell], threads: int, reuse: bool = True) -> list[PlannedCell]:
    """Each cell's state and what a run would do with it; nothing is trained or written.

    Raises:
        ConfigError: a cell's config does not resolve, or its run directory holds another config.
    """
    from cn3.experiment.reuse import FinishedRuns
    from cn3.experiment.runner import cell_state, check_cells

    resolved, finished = check_cells(cells, threads), FinishedRuns()
    planned = []
    for cell in cells:
        state = cell_state(cell)
        twin = finished.twin(cell, resolved[cell.name]) if reuse and state == "queued" else None
        if twin is not None:
            state, command = "reusable", f"(adopts {twin}: same config and seed)"
        elif cell.waiting:
            command = "(its config is known once its task and variant are tuned)"
        else:
            command = "cn3 " + " ".join(cell.command(threads, state == "interrupted"))
        planned.append(PlannedCell(cell, state, command))
    return planned


@dataclass
class GridOutcome:
    """How a run of the grid left its cells: each :class:`CellState`, last state first-hand."""

    states: list[CellState]

    def count(self, *states: str) -> int:
        """How many cells ended in one of ``states``."""
        return sum(s.state in states for s in self.states)

    @property
    def failed(self) -> list[CellState]:
        return [s for s in self.states if s.state == "failed"]

    def summary(self) -> str:
        """``3/4 cells finished (...), 1 failed:``: finished, reused, trained elsewhere, waiting, failed."""
        failed, reused = len(self.failed), self.count("reused")
        elsewhere, waiting = self.count("elsewhere"), self.count("waiting")
        return (f"{self.count('done', 'skipped', 'reused')}/{len(self.states)} cells finished"
                + (f" ({reused} reused from finished runs with the same config)" if reused else "")
                + (f", {elsewhere} being trained by another process" if elsewhere else "")
                + (f", {waiting} waiting for tuning that is not finished" if waiting else "")
                + (f", {failed} failed:" if failed else ""))


def failure_lines(run_dir: Path) -> list[str]:
    """A failed cell's last log lines (from ``RUN/cell.failed``), and the cluster's word when the worker
    ended without an exit code; empty when the record is missing or unreadable."""
    try:
        failed = json.loads((Path(run_dir) / FAILED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [line for line in failed.get("log_tail", [])[-3:] if line.strip()] + (
        [failed["error"]] if failed.get("error") else [])

