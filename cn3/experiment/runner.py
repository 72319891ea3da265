"""``cn3 experiment run``: train a spec's cells, N at a time, as separate processes, Ray tasks or Slurm jobs.

A cell's state lives in its run directory, so the grid can be stopped at any moment and run again:

* ``results.json``: **done**, skipped (its config must still be the one the spec gives);
* ``latest.pt`` without results: **interrupted**, continued with ``--resume``;
* ``cell.failed`` (exit code and the log's last lines): **failed** last time, tried again;
* nothing: **queued**, or **reused** when a finished run under ``--out`` has the cell's very config
  (:mod:`cn3.experiment.reuse`; ``reuse=False`` turns it off);
* in a tuned grid, its task and variant not tuned yet: **waiting** (:func:`run_spec`);
* its run directory locked by a trainer (:meth:`cn3.runs.layout.RunDir.training`): **elsewhere**, left
  to the process training it, so two runners (e.g. with different ``--only``) can share a grid.

A finished (or adopted) cell's gold moves into ``<grid>/gold/``, once per split (:func:`compact`).

A launcher (:mod:`cn3.experiment.launchers`) starts each cell's :func:`cn3.experiment.cell.run_cell`,
its output in ``RUN/experiment.log``; locally with ``train.num_threads`` = cores / ``--jobs``. States
are read from the run directories, so a grid started with one launcher may be finished with another.
Ctrl-C or SIGTERM stops the running cells the way their launcher can, saving ``latest.pt``.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from cn3.config import ConfigError
from cn3.experiment.cell import LOG
from cn3.experiment.launchers import Job, Launcher, LocalLauncher
from cn3.experiment.reuse import FinishedRuns, adopt
from cn3.experiment.spec import Cell, ExperimentSpec, read_cell_config, resolve_cell
from cn3.runs.compaction import compact_run
from cn3.runs.layout import RunDir
from cn3.runs.records import GOLD_DIR, finished, read_results, split_scores
from cn3.train.runtime import sigterm_as_interrupt
from cn3.util.atomic import atomic_write_json, atomic_write_text
from cn3.util.console import console
from cn3.util.errors import Cn3Error
from cn3.util.locking import exclusive

FAILED = "cell.failed"


@dataclass
class CellState:
    """What the runner knows of a cell: ``state`` is queued, interrupted, failed, submitted (handed to
    Ray or Slurm, not on a worker yet), running (on ``worker``), done, skipped, reused (adopted from
    ``reused_from``, a finished run with the same config), elsewhere (another process is training it)
    or waiting (for its task and variant's tuning). ``submitted``/``started``: when this runner handed
    the cell to its launcher, and when it began on a worker."""

    cell: Cell
    state: str
    score: str = ""
    started: float | None = None
    submitted: float | None = None
    seconds: float | None = None
    job: Job | None = field(default=None, repr=False)
    reused_from: str | None = None
    worker: str | None = None


def cell_state(cell: Cell) -> str:
    if cell.waiting:
        return "waiting"
    run = cell.run_dir
    if finished(run):
        return "done"
    if RunDir(run).busy():
        return "elsewhere"
    if (run / FAILED).is_file():
        return "failed"
    if RunDir(run).latest.is_file():
        return "interrupted"
    return "queued"


def _score(cell: Cell) -> str:
    """``dev 93.4 · test 95.2`` from a finished cell's results.json."""
    try:
        scores = split_scores(read_results(cell.run_dir))
    except Cn3Error:
        return ""
    return " · ".join(f"{split} {s['score']:.2f}" for split, s in scores.items() if s.get("score") is not None)


def check_cells(cells: list[Cell], threads: int) -> dict[str, dict]:
    """Before anything trains: every cell's config resolves, and a cell that already has a run
    directory was started with the config the spec gives it now (else the table would mix settings).

    Returns:
        Each cell's resolved config by cell name (cells waiting for tuning have none yet).

    Raises:
        ConfigError: naming the cell and the key.
    """
    from cn3.train.checkpoints import check_resume_config

    resolved = {}
    for cell in cells:
        if cell.waiting:  # its config is known after tuning; the tuning cells check the same keys
            continue
        wanted = resolved[cell.name] = resolve_cell(cell, threads)
        saved_path = RunDir(cell.run_dir).config
        if not saved_path.is_file():
            continue
        try:
            check_resume_config(read_cell_config(cell, saved_path), wanted,
                                cell.kind.resumable_changes())
        except ConfigError as err:
            raise ConfigError(f"cell {cell.name}: {cell.run_dir} holds a run with another config ({err}); "
                              "remove it, or give the grid another --out") from None
    return resolved


def _start(state: CellState, threads: int, launcher: Launcher) -> None:
    cell = state.cell
    if finished(cell.run_dir):  # another runner finished it since the grid was listed
        state.state, state.score = "skipped", _score(cell)
        return
    if RunDir(cell.run_dir).busy():  # another runner took it since the grid was listed
        state.state = "elsewhere"
        return
    cell.run_dir.mkdir(parents=True, exist_ok=True)
    (cell.run_dir / FAILED).unlink(missing_ok=True)
    state.job, state.submitted = launcher.start(cell, threads), time.time()
    _on_worker(state)


def _on_worker(state: CellState) -> bool:
    """A started cell is running once its worker is known (at once on this machine; a Ray task or
    Slurm job when it has started and written its log), submitted until then; returns whether it runs."""
    worker = state.job.find_worker()
    if worker is None:
        state.state = "submitted"
        return False
    state.state, state.worker, state.started = "running", worker, time.time()
    return True


def _finish(state: CellState) -> None:
    cell, job = state.cell, state.job
    state.seconds = time.time() - (state.started or state.submitted)
    state.worker = state.worker or job.find_worker()  # a cell may end before the runner saw it start
    state.job = None
    if job.rc == 0 and finished(cell.run_dir):
        state.state, state.score = "done", _score(cell)
        compact(cell)
        return
    if RunDir(cell.run_dir).busy():  # refused: another process took the cell first, and is training it
        state.state = "elsewhere"
        return
    log = cell.run_dir / LOG
    tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-5:] if log.is_file() else []
    # a worker that died leaves no exit code: the launcher's word for it says why
    atomic_write_json(cell.run_dir / FAILED, {"exit_code": job.rc, "log_tail": tail,
                                              **({"error": job.error} if job.error else {})})
    state.state = "failed"


def _table(states: list[CellState], started: float, jobs: int | None):
    from rich.table import Table

    done = [s for s in states if s.state == "done" and s.seconds]
    left = sum(s.state in ("queued", "interrupted", "failed", "submitted", "running", "waiting") for s in states)
    parallel = jobs or max(1, sum(s.state == "running" for s in states))
    eta = ""
    if done and left:
        eta = f", about {sum(s.seconds for s in done) / len(done) * left / parallel / 60:.0f} min left"
    table = Table(title=f"{sum(s.state in ('done', 'skipped', 'reused') for s in states)}/{len(states)} cells done, "
                        f"{time.time() - started:.0f} s{eta}", title_justify="left")
    for col in ("task", "variant", "seed", "state", "score", "time", "worker"):
        table.add_column(col)
    colour = {"done": "green", "skipped": "green", "reused": "green", "running": "yellow", "failed": "red",
              "elsewhere": "cyan", "waiting": "dim", "submitted": "blue"}
    for s in states:
        elapsed = s.seconds if s.seconds is not None else (time.time() - s.started if s.started else None)
        seed = f"tune-{s.cell.tune}" if s.cell.tune else str(s.cell.seed)
        if s.cell.fold is not None:
            seed += f" fold {s.cell.fold}"
        table.add_row(s.cell.task, s.cell.variant, seed,
                      f"[{colour.get(s.state, 'white')}]{s.state}[/]", s.score,
                      f"{elapsed:.0f} s" if elapsed is not None else "", s.worker or "")
    return table


def compact(cell: Cell, adopted_from: Path | None = None) -> None:
    """A finished cell keeps the gold of its predictions in its grid's ``gold/``, once for every cell
    (:func:`cn3.runs.compaction.compact_run`; an adopted cell's gold may be in the grid it came from). A failure
    is said and leaves what it did not reach as the run wrote it, readable: the cell is done either way."""
    grid = cell.run_dir.parents[2]  # OUT/<grid>/<task>/<variant>/<seed>
    try:
        compact_run(cell.run_dir, grid / GOLD_DIR, also=(adopted_from,) if adopted_from else ())
    except (Cn3Error, OSError, AssertionError) as err:
        from rich.markup import escape

        console.print(f"[yellow]warning[/]: {escape(f'{cell.name}: its predictions keep their gold ({err}); ')}"
                      f"{escape(f'`cn3 experiment compact {grid}` moves it later')}", highlight=False)


def run_grid(spec: ExperimentSpec, cells: list[Cell], jobs: int | None = 1, threads: int | None = None,
             reuse: bool = True, launcher: Launcher | None = None) -> list[CellState]:
    """Train every cell that is not done, ``jobs`` at a time (``None``: all at once, for a launcher whose
    engine queues them); returns the final states. ``reuse``: adopt a queued cell's finished twin
    instead of training it. ``launcher``: default :class:`LocalLauncher`; the caller closes it.
    ``<grid>/grid.json`` is kept up to date as cells start and finish.
    """
    launcher = launcher or LocalLauncher()
    threads = threads or launcher.default_threads(jobs)
    resolved = check_cells(cells, threads)
    states = _listed_states(cells)
    if reuse:
        _adopt_twins(states, resolved)
    pending = [s for s in states if s.state not in ("skipped", "reused", "elsewhere", "waiting")]
    started = time.time()
    invocation = f"{os.getpid()}@{started:.3f}"

    device = _local_device() if launcher.name == "local" else None  # once: it is asked at every state change

    def record() -> None:
        _write_grid(spec, cells, states, started, jobs, threads, invocation, launcher.name, device)

    record()
    _drive(states, pending, started, jobs, threads, launcher, record)
    return states


def _listed_states(cells: list[Cell]) -> list[CellState]:
    """Each cell's state as found in its run directory; a finished one is ``skipped``, with its score."""
    states = []
    for cell in cells:
        state = cell_state(cell)
        states.append(CellState(cell, "skipped" if state == "done" else state,
                                _score(cell) if state == "done" else ""))
    return states


def _adopt_twins(states: list[CellState], resolved: dict[str, dict]) -> None:
    """Adopt, for each queued cell, a finished run under the grid's ``--out`` with its very config
    (``resolved``: :func:`check_cells`), its gold compacted as a finished cell's: state ``reused``."""
    finished_runs = FinishedRuns()
    for state in states:
        if state.state == "queued" and (twin := finished_runs.twin(state.cell, resolved[state.cell.name])) is not None:
            adopt(state.cell, twin)
            compact(state.cell, twin)
            state.state, state.score, state.reused_from = "reused", _score(state.cell), str(twin)


def _drive(states: list[CellState], pending: list[CellState], started: float, jobs: int | None, threads: int,
           launcher: Launcher, record: Callable[[], None]) -> None:
    """Start the ``pending`` cells, ``jobs`` at a time, and follow them until every one has ended,
    calling ``record`` at each change; a live table on a terminal, a line per change in a log.

    Ctrl-C or SIGTERM stops the running cells the way their launcher can (each then interrupted, or
    queued when it saved nothing) and is raised again; SIGTERM's own handler is put back either way.
    """
    from rich.live import Live

    running: list[CellState] = []
    previous = sigterm_as_interrupt()
    live = Live(_table(states, started, jobs), console=console, refresh_per_second=1,
                transient=False) if console.is_terminal else None

    def say(text: str) -> None:  # the live table shows it all on a terminal; a log gets a line per change
        if not live:
            console.print(text)

    try:
        if live:
            live.start()
        while pending or running:
            _start_pending(pending, running, jobs, threads, launcher, record, say)
            time.sleep(launcher.poll_seconds)
            _follow_running(running, launcher, record, say)
            if live:
                live.update(_table(states, started, jobs))
    except KeyboardInterrupt:
        launcher.stop([s.job for s in running])
        for state in running:
            state.job = None
            state.state = "interrupted" if RunDir(state.cell.run_dir).latest.is_file() else "queued"
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if live:
            live.update(_table(states, started, jobs))
            live.stop()
        record()


def _start_pending(pending: list[CellState], running: list[CellState], jobs: int | None, threads: int,
                   launcher: Launcher, record: Callable[[], None], say: Callable[[str], None]) -> None:
    """Start pending cells until ``jobs`` run (all of them when ``jobs`` is None); a cell another
    runner has taken or finished meanwhile is passed over."""
    while pending and (jobs is None or len(running) < jobs):
        state = pending.pop(0)
        _start(state, threads, launcher)
        if state.job is None:  # another runner has it, or has finished it
            continue
        running.append(state)
        record()
        say(f"{'started' if state.worker else 'submitted'} {state.cell.name} -> {state.cell.run_dir}"
            + (f" on {state.worker}" if state.worker else ""))


def _follow_running(running: list[CellState], launcher: Launcher, record: Callable[[], None],
                    say: Callable[[str], None]) -> None:
    """Note the submitted cells that have reached a worker, and finish those that have ended."""
    for state in running:
        if state.state == "submitted" and _on_worker(state):
            record()
            say(f"running {state.cell.name} on {state.worker}")
    for job in launcher.finished([s.job for s in running]):
        state = next(s for s in running if s.job is job)
        running.remove(state)
        _finish(state)
        record()
        say(f"{state.state} {state.cell.name} {state.score}"
            f"{'' if state.state == 'done' else f' (see {state.cell.run_dir / LOG})'}")


def run_spec(spec: ExperimentSpec, list_cells: Callable[[], list[Cell]], jobs: int | None = 1,
             threads: int | None = None, reuse: bool = True, launcher: Launcher | None = None) -> list[CellState]:
    """:func:`run_grid` over ``list_cells()``, then, in a tuned grid, over the cells that the
    finished tuning has since resolved, until no cell waits or tuning resolved nothing new (one of its
    cells failed: the grid's cells that need it still wait). Returns the last pass's states, which
    cover every cell."""
    cells = list_cells()
    while True:
        states = run_grid(spec, cells, jobs, threads, reuse, launcher)
        waiting = sum(c.waiting for c in cells)
        if not waiting:
            return states
        cells = list_cells()
        if sum(c.waiting for c in cells) == waiting:
            return states


def _write_grid(spec: ExperimentSpec, cells: list[Cell], states: list[CellState], started: float, jobs: int | None,
                threads: int, invocation: str, launcher: str = "local", device: str | None = None) -> None:
    """``<grid>/grid.json``: the spec, every cell's last state (and worker), and one entry per ``run``
    invocation (wall time so far, launcher, jobs, threads, cells trained, ``device``), so the report can
    state the grid's wall time however often it was stopped and continued.

    Runners sharing a grid each update their own invocation (by ``invocation``, pid and start) and the
    cells they know, under a lock. A cell done before this run keeps its entry, or takes its time from
    results.json. The run directories stay the truth (a killed runner's cells may read "running" here
    until the grid is run again).
    """
    if not cells:
        return
    grid = cells[0].run_dir.parents[2]
    grid.mkdir(parents=True, exist_ok=True)
    with exclusive(grid / ".grid.lock", f"waiting for another runner writing {grid / 'grid.json'}"):
        atomic_write_text(grid / "spec.yaml", spec.path.read_text(encoding="utf-8"))
        record = {}
        if (grid / "grid.json").is_file():
            record = json.loads((grid / "grid.json").read_text(encoding="utf-8"))
        cells_record = record.get("cells", {})
        for s in states:
            if s.state == "elsewhere":  # its own runner records it
                continue
            if s.state == "reused":
                cells_record[s.cell.name] = {"run_dir": str(s.cell.run_dir), "state": "done", "seconds": 0.0,
                                             "reused_from": s.reused_from}
                continue
            if s.state == "skipped":
                if cells_record.get(s.cell.name, {}).get("state") != "done":
                    cells_record[s.cell.name] = {"run_dir": str(s.cell.run_dir), "state": "done",
                                                 "seconds": _seconds(s.cell)}
                continue
            entry = {"run_dir": None if s.cell.waiting else str(s.cell.run_dir), "state": s.state,
                     "seconds": None if s.seconds is None else round(s.seconds, 1),
                     **({"worker": s.worker} if s.worker else {})}
            if s.submitted is None and cells_record.get(s.cell.name, {}).get("state") != "waiting":
                cells_record.setdefault(s.cell.name, entry)  # listed, not started here: another runner's entry stands
            else:
                cells_record[s.cell.name] = entry
        mine = {"id": invocation, "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
                "wall_seconds": round(time.time() - started, 1), "launcher": launcher, "jobs": jobs,
                "threads": threads, "cells_trained": sum(s.submitted is not None for s in states),
                **({"device": device} if device else {})}
        invocations = [i for i in record.get("invocations", []) if i.get("id") != invocation]
        atomic_write_json(grid / "grid.json", {"spec": str(spec.path), "invocations": [*invocations, mine],
                                               "cells": cells_record})


def _local_device() -> str:
    """What ``--device auto`` gives a cell on this machine (a cluster's workers may differ: not recorded).
    Opening a CUDA context here does not affect the cells, which are exec'd processes.
    """
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


def _seconds(cell: Cell) -> float | None:
    """A finished cell's training time from its results.json (for a grid record that lacks it)."""
    try:
        return read_results(cell.run_dir).get("seconds")
    except Cn3Error:
        return None
