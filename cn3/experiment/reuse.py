"""A cell that some finished run already is: same resolved config, seed included, so not trained twice.

Grids overlap by design (``xu-window`` at m = 1 is ``xu-table1``'s gated hybrid; a CPU budget may
repeat another spec's cells). Before a queued cell trains, the runner looks under ``--out`` for a
finished run (``results.json``) whose ``config.yaml``, read back as this cn3 reads it, equals the
cell's resolved config key for key (threads included: they change float summation order), and
*adopts* it: the run's files are linked (or copied) into the cell's directory, with ``reused.json``
naming the run. The cell then counts as done, with that run's predictions.

Reuse assumes one data root and one machine per ``--out`` (the config says neither the data nor the
code that trained a run); ``cn3 experiment run --no-reuse`` trains every cell itself.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from cn3.config import ConfigError
from cn3.experiment.spec import Cell, read_cell_config
from cn3.runs.layout import RunDir
from cn3.runs.records import RESULTS_FILE
from cn3.util.atomic import atomic_write_json

REUSED = "reused.json"
_STAGING = ".reusing"  # suffix of the directory a cell is assembled in before it is renamed into place
_NOT_COPIED = (".training.lock",)


def grids_root(cell: Cell) -> Path:
    """``--out``: a cell trains in ``OUT/<grid>/<task>/<variant>/<seed or tune-option>``."""
    return cell.run_dir.parents[3]


class FinishedRuns:
    """The finished runs under a grids root, each config read once, to find the run a cell already is.

    Candidates are the root's ``*/<task>/*/*`` run directories (any grid, budget or variant) with a
    ``results.json``; the first in sorted order wins, so the choice is the same every time.
    """

    def __init__(self) -> None:
        self._runs: dict[tuple[Path, str], list[tuple[Path, dict]]] = {}

    def _finished(self, cell: Cell) -> list[tuple[Path, dict]]:
        key = (grids_root(cell), cell.task)
        if key not in self._runs:
            runs = []
            for results in sorted(key[0].glob(f"*/{cell.task}/*/*/{RESULTS_FILE}")):
                run = RunDir(results.parent)
                if run.path.name.endswith(_STAGING) or not run.config.is_file():
                    continue
                try:
                    runs.append((run.path, read_cell_config(cell, run.config)))
                except ConfigError:  # another kind of run, or another release's: no cell's twin
                    continue
            self._runs[key] = runs
        return self._runs[key]

    def twin(self, cell: Cell, wanted: dict) -> Path | None:
        """A finished run whose config equals ``wanted`` (``cell``'s resolved config), or None; None
        too when the cell's own directory holds files (a cell that began training is left to train)."""
        if cell.waiting or (cell.run_dir.is_dir() and any(cell.run_dir.iterdir())):
            return None
        own = cell.run_dir.resolve()
        return next((run for run, config in self._finished(cell) if config == wanted and run.resolve() != own), None)


def _link_or_copy(source: str, target: str) -> None:
    """Hard links cost no space; finished runs are only ever replaced file by file (atomic writes
    make a new inode), so the adopted cell never changes under the run it came from."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def adopt(cell: Cell, twin: Path) -> None:
    """Make ``cell``'s run directory a copy of the finished run ``twin``, with ``reused.json``.

    Assembled beside the cell and renamed into place, so an interrupted adoption leaves the cell
    queued (its leftover staging directory is cleared next time), never half done.

    Raises:
        ConfigError: the cell's directory already holds files (a cell that started training is
            not replaced).
    """
    target = cell.run_dir
    if target.exists() and any(target.iterdir()):
        raise ConfigError(f"cell {cell.name}: {target} is not empty; it is not replaced by {twin}")
    staging = target.with_name(target.name + _STAGING)
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(twin, staging, copy_function=_link_or_copy, ignore=shutil.ignore_patterns(*_NOT_COPIED))
    origin = twin
    if (twin / REUSED).is_file():  # the twin was itself adopted: name the run that trained
        origin = Path(json.loads((twin / REUSED).read_text(encoding="utf-8"))["trained_in"])
    atomic_write_json(staging / REUSED, {
        "from": str(twin), "trained_in": str(origin),
        "why": "same resolved config (seed and threads included), so the same training",
        "at": time.strftime("%Y-%m-%dT%H:%M:%S")})
    if target.exists():
        target.rmdir()
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staging, target)


def reused_from(run_dir: Path) -> str | None:
    """The run a cell was adopted from (``reused.json``'s ``from``), or None if it trained itself."""
    try:
        return json.loads((run_dir / REUSED).read_text(encoding="utf-8"))["from"]
    except (OSError, ValueError, KeyError):
        return None
