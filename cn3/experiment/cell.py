"""One cell of a grid, trained by whatever launched it: a local process, a Ray task or a Slurm job.

:func:`run_cell` resolves the cell's config as its ``cn3 train`` (or ``cn3 nmt train``) command line
would, continues from ``latest.pt`` when there is one, and appends all output to
``RUN/experiment.log``, each attempt starting with the equivalent ``cn3`` command and a
``# worker:`` line (read by the runner). ``python -m cn3.experiment.cell '<json>'`` runs it in a
process of its own (the local launcher).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import socket
import sys
import traceback
from pathlib import Path

from cn3.experiment.spec import Cell
from cn3.runs.layout import RunDir

LOG = "experiment.log"
WORKER_MARK = "# worker: "


def describe_worker(engine: str = "") -> str:
    """``host pid 123`` (+ what the engine calls it, + the GPUs it may use): where a cell trains."""
    gpus = os.environ.get("CUDA_VISIBLE_DEVICES")
    return " ".join(filter(None, (socket.gethostname(), f"pid {os.getpid()}", engine,
                                  f"gpu {gpus}" if gpus else "")))


def read_worker(log: Path, offset: int) -> str | None:
    """The ``# worker:`` line that the attempt started at byte ``offset`` of ``log`` wrote, if any yet."""
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            head = f.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return None
    for line in head.splitlines():
        if line.startswith(WORKER_MARK):
            return line[len(WORKER_MARK):].strip()
    return None


def run_cell(cell: Cell, threads: int, workdir: str | Path | None = None, worker: str | None = None) -> int:
    """Train ``cell`` into its run directory, or continue it from ``latest.pt``.

    Args:
        threads: torch threads (``train.num_threads``, part of the cell's config).
        workdir: the directory the grid was started in; relative paths of the cell (its run
            directory, data paths in its overrides) are read from there, wherever this runs.
        worker: how the log names this process (:func:`describe_worker` by default).

    Returns:
        The exit code ``cn3 train`` would give: 0 trained, 1 failed (the error is in the log),
        130 interrupted (Ctrl-C, SIGTERM, a cancelled task: ``latest.pt`` saved).
    """
    from cn3.util.console import console
    from cn3.util.errors import Cn3Error

    previous_dir = os.getcwd()
    if workdir is not None:
        os.chdir(workdir)
    run_dir = Path(cell.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    resume = RunDir(run_dir).latest.is_file()
    command = shlex.join(["cn3", *cell.command(threads, resume)])
    saved = _log_to(run_dir / LOG)
    try:
        print(f"$ {command}\n{WORKER_MARK}{worker or describe_worker()}", flush=True)
        try:
            _train(cell, threads, run_dir, resume, command)
        except Cn3Error as err:  # as the CLI prints them: one line, no traceback
            console.print(f"error: {err}", markup=False, highlight=False, soft_wrap=True)
            return 1
        except KeyboardInterrupt:
            return 130
        except Exception:  # noqa: BLE001 - a cell's crash is its log's business, not the launcher's
            traceback.print_exc()
            return 1
        return 0
    finally:
        _restore(saved)
        os.chdir(previous_dir)


def _train(cell: Cell, threads: int, run_dir: Path, resume: bool, command: str) -> None:
    """What ``cn3 <cell.command(...)>`` does, as a call."""
    overrides = [*cell.overrides, f"train.num_threads={threads}"]
    cfg, run_dir = cell.kind.resolve_run(cell.task, {"train.seed": cell.seed}, overrides, run_dir, resume)
    from cn3.kinds import train

    train(cfg, run_dir, resume=resume, command=command)


def _log_to(path: Path) -> tuple[int, int]:
    """Send this process's stdout and stderr (file descriptors, so C code and child processes too)
    to ``path``, appended; returns the descriptors to restore."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    return saved


def _restore(saved: tuple[int, int]) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    for target, fd in zip((1, 2), saved):
        os.dup2(fd, target)
        os.close(fd)


def cell_to_json(cell: Cell) -> str:
    """Every field of the cell (a process's argument: readable in ``ps``, unlike a pickle)."""
    return json.dumps({f.name: getattr(cell, f.name) for f in dataclasses.fields(cell)}, default=str)


def cell_from_json(text: str) -> Cell:
    data = json.loads(text)
    return Cell(**{**data, "overrides": tuple(data["overrides"]), "run_dir": Path(data["run_dir"])})


def main(argv: list[str]) -> int:
    """``python -m cn3.experiment.cell CELL_JSON THREADS``."""
    return run_cell(cell_from_json(argv[0]), int(argv[1]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
