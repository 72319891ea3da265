"""Reading a grid's cells: finished runs' scores per task (:class:`TaskColumn`), their predictions per
group of items (:class:`GroupedColumn`), the tuning choices, the hybrid gates, the reused cells and
the grid's wall time, through :mod:`cn3.runs.layout`. For ``--by``, a run's ``config.yaml`` names the
prepared dataset whose items are grouped (found, never prepared).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from cn3.experiment.reuse import reused_from
from cn3.experiment.spec import Cell
from cn3.experiment.tuning import choose
from cn3.runs.layout import RunDir
from cn3.runs.records import Predictions, finished, load_predictions, read_results, split_scores

#: the split a task is scored on: the first of these that every finished cell of the task has
PREFERRED_SPLITS = ("test", "test2016", "dev", "val")


@dataclass
class TaskColumn:
    """One task's results: the split and metric scored, and per variant the per-seed scores."""

    task: str
    split: str | None = None
    metric: str | None = None
    scores: dict[str, dict[int, float]] = field(default_factory=dict)  # variant -> seed -> score
    # variant -> seed -> run dir (a cross-validated task: the seed's runs, one a fold, in fold order)
    runs: dict[str, dict[int, Path | tuple[Path, ...]]] = field(default_factory=dict)
    tests: dict[str, dict] = field(default_factory=dict)  # variant -> significance against the baseline
    folds: list[int] | None = None  # a cross-validated task's folds (a seed's score: their mean)


@dataclass
class GroupedColumn:
    """One task's scores per group of items (``cn3 experiment report --by FIELD``).

    ``groups``: the group labels in table order (:func:`cn3.sentence.grouped.grouped_scores`'s order);
    ``scores``: variant -> group label -> seed -> score within the group; ``items``: group label ->
    the group's sizes over the cells (one value when every cell scored the same items); ``unseen``:
    group label -> whether no training item of any cell has the value (``None``: not known, e.g.
    for ``source``).
    """

    task: str
    split: str | None
    metric: str | None
    by: str
    groups: list[str] = field(default_factory=list)
    values: dict[str, object] = field(default_factory=dict)  # label -> the group's key (numbers for n_ops)
    scores: dict[str, dict[str, dict[int, float]]] = field(default_factory=dict)
    items: dict[str, set[int]] = field(default_factory=dict)
    unseen: dict[str, bool | None] = field(default_factory=dict)
    note: str | None = None  # why the task is not grouped
    # variant -> seed -> (group label -> its items' indices, the run's predictions), for the paired tests
    runs: dict[str, dict[int, tuple[dict[str, list[int]], Predictions]]] = field(default_factory=dict)
    tests: dict[str, dict[str, dict]] = field(default_factory=dict)  # variant -> group label -> test


def table_cells(cells: list[Cell]) -> list[Cell]:
    """The cells of the table: not the tuning cells (their runs are compared on dev only)."""
    return [cell for cell in cells if cell.tune is None]


def cell_counts(cells: list[Cell]) -> dict[str, int]:
    """How many cells the table has and how many of them finished."""
    table = table_cells(cells)
    return {"total": len(table),
            "finished": sum(not c.waiting and finished(c.run_dir) for c in table)}


def _results(cell: Cell) -> dict | None:
    """A finished cell's results with its scores in the one schema (:func:`cn3.runs.records.split_scores`)."""
    if not finished(cell.run_dir):
        return None
    results = read_results(cell.run_dir)
    return {**results, "scores": split_scores(results)}


def collect(cells: list[Cell]) -> dict[str, TaskColumn]:
    """Finished cells grouped by task, each task scored on the split all its cells have (tuning
    cells and cells waiting for tuning left out). In a cross-validated task (the spec's ``folds``) a
    seed's score is the mean over its folds, counted once every fold of it in ``cells`` has finished:
    a mean over some folds would be another number, not a partial one."""
    columns: dict[str, TaskColumn] = {}
    done: dict[str, list[tuple[Cell, dict]]] = {}
    wanted: dict[tuple[str, str, int], set[int]] = {}  # (task, variant, seed) -> its folds
    for cell in table_cells(cells):
        column = columns.setdefault(cell.task, TaskColumn(cell.task))
        if cell.fold is not None:
            wanted.setdefault((cell.task, cell.variant, cell.seed), set()).add(cell.fold)
            column.folds = sorted({*(column.folds or []), cell.fold})
        if cell.waiting:
            continue
        results = _results(cell)
        if results is not None:
            done.setdefault(cell.task, []).append((cell, results))
    for task, items in done.items():
        column = columns[task]
        common = set.intersection(*(set(r["scores"]) for _, r in items))
        column.split = next((s for s in PREFERRED_SPLITS if s in common), None)
        if column.split is None:
            continue
        first = items[0][1]["scores"][column.split]
        column.metric = first.get("metric")
        folded: dict[tuple[str, int], dict[int, tuple[Path, float]]] = {}  # (variant, seed) -> fold -> run, score
        for cell, results in items:
            score = results["scores"][column.split]["score"]
            if cell.fold is not None:
                folded.setdefault((cell.variant, cell.seed), {})[cell.fold] = (cell.run_dir, score)
                continue
            column.scores.setdefault(cell.variant, {})[cell.seed] = score
            column.runs.setdefault(cell.variant, {})[cell.seed] = cell.run_dir
        for (variant, seed), by_fold in folded.items():
            if set(by_fold) == wanted[task, variant, seed]:
                column.scores.setdefault(variant, {})[seed] = statistics.fmean(s for _, s in by_fold.values())
                column.runs.setdefault(variant, {})[seed] = tuple(by_fold[f][0] for f in sorted(by_fold))
    return columns


def cell_predictions(run: Path | tuple[Path, ...], split: str) -> Predictions:
    """A :class:`TaskColumn` run's predictions on ``split``; a cross-validated seed's (its folds' runs)
    joined in fold order, so each item of the data is scored once (the folds' test splits partition it)."""
    if not isinstance(run, tuple):
        return load_predictions(run, split)
    parts = [load_predictions(r, split) for r in run]
    return dataclasses.replace(parts[0], gold=[g for p in parts for g in p.gold],
                               pred=[x for p in parts for x in p.pred])


def tuning_rows(cells: list[Cell]) -> list[dict]:
    """Per task and variant of a tuned grid: each option's dev score (None: unfinished) and the chosen
    option (None: not chosen yet), in the grid's order."""
    runs: dict[tuple[str, str, int], dict[str, Path]] = {}
    for cell in cells:
        if cell.tune is not None:
            runs.setdefault((cell.task, cell.variant, cell.seed), {})[cell.tune] = cell.run_dir
    out = []
    for (task, variant, seed), options in runs.items():
        choice = choose(options)
        out.append({"task": task, "variant": variant, "seed": seed, "dev": choice.scores, "chosen": choice.option})
    return out


def gate_rows(cells: list[Cell]) -> list[dict]:
    """Per task and variant whose runs record hybrid gates (``results.json``'s ``gates``, which
    ``cn3 nmt train`` writes for a gated hybrid encoder): each seed's mean local weight ``g`` and its
    value per gated layer, in the grid's order."""
    found: dict[tuple[str, str], dict] = {}
    for cell in table_cells(cells):
        gates = None if cell.waiting else (_results(cell) or {}).get("gates")
        if gates:
            row = found.setdefault((cell.task, cell.variant), {"task": cell.task, "variant": cell.variant,
                                                               "split": gates["split"], "seeds": {}, "per_layer": {}})
            row["seeds"][cell.seed] = gates["mean"]
            row["per_layer"][cell.seed] = gates["per_layer"]
    return list(found.values())


def reused_cells(cells: list[Cell]) -> dict[str, str]:
    """Cell name -> the run it was adopted from (:mod:`cn3.experiment.reuse`), for the cells that were."""
    return {c.name: source for c in cells if (source := reused_from(c.run_dir))}


def grid_wall_seconds(invocations: list[dict]) -> float:
    """The time during which at least one ``run`` of the grid was running: the union of the invocations'
    intervals (side-by-side runners count once, pauses between sessions not at all).
    """
    spans = sorted((start := datetime.datetime.fromisoformat(i["started"]).timestamp(), start + i["wall_seconds"])
                   for i in invocations)
    total, end = 0.0, float("-inf")
    for start, stop in spans:
        total += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return round(total, 1)


def grid_wall(cells: list[Cell]) -> float | None:
    """:func:`grid_wall_seconds` of the invocations the runner recorded in ``<grid>/grid.json``
    (None: no cells, or the grid has no record)."""
    grid = cells[0].run_dir.parents[2] if cells else None
    if grid is None or not (grid / "grid.json").is_file():
        return None
    return grid_wall_seconds(json.loads((grid / "grid.json").read_text())["invocations"])


# ---------------------------------------------------------------- --by FIELD: scores per group of items


def _run_data(run_dir: Path):
    """A config holding the data section a finished cell trained with (from its ``RUN/config.yaml``;
    the rest of the config is not needed, nor read, so a run of another cn3 version still reports)."""
    import yaml

    from cn3.config import ConfigError, from_dict
    from cn3.runs.compat import upgrade_sentence_config
    from cn3.sentence.config import DataConfig, RunConfig

    path = RunDir(run_dir).config
    if not path.is_file():
        raise ConfigError(f"{run_dir} has no config.yaml: cannot tell which data it was scored on")
    saved = upgrade_sentence_config(yaml.safe_load(path.read_text(encoding="utf-8")) or {}, None)
    try:
        return RunConfig(data=from_dict(DataConfig, saved.get("data", {}), "data."))
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None


def _split_records(cfg, split: str, cache: dict) -> tuple[str, list[dict], list[dict]]:
    """The level of the run's dataset, and the records of ``split`` and of ``train`` as the run trained
    and scored them: the prepared dataset of its config (as ``cn3 train`` found it) with its
    ``data.limit`` applied to both (:func:`cn3.sentence.task.build_task`)."""
    from cn3.sentence.prepared import prepared_path
    from data_prep.dataset import load_prepared

    data = repr(dataclasses.replace(cfg.data, limit=0))  # cells differing only in data.limit share a dataset
    if ("path", data) not in cache:  # found once per data config, as `cn3 train` found it; never prepared here
        cache["path", data] = prepared_path(cfg, prepare=False)
    path = cache["path", data]
    key = (str(path.resolve()), split, cfg.data.limit)
    if key not in cache:
        ds = load_prepared(path)
        limit = cfg.data.limit

        def records(name: str) -> list[dict]:
            part = ds.splits[name].spread(limit) if limit else ds.splits[name]
            return [part.record(i) for i in range(len(part))]

        cache[key] = (ds.level, records(split), records("train") if "train" in ds.splits else [])
    return cache[key]


def collect_grouped(columns: dict[str, TaskColumn], by: str) -> dict[str, GroupedColumn]:
    """Every finished cell's predictions on its task's split (the split :func:`collect` chose),
    joined item by item with the items' ``by`` field (:func:`cn3.sentence.grouped.group_keys`) and scored per
    group with the task's metric (:func:`cn3.sentence.grouped.grouped_scores`). Groups are marked unseen in
    training against each cell's own training items (:func:`cn3.sentence.grouped.seen_keys`).

    Raises:
        ConfigError: no item has the field (naming the fields they have), or a cell's predictions do
            not match its dataset's items.
    """
    from cn3.config import ConfigError
    from cn3.sentence.grouped import group_keys, group_label, group_order, grouped_scores, seen_keys

    out: dict[str, GroupedColumn] = {}
    cache: dict = {}
    for task, column in columns.items():
        grouped = out[task] = GroupedColumn(task, column.split, column.metric, by)
        if column.metric is None:
            grouped.note = "no finished cell"
            continue
        if column.metric == "bleu":
            grouped.note = "translation items carry no per-item fields"
            continue
        if column.folds:
            grouped.note = "cross-validated over folds: not grouped (each fold's items are another split)"
            continue
        unseen: dict[str, list[bool | None]] = {}
        for variant, runs in column.runs.items():
            for seed, run_dir in sorted(runs.items()):
                level, records, train = _split_records(_run_data(run_dir), column.split, cache)
                predictions = load_predictions(run_dir, column.split)
                if len(predictions.gold) != len(records):
                    raise ConfigError(f"{run_dir}: {len(predictions.gold):,} predictions on {column.split} but its "
                                      f"dataset has {len(records):,} items there (prepared again since it trained?)")
                for i, (gold, record) in enumerate(zip(predictions.gold, records)):
                    if isinstance(gold, str) and record.get("label") is not None and gold != record["label"]:
                        raise ConfigError(f"{run_dir}: item {i} of {column.split} is {gold!r} in its predictions but "
                                          f"{record['label']!r} in its dataset (prepared again since it trained?)")
                try:
                    keys = group_keys(records, by)
                except ConfigError as err:
                    raise ConfigError(f"{task}: {err}") from None
                seen = None if by == "source" else seen_keys(train, by)
                members: dict[str, list[int]] = {}
                for i, key in enumerate(keys):
                    members.setdefault(group_label(key, by), []).append(i)
                grouped.runs.setdefault(variant, {})[seed] = (members, predictions)
                for g in grouped_scores(keys, predictions.gold, predictions.pred, level, predictions.tag_scheme,
                                        by, seen):
                    grouped.values.setdefault(g.label, g.value)
                    grouped.scores.setdefault(variant, {}).setdefault(g.label, {})[seed] = g.score
                    grouped.items.setdefault(g.label, set()).add(g.items)
                    unseen.setdefault(g.label, []).append(g.unseen)
        grouped.groups = sorted(grouped.values, key=lambda label: group_order(grouped.values[label]))
        grouped.unseen = {label: None if None in marks else all(marks) for label, marks in unseen.items()}
    return out


