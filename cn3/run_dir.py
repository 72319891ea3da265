"""The run directory: resolved config, vocabulary, log, per-evaluation metrics, checkpoints,
the final predictions and learning curves.

    RUN/config.yaml      the resolved config (source of truth for evaluate/predict/visualize)
    RUN/vocab.json       the vocabularies the model was trained with
    RUN/log.txt          everything the run printed
    RUN/metrics.jsonl    one JSON object per evaluation
    RUN/latest.pt        written atomically at every evaluation, every ``checkpoint_every`` steps
                         and on Ctrl-C; ``--resume`` continues from it
    RUN/best.pt          the best dev score so far
    RUN/results.json     final dev/test scores, wall time, parameters; under "predictions", per
                         scored split: {"path": "predictions/<split>.json.xz", "items": n, "metric":
                         "accuracy" | "span_f1" | "token_accuracy" | "bleu", "tag_scheme": str | null,
                         "task": the task (translation: the corpus, e.g. "multi30k en-de")}
    RUN/predictions/<split>.json.xz
                         the best checkpoint's output on each scored split (sentence runs: dev and
                         test; translation: every split of train.final_splits), in dataset order, as
                         one xz-compressed JSON object (:data:`PREDICTIONS_FORMAT`): labels and tags as
                         ids into the file's own label table (tags flattened, with each sentence's
                         length), translations as the detokenised reference and hypothesis BLEU
                         scores. Run records are committed (docs/runs), so they are kept small: a
                         test set of SNLI's 9,824 pairs takes about 2 KB. Runs of cn3 0.3-0.9 wrote
                         ``<split>.jsonl`` (``.jsonl.gz``), one ``{"i", "gold", "pred"}`` per line;
                         :func:`load_predictions` reads both.
                         In a grid's records (docs/runs/experiments) the gold items, the same in every
                         cell of a split, are kept once (:func:`compact_run`, ``cn3.predictions/3``):
                         the file names ``<grid>/gold/<split>.<sha256>.json.xz`` and holds only where
                         the prediction differs from the gold (sentences: the hypotheses).
    RUN/curves.png       train loss and dev score against step, drawn from metrics.jsonl at the end
                         (``cn3 plot`` draws several runs on one figure)
    RUN/tensorboard/     TensorBoard event files, under ``train.tensorboard: true``
    RUN/.training.lock   locked while a trainer writes here (:meth:`RunDir.training`)
"""

from __future__ import annotations

import gzip
import hashlib
import json
import lzma
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from rich.text import Text

from cn3.util.errors import RunError
from cn3.util.atomic import atomic_write, atomic_write_text
from cn3.util.console import console
from cn3.util.locking import exclusive_now, held

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
#: the file whose presence marks a finished run (what a search for finished runs globs for)
RESULTS_FILE = "results.json"


class RunDir:
    """Args:
        path: the run directory.
        writes: ``False`` for a torchrun rank other than 0 (:mod:`cn3.distributed`): it reads the
            run's files but creates, logs and appends nothing.
    """

    def __init__(self, path: str | Path, writes: bool = True):
        self.path = Path(path)
        self.writes = writes

    config = property(lambda self: self.path / "config.yaml")
    vocab = property(lambda self: self.path / "vocab.json")
    log_file = property(lambda self: self.path / "log.txt")
    metrics = property(lambda self: self.path / "metrics.jsonl")
    latest = property(lambda self: self.path / "latest.pt")
    best = property(lambda self: self.path / "best.pt")
    results = property(lambda self: self.path / RESULTS_FILE)
    predictions = property(lambda self: self.path / "predictions")
    curves = property(lambda self: self.path / "curves.png")
    tensorboard = property(lambda self: self.path / "tensorboard")
    lock = property(lambda self: self.path / ".training.lock")

    @contextmanager
    def training(self) -> Iterator[None]:
        """Held while a trainer writes here. A second trainer of the same directory (a second
        ``--resume``, or two ``cn3 experiment run`` of one grid) is refused at once instead of both
        writing ``latest.pt``; the lock is the operating system's, so a killed trainer leaves none."""
        if not self.writes:
            yield
            return
        self.path.mkdir(parents=True, exist_ok=True)
        busy = RunError(f"another process is training into {self.path} (it holds {self.lock.name}); "
                           "wait for it to finish or stop it, then run again")
        with exclusive_now(self.lock, busy):
            yield

    def busy(self) -> bool:
        """Whether another process is training into this directory now."""
        return held(self.lock)

    def create(self, config: dict, resume: bool) -> None:
        if self.latest.exists() and not resume:
            raise RunError(f"{self.path} already holds a run; pass --resume to continue it or choose "
                              "another --run-dir")
        if resume and not self.latest.exists():
            raise RunError(f"nothing to resume in {self.path} (no latest.pt)")
        if not self.writes:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.config, yaml.safe_dump(config, sort_keys=False))

    def log(self, message: str) -> None:
        if not self.writes:
            return
        console.print(message)
        with open(self.log_file, "a", encoding="utf-8") as handle:
            handle.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {Text.from_markup(message).plain}\n")

    def log_results(self, results: dict) -> None:
        """The log's last line: ``results:`` and the final results as ``results.json`` has them
        (not printed: the trainer prints them as a table)."""
        if not self.writes:
            return
        with open(self.log_file, "a", encoding="utf-8") as handle:
            handle.write(f"results: {json.dumps(results, ensure_ascii=False)}\n")

    def append_metrics(self, record: dict) -> None:
        if not self.writes:
            return
        with open(self.metrics, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")

    def write_predictions(self, split: str, gold: list, pred: list, metric: str, tag_scheme: str | None,
                          task: str) -> dict:
        """Write ``predictions/<split>.json.xz`` atomically (see the module docstring); returns its entry
        for ``results.json["predictions"]``, which tells a reader how to score the file."""
        payload = {"format": PREDICTIONS_FORMAT, **_encode(METRICS[metric], gold, pred)}
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        relative = f"{self.predictions.name}/{split}.json.xz"
        # xz holds no timestamp: the same predictions give the same bytes (records diff cleanly)
        atomic_write(self.path / relative, lambda handle: handle.write(lzma.compress(data, preset=9)))
        for old in (f"{split}.jsonl", f"{split}.jsonl.gz"):  # an earlier version's file of this split
            (self.predictions / old).unlink(missing_ok=True)
        return {"path": relative, "items": len(gold), "metric": metric, "tag_scheme": tag_scheme, "task": task}

    def require(self) -> None:
        """For evaluate/predict/visualize: the run must exist and hold a model."""
        if not self.path.is_dir():
            raise RunError(f"run directory not found: {self.path}")
        if not self.best.is_file() and not self.latest.is_file():
            raise RunError(f"{self.path} holds no checkpoint (best.pt/latest.pt); train it first with cn3 train")


# ---------------------------------------------------------------------------------------------------
# Predictions: the one place that knows their files.


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


def _encode(kind: str, gold: list, pred: list) -> dict:
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
    """The inverse of :func:`_encode`, checking every field (a bad file names itself and the field)."""
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
    """A file of cn3 0.3-0.9: one ``{"i", "gold", "pred"}`` per line (gzipped above 1 MB)."""
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
    path = RunDir(run).results
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
    Translation runs of cn3 before 0.10 wrote ``{"bleu": x, ...}``: read as ``{"metric": "bleu", "score": x}``."""
    out = {}
    for split, entry in (results.get("scores") or {}).items():
        if "score" not in entry and "bleu" in entry:
            entry = {"metric": "bleu", "score": entry["bleu"], **{k: v for k, v in entry.items() if k != "bleu"}}
        out[split] = entry
    return out


def finished(run: str | Path) -> bool:
    """Whether the run has finished (its ``results.json`` exists)."""
    return RunDir(run).results.is_file()


def load_predictions(run: str | Path, split: str) -> Predictions:
    """Read a run's predictions on ``split`` (written by cn3 0.3 and later).

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
    results_path = RunDir(run).results
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


# ---------------------------------------------------------------------------------------------------
# Compaction: a grid's records keep the gold of a split once.
#
# Every cell of a grid scores the same items of a split, so a run's predictions file repeats the gold
# of every other cell's (Multi30k's test2016 references are two thirds of a translation cell's file).
# compact_run moves the gold into a shared, content-addressed file of the grid's store,
# ``<store>/<split>.<sha256>.json.xz`` (format GOLD_FORMAT; sha256 of its uncompressed JSON), and
# rewrites the run's file as SHARED_GOLD_FORMAT:
#
#     {"format": "cn3.predictions/3", "kind": ...,
#      "gold": {"path": <the gold file, relative to the run directory>, "sha256": ..., "items": n},
#      "pred": [hypotheses]}                                   (sentences)
#      "labels": [...], "pred": {"at": [...], "ids": [...]}    (labels, tags)
#
# For labels and tags only the items (tags: tokens, in order) where the prediction differs from the
# gold are kept: ``at`` counts each from the one before (the first from item 0), ``ids`` index
# ``labels``. A run that trains writes the self-contained cn3.predictions/2 as before; the grid's
# runner compacts each cell it finishes, and ``cn3 experiment compact`` the records written before.


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
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _dumps(payload: dict) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _xz(data: bytes) -> bytes:
    # preset 6 packs these files as small as 9 does (they are far smaller than its 8 MiB dictionary) with a
    # seventh of its memory; xz holds no timestamp, so the same content gives the same bytes
    return lzma.compress(data, preset=6)


def _read_xz_json(path: Path) -> tuple[object, bytes]:
    try:
        raw = lzma.decompress(path.read_bytes())
        return json.loads(raw.decode("utf-8")), raw
    except (lzma.LZMAError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RunError(f"{path}: not xz-compressed JSON ({err})") from None


def _flat(kind: str, items: list) -> list:
    return [t for tags in items for t in tags] if kind == "tags" else list(items)


def _gold_payload(kind: str, gold: list) -> dict:
    """A shared gold file's content: sentences as they are, labels and tags as ids into its own table."""
    if kind == "text":
        return {"format": GOLD_FORMAT, "kind": kind, "gold": list(gold)}
    flat = _flat(kind, gold)
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
    for i, (g, p) in enumerate(zip(_flat(kind, gold), _flat(kind, pred))):
        if g != p:
            at.append(i - last)
            values.append(p)
            last = i
    labels = sorted(set(values))
    index = {label: i for i, label in enumerate(labels)}
    return {"labels": labels, "pred": {"at": at, "ids": [index[v] for v in values]}}


def _regroup(kind: str, flat: list, lengths: list[int]) -> list:
    if kind != "tags":
        return flat
    out, at = [], 0
    for n in lengths:
        out.append(flat[at:at + n])
        at += n
    return out


def _gold_ref(payload: dict, path: Path) -> dict:
    ref = payload.get("gold")
    if not (isinstance(ref, dict) and isinstance(ref.get("path"), str) and isinstance(ref.get("items"), int)
            and isinstance(ref.get("sha256"), str) and _SHA256.fullmatch(ref["sha256"])
            and Path(ref["path"]).name.endswith(f".{ref['sha256']}.json.xz")):
        raise RunError(f'{path}: "gold" must name its shared file: {{"path": "<...>.<sha256>.json.xz", '
                          '"sha256": 64 hex digits, "items": n}')
    return ref


def _find_gold(run: Path, ref: dict, path: Path, also: tuple[Path, ...] = ()) -> Path:
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
        payload, raw = _read_xz_json(gold_path)
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
    ref = _gold_ref(payload, path)
    gold = _load_gold(_find_gold(run, ref, path), ref, kind, path)
    return gold, _apply(kind, gold, payload, path)


def _apply(kind: str, gold: list, payload: dict, path: Path) -> list:
    """The predictions of a compacted file, given its gold."""
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
    flat = _flat(kind, gold)
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
        payload, _ = _read_xz_json(path)
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
        if _apply(kind, before.gold, compact, path) != before.pred:  # never write what does not read back
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
    ref = _gold_ref(payload, path)
    if (run / ref["path"]).is_file():
        return
    found = _find_gold(run, ref, path, also)
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
