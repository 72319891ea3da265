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
                         the best checkpoint's output on each scored split (:mod:`cn3.runs.records`)
    RUN/curves.png       train loss and dev score against step, drawn from metrics.jsonl at the end
                         (``cn3 plot`` draws several runs on one figure)
    RUN/tensorboard/     TensorBoard event files, under ``train.tensorboard: true``
    RUN/.training.lock   locked while a trainer writes here (:meth:`RunDir.training`)
"""

from __future__ import annotations

import json
import lzma
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml
from rich.text import Text

from cn3.runs.records import METRICS, PREDICTIONS_FORMAT, RESULTS_FILE, encode_predictions
from cn3.util.atomic import atomic_write, atomic_write_text
from cn3.util.console import console
from cn3.util.errors import RunError
from cn3.util.locking import exclusive_now, held


class RunDir:
    """Args:
        path: the run directory.
        writes: ``False`` for a torchrun rank other than 0 (:mod:`cn3.train.distributed`): it reads the
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
        payload = {"format": PREDICTIONS_FORMAT, **encode_predictions(METRICS[metric], gold, pred)}
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
