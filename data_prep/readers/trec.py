"""TREC question classification: ``COARSE:fine question`` per line, latin-1.

Label = the coarse class (``ABBR`` ... ``NUM``), or ``COARSE:fine`` with ``options.fine``.
Splits: train = ``train_5500.label`` minus a seeded 10% (dev), test = ``TREC_10.label``.
"""

from __future__ import annotations

from pathlib import Path

from cn3.util.errors import DataError
from data_prep.example import Example, Sentence
from data_prep.readers.common import check_label, gc_paused, task_dir
from data_prep.readers.splits import hold_out
from data_prep.taskspec import TaskOptions
from data_prep.textio import read_lines

TREC_COARSE = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")


@gc_paused
def read_trec(path: str | Path, fine: bool = False) -> list[Example]:
    path = Path(path)
    source = str(path)
    out = []
    for number, text in read_lines(path, "latin-1"):
        if not text.strip():
            continue
        label, _, question = text.partition(" ")
        coarse, colon, fine_label = label.partition(":")
        if not colon or not fine_label:
            raise DataError(f"expected 'COARSE:fine question', found {text[:40]!r}", path, number)
        check_label(coarse, TREC_COARSE, path, number, "coarse class")
        tokens = question.split()
        if not tokens:
            raise DataError("empty question; expected 'COARSE:fine question'", path, number)
        out.append(Example([Sentence(tokens)], label if fine else coarse, number, source, {"fine": label}))
    return out


@gc_paused
def load_trec(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    folder = task_dir(root, "trec")
    train, dev = hold_out(read_trec(folder / "train_5500.label", options.fine), options.seed)
    return {"train": train, "dev": dev, "test": read_trec(folder / "TREC_10.label", options.fine)}
