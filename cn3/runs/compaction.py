"""Grid compaction: in a grid's records the gold items, the same in every cell of a split, are kept
once, in ``<grid>/gold/<split>.<sha256>.json.xz``; each cell's predictions file
(:data:`~cn3.runs.records.SHARED_GOLD_FORMAT`) names it and keeps only where its prediction differs.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cn3.runs.layout import RunDir
from cn3.runs.records import (
    GOLD_FORMAT,
    METRICS,
    SHARED_GOLD_FORMAT,
    apply_differences,
    find_gold,
    flat_items,
    gold_ref,
    load_predictions,
    read_results,
    read_xz_json,
)
from cn3.util.atomic import atomic_write, atomic_write_text
from cn3.util.errors import RunError
from cn3.util.locking import exclusive_now


@dataclass
class Compaction:
    """What :func:`compact_run` did (or, with ``write=False``, would do); one object may gather several runs.

    Attributes:
        runs: runs looked at.
        rewritten: each predictions file and log rewritten, with its bytes before and after.
        gold: the shared gold files written (or to be written), with their bytes.
        busy: runs left alone because a process holds them (:meth:`RunDir.training`).
    """

    runs: int = 0
    rewritten: dict = field(default_factory=dict)
    gold: dict = field(default_factory=dict)
    busy: list = field(default_factory=list)

    def saved(self, counts: Callable[[Path], bool] = lambda path: True) -> int:
        """Bytes saved over the files that ``counts`` (e.g. the tracked ones): rewritten, less gold added."""
        return (sum(before - after for path, (before, after) in self.rewritten.items() if counts(path))
                - sum(size for path, size in self.gold.items() if counts(path)))


#: what replaces a log line that repeats results.json
RESULTS_LINE = "results: as in results.json (the line repeating it was dropped when the grid was compacted)\n"


def _dumps(payload: dict) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _xz(data: bytes) -> bytes:
    # preset 6 packs these files as small as 9 does (they are far smaller than its 8 MiB dictionary) with a
    # seventh of its memory; xz holds no timestamp, so the same content gives the same bytes
    return lzma.compress(data, preset=6)


def _gold_payload(kind: str, gold: list) -> dict:
    """A shared gold file's content: sentences as they are, labels and tags as ids into its own table."""
    if kind == "text":
        return {"format": GOLD_FORMAT, "kind": kind, "gold": list(gold)}
    flat = flat_items(kind, gold)
    labels = sorted(set(flat))
    index = {label: i for i, label in enumerate(labels)}
    payload = {"format": GOLD_FORMAT, "kind": kind, "labels": labels, "gold": [index[x] for x in flat]}
    if kind == "tags":
        payload["lengths"] = [len(tags) for tags in gold]
    return payload


def _pred_part(kind: str, gold: list, pred: list) -> dict:
    """A compacted file's predictions: the hypotheses, or where labels and tags differ from the gold."""
    if kind == "text":
        return {"pred": list(pred)}
    at, values, last = [], [], 0
    for i, (g, p) in enumerate(zip(flat_items(kind, gold), flat_items(kind, pred))):
        if g != p:
            at.append(i - last)
            values.append(p)
            last = i
    labels = sorted(set(values))
    index = {label: i for i, label in enumerate(labels)}
    return {"labels": labels, "pred": {"at": at, "ids": [index[v] for v in values]}}


def compact_run(run: str | Path, store: str | Path, also: tuple[Path, ...] = (), write: bool = True,
                into: Compaction | None = None) -> Compaction:
    """Keep the gold of a finished run's predictions in ``store`` (a grid's ``gold/``), once for every run
    that shares it, and shorten the log line that repeats results.json.

    Each ``predictions/<split>.json.xz`` of ``results.json`` that is here and still holds its gold
    (``cn3.predictions/2``) becomes ``cn3.predictions/3`` (see above), its gold written to
    ``store/<split>.<sha256>.json.xz`` unless that file is there already; :func:`load_predictions` reads
    both alike. A file compacted already is left as it is when its gold is found (its recorded path, a
    ``gold/`` folder above the run); when not, the gold is looked for under ``also`` (e.g. the run a cell
    was adopted from), copied into ``store`` and the file pointed at it. Idempotent; every file written
    atomically, the gold before the predictions that name it, and each rewrite checked to read back as
    the original. A ``results:`` line of ``log.txt`` equal to results.json becomes :data:`RESULTS_LINE`.
    A run that a process holds (:meth:`RunDir.training`) is left alone (``busy``).

    Args:
        run: a finished run directory.
        store: where the shared gold files go (for a grid's cells, ``<grid>/gold``).
        also: run directories to look for a compacted file's missing gold in.
        write: False: change nothing, count what would change.
        into: add to this record (one for several runs).

    Raises:
        RunError: the run has no results.json, a predictions file is malformed, or a compacted file's
            gold is nowhere to be found.
    """
    run, store = Path(run), Path(store)
    stats = into if into is not None else Compaction()
    stats.runs += 1
    also = tuple(Path(a) for a in also)
    lock = RunDir(run).lock
    if not write or not lock.is_file():  # a run whose trainer never locked it here is not being trained
        _compact(run, store, also, write, stats)
        return stats
    busy = RunError(f"a process holds {run}")
    try:
        with exclusive_now(lock, busy):  # a trainer still appending to the log, or a second --resume
            _compact(run, store, also, True, stats)
    except RunError as err:
        if err is not busy:
            raise
        stats.busy.append(run)
    return stats


def _compact(run: Path, store: Path, also: tuple[Path, ...], write: bool, stats: Compaction) -> None:
    results = read_results(run)
    listed = results.get("predictions")
    for split, entry in (listed if isinstance(listed, dict) else {}).items():
        if not (isinstance(entry, dict) and isinstance(entry.get("path"), str) and entry["path"].endswith(".json.xz")):
            continue  # an earlier version's JSONL: read as it is
        path = run / entry["path"]
        if not path.is_file():
            continue  # a split whose predictions the records do not keep (docs/runs/.gitignore)
        payload, _ = read_xz_json(path)
        if isinstance(payload, dict) and payload.get("format") == SHARED_GOLD_FORMAT:
            _relink(run, split, path, payload, store, also, write, stats)
            continue
        before = load_predictions(run, split)
        kind = METRICS[before.metric]
        data = _dumps(_gold_payload(kind, before.gold))
        sha = hashlib.sha256(data).hexdigest()
        gold_path = store / f"{split}.{sha}.json.xz"
        compact = {"format": SHARED_GOLD_FORMAT, "kind": kind,
                   "gold": {"path": Path(os.path.relpath(gold_path, run)).as_posix(), "sha256": sha,
                            "items": len(before.gold)},
                   **_pred_part(kind, before.gold, before.pred)}
        if apply_differences(kind, before.gold, compact, path) != before.pred:  # never write what does not read back
            raise AssertionError(f"{path}: the compacted predictions do not read back as the original")
        blob = _xz(_dumps(compact))
        if not gold_path.is_file() or _sha_of(gold_path) != sha:
            stats.gold[gold_path] = len(gold_blob := _xz(data))
            if write:
                atomic_write(gold_path, lambda handle, gold_blob=gold_blob: handle.write(gold_blob))
        stats.rewritten[path] = (path.stat().st_size, len(blob))
        if write:
            original = path.read_bytes()
            atomic_write(path, lambda handle, blob=blob: handle.write(blob))
            after = load_predictions(run, split)
            if (after.gold, after.pred) != (before.gold, before.pred):
                atomic_write(path, lambda handle, original=original: handle.write(original))
                raise AssertionError(f"{path}: the compacted predictions do not read back as the original")
    _shorten_log(run, results, write, stats)


def _sha_of(path: Path) -> str | None:
    try:
        return hashlib.sha256(lzma.decompress(path.read_bytes())).hexdigest()
    except (OSError, lzma.LZMAError):
        return None


def _relink(run: Path, split: str, path: Path, payload: dict, store: Path, also: tuple[Path, ...], write: bool,
            stats: Compaction) -> None:
    """A compacted file whose gold is not where it says: copied into ``store`` from where it is found."""
    ref = gold_ref(payload, path)
    if (run / ref["path"]).is_file():
        return
    found = find_gold(run, ref, path, also)
    target = store / Path(ref["path"]).name
    if not target.is_file():
        data = found.read_bytes()
        stats.gold[target] = len(data)
        if write:
            atomic_write(target, lambda handle: handle.write(data))
    relative = Path(os.path.relpath(target, run)).as_posix()
    if relative != ref["path"]:
        blob = _xz(_dumps({**payload, "gold": {**ref, "path": relative}}))
        stats.rewritten[path] = (path.stat().st_size, len(blob))
        if write:
            atomic_write(path, lambda handle: handle.write(blob))


def _shorten_log(run: Path, results: dict, write: bool, stats: Compaction) -> None:
    log = RunDir(run).log_file
    if not log.is_file():
        return
    text = log.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    kept = [RESULTS_LINE if _repeats_results(line, results) else line for line in lines]
    if kept == lines:
        return
    new = "".join(kept)
    stats.rewritten[log] = (len(text.encode("utf-8")), len(new.encode("utf-8")))
    if write:
        atomic_write_text(log, new)


def _repeats_results(line: str, results: dict) -> bool:
    if not line.startswith("results: {"):
        return False
    try:
        return json.loads(line[len("results: "):]) == results
    except json.JSONDecodeError:
        return False
