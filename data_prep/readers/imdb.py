"""IMDB reviews (Maas et al., 2011): ``{"id", "label", "rating", "text"}`` per line, jsonl.gz.

``<br />`` tags become spaces; the text is then split by :func:`data_prep.tokenize.tokenize`, a
small PTB-like regex tokenizer. Case is kept.
Labels: 0/1 -> ``negative``/``positive``. Splits: train minus a seeded 10% (dev), test.
"""

from __future__ import annotations

import json
from pathlib import Path

from cn3.util.errors import DataError
from data_prep.example import Example, Sentence
from data_prep.readers.common import gc_paused, task_dir
from data_prep.readers.splits import hold_out
from data_prep.taskspec import TaskOptions
from data_prep.textio import read_lines
from data_prep.tokenize import tokenize

IMDB_LABELS = ("negative", "positive")


@gc_paused
def read_imdb(path: str | Path) -> list[Example]:
    path = Path(path)
    source = str(path)
    out = []
    loads = json.loads
    for number, line in read_lines(path):
        if not line.strip():
            continue
        try:
            record = loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"invalid JSON ({err.msg}); expected one JSON object per line", path, number) from None
        if not isinstance(record, dict) or "text" not in record or "label" not in record:
            raise DataError("expected a JSON object with 'text' and 'label'", path, number)
        label = record["label"]
        if label not in (0, 1) or isinstance(label, bool):
            raise DataError(f"unknown label {label!r}; expected 0 (negative) or 1 (positive)", path, number)
        text = record["text"]
        tokens = tokenize(text) if isinstance(text, str) else []
        if not tokens:
            raise DataError("empty 'text'; expected a non-empty review", path, number)
        meta = {"id": record.get("id"), "rating": record.get("rating")}
        out.append(Example([Sentence(tokens)], IMDB_LABELS[label], number, source, meta))
    return out


@gc_paused
def load_imdb(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    folder = task_dir(root, "imdb")
    train, dev = hold_out(read_imdb(folder / "train.jsonl.gz"), options.seed)
    return {"train": train, "dev": dev, "test": read_imdb(folder / "test.jsonl.gz")}
