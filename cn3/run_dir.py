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
    RUN/curves.png       train loss and dev score against step, drawn from metrics.jsonl at the end
                         (``cn3 plot`` draws several runs on one figure)
    RUN/tensorboard/     TensorBoard event files, under ``train.tensorboard: true``
    RUN/.training.lock   locked while a trainer writes here (:meth:`RunDir.training`)
"""

from __future__ import annotations

import gzip
import json
import lzma
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml
from rich.text import Text

from cn3.config import ConfigError
from cn3.util.atomic import atomic_write, atomic_write_text
from cn3.util.console import console
from cn3.util.locking import exclusive_now, held

#: the ``format`` of a predictions file; a reader refuses any other
PREDICTIONS_FORMAT = "cn3.predictions/2"
#: how a split's metric scores an item: a label, a tag per token, or a sentence against its reference
METRICS = {"accuracy": "labels", "token_accuracy": "tags", "span_f1": "tags", "bleu": "text"}
TAG_SCHEMES = ("BIOES", "IOBES", "IOB2", "BILOU")


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
    results = property(lambda self: self.path / "results.json")
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
        busy = ConfigError(f"another process is training into {self.path} (it holds {self.lock.name}); "
                           "wait for it to finish or stop it, then run again")
        with exclusive_now(self.lock, busy):
            yield

    def busy(self) -> bool:
        """Whether another process is training into this directory now."""
        return held(self.lock)

    def create(self, config: dict, resume: bool) -> None:
        if self.latest.exists() and not resume:
            raise ConfigError(f"{self.path} already holds a run; pass --resume to continue it or choose "
                              "another --run-dir")
        if resume and not self.latest.exists():
            raise ConfigError(f"nothing to resume in {self.path} (no latest.pt)")
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
            raise ConfigError(f"run directory not found: {self.path}")
        if not self.best.is_file() and not self.latest.is_file():
            raise ConfigError(f"{self.path} holds no checkpoint (best.pt/latest.pt); train it first with cn3 train")


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
        raise ConfigError(f"{path}: not a cn3 predictions file (format {found!r}, expected {PREDICTIONS_FORMAT!r})")
    if payload.get("kind") != kind:
        raise ConfigError(f"{path}: holds {payload.get('kind')!r} predictions, but its metric scores {kind}")
    gold, pred = payload.get("gold"), payload.get("pred")
    if not (isinstance(gold, list) and isinstance(pred, list)) or len(gold) != len(pred):
        raise ConfigError(f'{path}: "gold" and "pred" must be lists of one length')
    if kind == "text":
        if not all(isinstance(x, str) for x in gold + pred):
            raise ConfigError(f'{path}: "gold" and "pred" must be sentences (strings)')
        return gold, pred
    labels = payload.get("labels")
    if not (isinstance(labels, list) and all(isinstance(x, str) for x in labels)):
        raise ConfigError(f'{path}: "labels" must be a list of strings')
    if not all(isinstance(x, int) and 0 <= x < len(labels) for x in gold + pred):
        raise ConfigError(f'{path}: "gold" and "pred" must be ids into "labels" (0..{len(labels) - 1})')
    if kind == "labels":
        return [labels[i] for i in gold], [labels[i] for i in pred]
    lengths = payload.get("lengths")
    if not (isinstance(lengths, list) and all(isinstance(n, int) and n >= 0 for n in lengths)) \
            or sum(lengths) != len(gold):
        raise ConfigError(f'{path}: "lengths" must be one count per sentence summing to the {len(gold):,} tags')
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
                raise ConfigError(f"{at}: not JSON ({err.msg})") from None
            if not isinstance(record, dict) or not {"i", "gold", "pred"} <= record.keys():
                raise ConfigError(f'{at}: expected an object with "i", "gold" and "pred"')
            if record["i"] != number - 1:
                raise ConfigError(f"{at}: item {record['i']!r}, expected {number - 1} (one line per item, in "
                                  "dataset order)")
            g, p = record["gold"], record["pred"]
            if kind == "tags":
                if not (_is_tags(g) and _is_tags(p)):
                    raise ConfigError(f"{at}: gold and pred must be lists of tags")
                if len(g) != len(p):
                    raise ConfigError(f"{at}: {len(g)} gold tags but {len(p)} predicted")
            elif not (isinstance(g, str) and isinstance(p, str)):
                raise ConfigError(f"{at}: gold and pred must be strings")
            gold.append(g)
            pred.append(p)
    return gold, pred


def _is_tags(value) -> bool:
    return isinstance(value, list) and all(isinstance(tag, str) for tag in value)


def read_results(run: str | Path) -> dict:
    """``RUN/results.json``: a finished run's scores, time and predictions (ConfigError naming what is wrong)."""
    run = Path(run)
    path = RunDir(run).results
    if not run.is_dir():
        raise ConfigError(f"run directory not found: {run}")
    if not path.is_file():
        raise ConfigError(f"{run} has no results.json: the run has not finished")
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"{path} is not valid JSON ({err})") from None
    if not isinstance(results, dict):
        raise ConfigError(f"{path}: expected a JSON object")
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
        ConfigError: the run, its results or its predictions are missing (the message says why), or a
            file is malformed (the message names the file, and the line or field).
    """
    run = Path(run)
    results = read_results(run)
    results_path = RunDir(run).results
    listed = results.get("predictions")
    listed = listed if isinstance(listed, dict) else {}
    if split not in listed:
        others = f" (it has predictions for: {', '.join(listed)})" if listed else ""
        raise ConfigError(f"{run} has no predictions for {split}: it was trained before cn3 0.3 or the split was "
                          f"not scored{others}")
    entry = listed[split]
    where = f"{results_path}, predictions.{split}"
    if not isinstance(entry, dict) or not {"path", "items", "metric"} <= entry.keys() or \
            not isinstance(entry["items"], int):
        raise ConfigError(f'{where}: expected an object with "path", "items", "metric", "tag_scheme" and "task"')
    metric, tag_scheme = entry["metric"], entry.get("tag_scheme")
    if metric not in METRICS:
        raise ConfigError(f"{where}: unknown metric {metric!r} (known: {', '.join(METRICS)})")
    if metric == "span_f1" and tag_scheme not in TAG_SCHEMES:
        raise ConfigError(f"{where}: span_f1 needs a tag_scheme (BIOES or IOB2), found {tag_scheme!r}")
    path = run / entry["path"]
    if not path.is_file():
        raise ConfigError(f"{run} has no predictions for {split}: {path} is missing (it was trained before cn3 0.3 "
                          "or the split was not scored)")
    kind = METRICS[metric]
    if path.name.endswith(".json.xz"):
        try:
            payload = json.loads(lzma.decompress(path.read_bytes()).decode("utf-8"))
        except (lzma.LZMAError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ConfigError(f"{path}: not xz-compressed JSON ({err})") from None
        gold, pred = _decode(payload, kind, path)
    else:
        gold, pred = _read_jsonl(path, kind)
    if len(gold) != entry["items"]:
        raise ConfigError(f"{path}: {len(gold):,} items, but {results_path} says {entry['items']:,}")
    return Predictions(run=run, split=split, path=path, metric=metric, tag_scheme=tag_scheme,
                       task=entry.get("task"), gold=gold, pred=pred)
