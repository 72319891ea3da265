"""Prediction records of a finished run: ``results.json`` and ``predictions/<split>.json.xz``.

A predictions file holds the best checkpoint's output on one scored split (sentence runs: dev and
test; translation: every split of ``train.final_splits``), in dataset order, as one xz-compressed
JSON object (:data:`PREDICTIONS_FORMAT`): labels and tags as ids into the file's own label table
(tags flattened, with each sentence's length), translations as the detokenised reference and
hypothesis. Older runs wrote ``<split>.jsonl`` (``.jsonl.gz``), one ``{"i", "gold", "pred"}`` per
line; :func:`load_predictions` reads both, and compacted files (:mod:`cn3.runs.compaction`) too.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import lzma
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cn3.util.errors import RunError

#: the file whose presence marks a finished run (what a search for finished runs globs for)
RESULTS_FILE = "results.json"
#: the ``format`` of a predictions file as a run writes it (gold and prediction of every item)
PREDICTIONS_FORMAT = "cn3.predictions/2"


#: the ``format`` of a compacted predictions file: its gold in a shared file (:func:`compact_run`)
SHARED_GOLD_FORMAT = "cn3.predictions/3"


#: the ``format`` of a shared gold file, ``<store>/<split>.<sha256>.json.xz``
GOLD_FORMAT = "cn3.gold/1"


#: the folder of a grid (or of any folder of runs) that holds its shared gold files
GOLD_DIR = "gold"


#: how a split's metric scores an item: a label, a tag per token, or a sentence against its reference
METRICS = {"accuracy": "labels", "token_accuracy": "tags", "span_f1": "tags", "bleu": "text"}


TAG_SCHEMES = ("BIOES", "IOBES", "IOB2", "BILOU")


@dataclass
class Predictions:
    """One run's predictions on one split: ``RUN/predictions/<split>.json.xz`` and its ``results.json`` entry.

    Attributes:
        run: the run directory.
        split: the split's name.
        path: the predictions file.
        metric: ``accuracy``, ``span_f1``, ``token_accuracy`` or ``bleu``.
        tag_scheme: ``BIOES`` or ``IOB2`` for span F1, else None.
        task: the task's name, when recorded.
        gold, pred: per item (dataset order) the gold and predicted label, tag list or sentence.
    """

    run: Path
    split: str
    path: Path
    metric: str
    tag_scheme: str | None
    task: str | None
    gold: list
    pred: list


def encode_predictions(kind: str, gold: list, pred: list) -> dict:
    """gold/pred as ids into one label table (labels, tags) or as they are (sentences)."""
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold items but {len(pred)} predictions")
    if kind == "text":
        return {"kind": kind, "gold": list(gold), "pred": list(pred)}
    if kind == "labels":
        labels = sorted(set(gold) | set(pred))
        index = {label: i for i, label in enumerate(labels)}
        return {"kind": kind, "labels": labels, "gold": [index[g] for g in gold], "pred": [index[p] for p in pred]}
    for i, (g, p) in enumerate(zip(gold, pred)):
        if len(g) != len(p):
            raise ValueError(f"item {i}: {len(g)} gold tags but {len(p)} predicted")
    labels = sorted({tag for tags in gold for tag in tags} | {tag for tags in pred for tag in tags})
    index = {label: i for i, label in enumerate(labels)}
    return {"kind": kind, "labels": labels, "lengths": [len(g) for g in gold],
            "gold": [index[t] for tags in gold for t in tags], "pred": [index[t] for tags in pred for t in tags]}


def _decode(payload, kind: str, path: Path) -> tuple[list, list]:
    """The inverse of :func:`encode_predictions`, checking every field (a bad file names itself and the field)."""
    if not isinstance(payload, dict) or payload.get("format") != PREDICTIONS_FORMAT:
        found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise RunError(f"{path}: not a cn3 predictions file (format {found!r}, expected {PREDICTIONS_FORMAT!r} "
                          f"or {SHARED_GOLD_FORMAT!r})")
    if payload.get("kind") != kind:
        raise RunError(f"{path}: holds {payload.get('kind')!r} predictions, but its metric scores {kind}")
    gold, pred = payload.get("gold"), payload.get("pred")
    if not (isinstance(gold, list) and isinstance(pred, list)) or len(gold) != len(pred):
        raise RunError(f'{path}: "gold" and "pred" must be lists of one length')
    if kind == "text":
        if not all(isinstance(x, str) for x in gold + pred):
            raise RunError(f'{path}: "gold" and "pred" must be sentences (strings)')
        return gold, pred
    labels = payload.get("labels")
    if not (isinstance(labels, list) and all(isinstance(x, str) for x in labels)):
        raise RunError(f'{path}: "labels" must be a list of strings')
    if not all(isinstance(x, int) and 0 <= x < len(labels) for x in gold + pred):
        raise RunError(f'{path}: "gold" and "pred" must be ids into "labels" (0..{len(labels) - 1})')
    if kind == "labels":
        return [labels[i] for i in gold], [labels[i] for i in pred]
    lengths = payload.get("lengths")
    if not (isinstance(lengths, list) and all(isinstance(n, int) and n >= 0 for n in lengths)) \
            or sum(lengths) != len(gold):
        raise RunError(f'{path}: "lengths" must be one count per sentence summing to the {len(gold):,} tags')
    out_gold, out_pred, at = [], [], 0
    for n in lengths:
        out_gold.append([labels[i] for i in gold[at:at + n]])
        out_pred.append([labels[i] for i in pred[at:at + n]])
        at += n
    return out_gold, out_pred


def _read_jsonl(path: Path, kind: str) -> tuple[list, list]:
    """The line-per-item format: one ``{"i", "gold", "pred"}`` per line (gzipped above 1 MB)."""
    gold, pred = [], []
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            at = f"{path}, line {number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise RunError(f"{at}: not JSON ({err.msg})") from None
            if not isinstance(record, dict) or not {"i", "gold", "pred"} <= record.keys():
                raise RunError(f'{at}: expected an object with "i", "gold" and "pred"')
            if record["i"] != number - 1:
                raise RunError(f"{at}: item {record['i']!r}, expected {number - 1} (one line per item, in "
                                  "dataset order)")
            g, p = record["gold"], record["pred"]
            if kind == "tags":
                if not (_is_tags(g) and _is_tags(p)):
                    raise RunError(f"{at}: gold and pred must be lists of tags")
                if len(g) != len(p):
                    raise RunError(f"{at}: {len(g)} gold tags but {len(p)} predicted")
            elif not (isinstance(g, str) and isinstance(p, str)):
                raise RunError(f"{at}: gold and pred must be strings")
            gold.append(g)
            pred.append(p)
    return gold, pred


def _is_tags(value) -> bool:
    return isinstance(value, list) and all(isinstance(tag, str) for tag in value)


def read_results(run: str | Path) -> dict:
    """``RUN/results.json``: a finished run's scores, time and predictions (RunError naming what is wrong)."""
    run = Path(run)
    path = Path(run) / RESULTS_FILE
    if not run.is_dir():
        raise RunError(f"run directory not found: {run}")
    if not path.is_file():
        raise RunError(f"{run} has no results.json: the run has not finished")
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RunError(f"{path} is not valid JSON ({err})") from None
    if not isinstance(results, dict):
        raise RunError(f"{path}: expected a JSON object")
    return results


def split_scores(results: dict) -> dict[str, dict]:
    """``results.json["scores"]``, each split's entry holding ``metric`` and ``score`` (higher is better).
    A score written as ``{"bleu": x, ...}`` is read as ``{"metric": "bleu", "score": x}``."""
    out = {}
    for split, entry in (results.get("scores") or {}).items():
        if "score" not in entry and "bleu" in entry:
            entry = {"metric": "bleu", "score": entry["bleu"], **{k: v for k, v in entry.items() if k != "bleu"}}
        out[split] = entry
    return out


def finished(run: str | Path) -> bool:
    """Whether the run has finished (its ``results.json`` exists)."""
    return (Path(run) / RESULTS_FILE).is_file()


def load_predictions(run: str | Path, split: str) -> Predictions:
    """Read a run's predictions on ``split``.

    ``RUN/results.json`` maps ``"predictions"`` → split → ``{"path", "items", "metric", "tag_scheme",
    "task"}``; the file is ``<split>.json.xz`` (or an earlier version's ``<split>.jsonl[.gz]``). gold/pred
    come back as label strings (accuracy), tag lists (token_accuracy, span_f1) or sentences (bleu: the
    reference and the hypothesis).

    Args:
        run: the run directory.
        split: the split's name (``test``, ``dev``, ``test2016``, ...).

    Raises:
        RunError: the run, its results or its predictions are missing (the message says why), or a
            file is malformed (the message names the file, and the line or field).
    """
    run = Path(run)
    results = read_results(run)
    results_path = Path(run) / RESULTS_FILE
    listed = results.get("predictions")
    listed = listed if isinstance(listed, dict) else {}
    if split not in listed:
        others = f" (it has predictions for: {', '.join(listed)})" if listed else ""
        raise RunError(f"{run} has no predictions for {split}: it was trained before cn3 0.3 or the split was "
                          f"not scored{others}")
    entry = listed[split]
    where = f"{results_path}, predictions.{split}"
    if not isinstance(entry, dict) or not {"path", "items", "metric"} <= entry.keys() or \
            not isinstance(entry["items"], int):
        raise RunError(f'{where}: expected an object with "path", "items", "metric", "tag_scheme" and "task"')
    metric, tag_scheme = entry["metric"], entry.get("tag_scheme")
    if metric not in METRICS:
        raise RunError(f"{where}: unknown metric {metric!r} (known: {', '.join(METRICS)})")
    if metric == "span_f1" and tag_scheme not in TAG_SCHEMES:
        raise RunError(f"{where}: span_f1 needs a tag_scheme (BIOES or IOB2), found {tag_scheme!r}")
    path = run / entry["path"]
    if not path.is_file():
        raise RunError(f"{run} has no predictions for {split}: {path} is missing (it was trained before cn3 0.3 "
                          "or the split was not scored)")
    kind = METRICS[metric]
    if path.name.endswith(".json.xz"):
        try:
            payload = json.loads(lzma.decompress(path.read_bytes()).decode("utf-8"))
        except (lzma.LZMAError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise RunError(f"{path}: not xz-compressed JSON ({err})") from None
        if isinstance(payload, dict) and payload.get("format") == SHARED_GOLD_FORMAT:
            gold, pred = _decode_shared(payload, kind, path, run)
        else:
            gold, pred = _decode(payload, kind, path)
    else:
        gold, pred = _read_jsonl(path, kind)
    if len(gold) != entry["items"]:
        raise RunError(f"{path}: {len(gold):,} items, but {results_path} says {entry['items']:,}")
    return Predictions(run=run, split=split, path=path, metric=metric, tag_scheme=tag_scheme,
                       task=entry.get("task"), gold=gold, pred=pred)


_SHA256 = re.compile(r"[0-9a-f]{64}")


def read_xz_json(path: Path) -> tuple[object, bytes]:
    """The JSON value of an xz-compressed file and its decompressed bytes; :class:`RunError` naming ``path``
    when it is not xz or not JSON."""
    try:
        raw = lzma.decompress(path.read_bytes())
        return json.loads(raw.decode("utf-8")), raw
    except (lzma.LZMAError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RunError(f"{path}: not xz-compressed JSON ({err})") from None


def flat_items(kind: str, items: list) -> list:
    """Items as one flat list: the tags of every sentence one after another for ``tags``, else a copy."""
    return [t for tags in items for t in tags] if kind == "tags" else list(items)


def _regroup(kind: str, flat: list, lengths: list[int]) -> list:
    if kind != "tags":
        return flat
    out, at = [], 0
    for n in lengths:
        out.append(flat[at:at + n])
        at += n
    return out


def gold_ref(payload: dict, path: Path) -> dict:
    """The checked ``"gold"`` reference of a compacted predictions file (path, sha256, items); :class:`RunError`
    naming ``path`` when it is malformed."""
    ref = payload.get("gold")
    if not (isinstance(ref, dict) and isinstance(ref.get("path"), str) and isinstance(ref.get("items"), int)
            and isinstance(ref.get("sha256"), str) and _SHA256.fullmatch(ref["sha256"])
            and Path(ref["path"]).name.endswith(f".{ref['sha256']}.json.xz")):
        raise RunError(f'{path}: "gold" must name its shared file: {{"path": "<...>.<sha256>.json.xz", '
                          '"sha256": 64 hex digits, "items": n}')
    return ref


def find_gold(run: Path, ref: dict, path: Path, also: tuple[Path, ...] = ()) -> Path:
    """The shared gold file ``ref`` names: at its recorded path, else in a ``gold/`` folder of the run or of
    any folder above it (a grid moved or copied whole), else the same for each run of ``also``."""
    name = Path(ref["path"]).name
    for base in (run, *also):
        for candidate in (base / ref["path"], *(folder / GOLD_DIR / name for folder in (base, *base.parents))):
            if candidate.is_file():
                return candidate
    expected = Path(os.path.normpath(run / ref["path"]))
    raise RunError(f"{path} keeps its gold items in a file its grid shares, {expected}, which is missing (nor "
                      f"is {GOLD_DIR}/{name} in any folder above {run}): copy the grid's records with their "
                      f"{GOLD_DIR}/ folder")


_GOLD_CACHE: dict[str, tuple[str, list, list | None]] = {}  # sha256 -> (kind, flat gold, lengths)


def _load_gold(gold_path: Path, ref: dict, kind: str, path: Path) -> list:
    """The gold items of a shared file (checked against the sha256 that ``path`` names; read once a process)."""
    sha = ref["sha256"]
    if sha not in _GOLD_CACHE:
        payload, raw = read_xz_json(gold_path)
        if hashlib.sha256(raw).hexdigest() != sha:
            raise RunError(f"{gold_path}: its content is not the gold {path} names (sha256 {sha[:12]}...): "
                              "the file was changed or replaced")
        if not isinstance(payload, dict) or payload.get("format") != GOLD_FORMAT:
            raise RunError(f"{gold_path}: not a cn3 gold file (expected format {GOLD_FORMAT!r})")
        gkind, gold, lengths = payload.get("kind"), payload.get("gold"), payload.get("lengths")
        if gkind not in ("text", "labels", "tags") or not isinstance(gold, list):
            raise RunError(f'{gold_path}: "kind" must be text, labels or tags and "gold" a list')
        if gkind == "text":
            if not all(isinstance(x, str) for x in gold):
                raise RunError(f'{gold_path}: "gold" must be sentences (strings)')
        else:
            labels = payload.get("labels")
            if not (isinstance(labels, list) and all(isinstance(x, str) for x in labels)
                    and all(isinstance(i, int) and 0 <= i < len(labels) for i in gold)):
                raise RunError(f'{gold_path}: "gold" must be ids into "labels", a list of strings')
            gold = [labels[i] for i in gold]
        if gkind == "tags" and not (isinstance(lengths, list) and all(isinstance(n, int) and n >= 0 for n in lengths)
                                    and sum(lengths) == len(gold)):
            raise RunError(f'{gold_path}: "lengths" must be one count per sentence summing to the {len(gold):,} tags')
        _GOLD_CACHE[sha] = (gkind, gold, lengths if gkind == "tags" else None)
    gkind, flat, lengths = _GOLD_CACHE[sha]
    if gkind != kind:
        raise RunError(f"{gold_path}: holds {gkind!r} gold, but {path} scores {kind}")
    items = len(lengths) if lengths is not None else len(flat)
    if items != ref["items"]:
        raise RunError(f"{gold_path}: {items:,} gold items, but {path} says {ref['items']:,}")
    return _regroup(kind, list(flat), lengths) if lengths is not None else list(flat)


def _decode_shared(payload: dict, kind: str, path: Path, run: Path) -> tuple[list, list]:
    """gold/pred of a compacted file (SHARED_GOLD_FORMAT), its gold read from the shared file it names."""
    if payload.get("kind") != kind:
        raise RunError(f"{path}: holds {payload.get('kind')!r} predictions, but its metric scores {kind}")
    ref = gold_ref(payload, path)
    gold = _load_gold(find_gold(run, ref, path), ref, kind, path)
    return gold, apply_differences(kind, gold, payload, path)


def apply_differences(kind: str, gold: list, payload: dict, path: Path) -> list:
    """The predictions of a compacted file, given its gold: the gold with the recorded differences applied;
    :class:`RunError` naming ``path`` when ``"pred"`` or ``"labels"`` is malformed."""
    pred = payload.get("pred")
    if kind == "text":
        if not (isinstance(pred, list) and len(pred) == len(gold) and all(isinstance(x, str) for x in pred)):
            raise RunError(f'{path}: "pred" must be {len(gold):,} sentences (strings), one per gold item')
        return list(pred)
    labels = payload.get("labels")
    if not (isinstance(labels, list) and all(isinstance(x, str) for x in labels)):
        raise RunError(f'{path}: "labels" must be a list of strings')
    if not (isinstance(pred, dict) and isinstance(pred.get("at"), list) and isinstance(pred.get("ids"), list)
            and len(pred["at"]) == len(pred["ids"])):
        raise RunError(f'{path}: "pred" must be {{"at": [...], "ids": [...]}} of one length')
    flat = flat_items(kind, gold)
    at = 0
    for k, (step, i) in enumerate(zip(pred["at"], pred["ids"])):
        if not (isinstance(step, int) and step >= (0 if k == 0 else 1) and at + step < len(flat)):
            raise RunError(f'{path}: "pred.at" must step forward through the {len(flat):,} '
                              f'{"tokens" if kind == "tags" else "items"} (entry {k}: {step!r})')
        at += step
        if not (isinstance(i, int) and 0 <= i < len(labels)):
            raise RunError(f'{path}: "pred.ids" must be ids into "labels" (0..{len(labels) - 1}), found {i!r}')
        flat[at] = labels[i]
    return _regroup(kind, flat, [len(tags) for tags in gold]) if kind == "tags" else flat
