"""What a run page and the item list show: a run's config, results and curves; the items of its
prepared dev/test split with gold and predictions (``RUN/predictions/<split>.json.xz``), ordered
by disagreement with another run or by a statistic of the run's last graph layer (:data:`ORDERS`),
optionally only the items the run got wrong.

An item's text comes from the prepared split's sidecar (:meth:`data_prep.store.GraphDataset.record`),
taken as the run took it (its ``data.limit`` applied, :meth:`~data_prep.store.GraphDataset.spread`),
so item ``i`` is prediction ``i``.
"""

from __future__ import annotations

import json

import numpy as np
import torch
import yaml

from cn3.util.errors import Cn3Error

#: record keys of ``metrics.jsonl`` that are not curves
NOT_CURVES = ("step", "epoch", "batch", "seconds", "metric", "stop")
#: item orders: name -> (statistic, highest first); ``disagree`` keeps file order among disagreements
ORDERS = {"disagree": (None, False), "hub": ("hub_share", True), "entropy": ("row_entropy", True),
          "sharp": ("row_entropy", False), "length": ("length", True), "file": (None, False)}


def run_page(run) -> dict:
    """``/api/run``: ``{"name", "config", "results", "curves"}``; a curve point is ``{"step", "split",
    "metric", "value"}``, e.g. ``train_loss`` -> split ``train``, metric ``loss``; ``dev`` -> split
    ``dev``, metric the record's ``metric``."""
    from cn3.runs.layout import RunDir
    from cn3.train.curves import is_number

    config = yaml.safe_load(RunDir(run.path).config.read_text(encoding="utf-8"))
    curves = []
    metrics = RunDir(run.path).metrics
    lines = metrics.read_text(encoding="utf-8").splitlines() if metrics.is_file() else []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line being written
        for key, value in record.items():
            if key in NOT_CURVES or not is_number(value) or not is_number(record.get("step")):
                continue
            split, _, metric = key.partition("_")
            curves.append({"step": int(record["step"]), "split": split,
                           "metric": metric or str(record.get("metric", "score")), "value": float(value)})
    return {"name": run.name, "config": config, "results": run.results(), "curves": curves}


class ItemsUnavailable(Cn3Error):
    """The run's items cannot be listed (no predictions, no prepared dataset here)."""


def split_items(cache: dict, run, split: str) -> dict:
    """The run's items of ``split``, read once: ``{"gold", "pred", "dataset", "stats": None}`` (``stats``:
    :func:`graph_stats`, filled when an order needs them)."""
    from cn3.runs.records import load_predictions
    from cn3.sentence.evaluation import run_prepared_dir
    from cn3.util.errors import ConfigError, DataError, RunError
    from data_prep.dataset import load_prepared

    key = (run.id, split)
    if key in cache:
        return cache[key]
    if run.kind != "sentence":
        raise ItemsUnavailable("items are listed for sentence runs (a translation run's page shows its scores)")
    try:
        predictions = load_predictions(run.path, split)
        dataset = load_prepared(run_prepared_dir(run.model)).splits[split]
    except (RunError, ConfigError, DataError, KeyError) as err:
        raise ItemsUnavailable(f"{run.name} has no items of {split} here: {err}") from None
    limit = run.model.config.data.limit
    dataset = dataset.spread(limit) if limit else dataset
    if len(dataset) != len(predictions.gold):
        raise ItemsUnavailable(f"{run.name}: its {split} predictions ({len(predictions.gold)}) and prepared "
                               f"items ({len(dataset)}) differ")
    cache[key] = {"dataset": dataset, "gold": predictions.gold, "pred": predictions.pred, "stats": None}
    return cache[key]


def graph_stats(run, dataset) -> list[dict]:
    """Per item, the hub share (:func:`cn3.analysis.graphs.hub`) and the mean row entropy
    (:func:`~cn3.analysis.graphs.row_entropy`, over every word) of the run's last layer, heads averaged,
    the mean over the sides of a pair; ``None`` for a run without a graph."""
    from cn3.analysis.graphs import hub, row_entropy
    from cn3.sentence.inference import scored_batches

    stats: list = [{"hub_share": None, "row_entropy": None} for _ in range(len(dataset))]
    if run.graph is None:
        return stats
    per_item: dict = {}
    with run.lock:
        for _, out, rows in scored_batches(run.model.model, dataset, run.device):
            for side, info in out.info.items():
                alpha = info["alphas"][-1].float().cpu().numpy()
                ptr = dataset.t[f"{side}.ptr"]
                for row, i, _ in rows:
                    n = int(ptr[i + 1] - ptr[i])
                    matrix = alpha[row, :n, :n]
                    entropy = row_entropy(matrix) if n > 1 else np.array([np.nan])
                    per_item.setdefault(i, []).append((hub(matrix)[1], entropy))
    for i, sides in per_item.items():
        entropies = np.concatenate([e for _, e in sides])
        stats[i] = {"hub_share": float(np.mean([h for h, _ in sides])),
                    "row_entropy": None if np.isnan(entropies).all() else float(np.nanmean(entropies))}
    return stats


def select_items(cache: dict, run, other, split: str, order: str, limit: int, errors: bool = False) -> list[dict]:
    """``/api/items``: up to ``limit`` items, those where ``run`` and ``other`` disagree (by index), or
    all ordered by :data:`ORDERS` (ties in file order); ``errors``: only those the run got wrong.

    Raises:
        ItemsUnavailable: no predictions or prepared data for the split, or the two runs' items differ.
    """
    mine = split_items(cache, run, split)
    theirs = split_items(cache, other, split) if other is not None else None
    if theirs is not None and theirs["gold"] != mine["gold"]:
        raise ItemsUnavailable(f"{run.name} and {other.name} were scored on different {split} items")
    if mine["stats"] is None:
        with torch.no_grad():
            mine["stats"] = graph_stats(run, mine["dataset"])
    indices = [i for i in range(len(mine["gold"])) if not errors or mine["pred"][i] != mine["gold"][i]]
    statistic, highest = ORDERS[order]
    if order == "disagree":
        indices = [i for i in indices if mine["pred"][i] != theirs["pred"][i]]
    elif statistic == "length":
        indices.sort(key=lambda i: -sum(len(t) for t in mine["dataset"].record(i)["tokens"]))
    elif statistic is not None:
        known = [i for i in indices if mine["stats"][i][statistic] is not None]
        known.sort(key=lambda i: -mine["stats"][i][statistic] if highest else mine["stats"][i][statistic])
        indices = known + [i for i in indices if mine["stats"][i][statistic] is None]
    out = []
    for i in indices[:limit]:
        tokens = mine["dataset"].record(i)["tokens"]
        out.append({"index": i, "text": [" ".join(t) for t in tokens] if len(tokens) == 2 else " ".join(tokens[0]),
                    "tokens_pretokenized": True, "gold": mine["gold"][i], "pred": mine["pred"][i],
                    "correct": mine["pred"][i] == mine["gold"][i],
                    "other_pred": theirs["pred"][i] if theirs is not None else None, **mine["stats"][i]})
    return out
