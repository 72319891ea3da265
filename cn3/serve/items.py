"""What a run page and the item list show: a run's config, results and curves; the items of its
prepared dev/test split with gold and predictions (``RUN/predictions/<split>.json.xz``), ordered
by disagreement with another run or by hub share.

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
    return {"name": run.path.name, "config": config, "results": run.results(), "curves": curves}


class ItemsUnavailable(Cn3Error):
    """The run's items cannot be listed (no predictions, no prepared dataset here)."""


def split_items(cache: dict, run, split: str) -> dict:
    """The run's items of ``split``, read once: ``{"records", "gold", "pred", "dataset", "hub": None}``."""
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
        raise ItemsUnavailable(f"{run.path.name} has no items of {split} here: {err}") from None
    limit = run.model.config.data.limit
    dataset = dataset.spread(limit) if limit else dataset
    if len(dataset) != len(predictions.gold):
        raise ItemsUnavailable(f"{run.path.name}: its {split} predictions ({len(predictions.gold)}) and prepared "
                               f"items ({len(dataset)}) differ")
    cache[key] = {"dataset": dataset, "gold": predictions.gold, "pred": predictions.pred, "hub": None}
    return cache[key]


def hub_shares(run, dataset) -> list[float | None]:
    """Per item, the hub share (:func:`cn3.analysis.graphs.hub`) of the run's last layer, the mean over
    the sides of a pair; ``None`` for a run without a graph."""
    from cn3.analysis.graphs import hub
    from cn3.sentence.inference import scored_batches

    if run.graph is None:
        return [None] * len(dataset)
    shares: list = [None] * len(dataset)
    with run.lock:
        for _, out, rows in scored_batches(run.model.model, dataset, run.device):
            per_side = []
            for side, info in out.info.items():
                alpha = info["alphas"][-1].float().cpu().numpy()
                ptr = dataset.t[f"{side}.ptr"]
                per_side.append({i: hub(alpha[row, : int(ptr[i + 1] - ptr[i]), : int(ptr[i + 1] - ptr[i])])[1]
                                 for row, i, _ in rows})
            for _, i, _ in rows:
                shares[i] = float(np.mean([s[i] for s in per_side]))
    return shares


def select_items(cache: dict, run, other, split: str, order: str, limit: int) -> list[dict]:
    """``/api/items``: up to ``limit`` items, those where ``run`` and ``other`` disagree (by index)
    or those with the highest hub share.

    Raises:
        ItemsUnavailable: no predictions or prepared data for the split, or the two runs' items differ.
    """
    mine = split_items(cache, run, split)
    theirs = split_items(cache, other, split) if other is not None else None
    if theirs is not None and theirs["gold"] != mine["gold"]:
        raise ItemsUnavailable(f"{run.path.name} and {other.path.name} were scored on different {split} items")
    if order == "hub" and mine["hub"] is None:
        with torch.no_grad():
            mine["hub"] = hub_shares(run, mine["dataset"])
    indices = range(len(mine["gold"]))
    if order == "disagree":
        chosen = [i for i in indices if mine["pred"][i] != theirs["pred"][i]][:limit]
    else:
        chosen = sorted(indices, key=lambda i: -(mine["hub"][i] or 0.0))[:limit]
    out = []
    for i in chosen:
        tokens = mine["dataset"].record(i)["tokens"]
        out.append({"index": i, "text": [" ".join(t) for t in tokens] if len(tokens) == 2 else " ".join(tokens[0]),
                    "tokens_pretokenized": True, "gold": mine["gold"][i], "pred": mine["pred"][i],
                    "other_pred": theirs["pred"][i] if theirs is not None else None,
                    "hub_share": None if mine["hub"] is None else mine["hub"][i]})
    return out
