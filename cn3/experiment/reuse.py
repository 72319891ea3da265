"""A cell that some finished run already is: same resolved config, seed included, so not trained twice.

Grids overlap by design: Xu et al.'s window sweep (``xu-window``) at m = 1 is Table 1's gated hybrid
(``xu-table1``), and a spec's CPU budget may repeat another spec's cells. Training such a cell again
costs an hour of CPU to produce, on the same machine, the same run. So before a queued cell trains,
the runner looks under the grids' root (``--out``) for a finished run (``results.json``) whose
``config.yaml``, read back as this cn3 reads it, equals the cell's resolved config key for key
(threads included: they change float summation order), and *adopts* it: the run's files are linked
(or copied, across file systems) into the cell's directory, with ``reused.json`` naming the run that
trained them. The cell then counts as done, its predictions are that run's, and the report lists it.

What the config cannot tell: the data under ``CN3_DATA`` and the cn3 code that trained the run. Reuse
assumes one data root and one machine per ``--out`` (runs do not reproduce bit for bit across CPUs);
``cn3 experiment run --no-reuse`` trains every cell itself.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from cn3.config import ConfigError
from cn3.experiment.spec import Cell, resolve_cell
from data_prep.atomic import atomic_write_json

REUSED = "reused.json"
_STAGING = ".reusing"  # suffix of the directory a cell is assembled in before it is renamed into place
_NOT_COPIED = (".training.lock",)


def grids_root(cell: Cell) -> Path:
    """``--out``: a cell trains in ``OUT/<grid>/<task>/<variant>/<seed or tune-option>``."""
    return cell.run_dir.parents[3]


def find_twin(cell: Cell, threads: int) -> Path | None:
    """A finished run under the cell's grids root whose config equals the cell's, or None; None too
    when the cell's own directory holds files (a cell that began training is left to train).

    Candidates are the root's ``*/<task>/*/*`` run directories (any grid, budget or variant) with a
    ``results.json``; the first in sorted order wins, so the choice is the same every time.
    """
    from cn3.nmt.config import NMTConfig
    from cn3.run_config import RunConfig
    from cn3.runtime import read_saved_config

    if cell.waiting or (cell.run_dir.is_dir() and any(cell.run_dir.iterdir())):
        return None
    wanted = resolve_cell(cell, threads)
    config_class = NMTConfig if cell.translation else RunConfig
    own = cell.run_dir.resolve()
    for results in sorted(grids_root(cell).glob(f"*/{cell.task}/*/*/results.json")):
        run = results.parent
        if run.name.endswith(_STAGING) or run.resolve() == own or not (run / "config.yaml").is_file():
            continue
        try:
            if read_saved_config(config_class, run / "config.yaml") == wanted:
                return run
        except ConfigError:  # another kind of run, or another release's: not this cell
            continue
    return None


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
