"""SST-2 and SST-5, SentEval copies (train and dev only; the test files are held out).

* ``sst/binary/sentiment-{train,dev}``: ``sentence<TAB>label`` (a space before the tab), label 0/1
  -> ``negative``/``positive``. The train file holds every labelled *phrase* of the train sentences,
  and the staged copy has no labelled test, so ``sst2`` makes its own (:func:`hold_out_sentences`):
  a seeded 10% of the train sentences, with every train phrase inside them dropped from train.
* ``sst/fine/sentiment-{train,dev}``: ``label<SPACE>sentence``, label 0..4 -> ``very_negative``,
  ``negative``, ``neutral``, ``positive``, ``very_positive``.
"""

from __future__ import annotations

from pathlib import Path

from cn3.util.errors import DataError
from data_prep.example import Example, Sentence
from data_prep.readers.common import gc_paused, task_dir
from data_prep.taskspec import TaskOptions
from data_prep.textio import read_lines

#: the share of SST-2's train sentences held out as its test split
SST2_TEST_FRACTION = 0.1
SST2_TEST_RULE = ("test = a seeded {fraction:.0%} of the train sentences (train phrases that no other train phrase "
                  "contains), held out with every train phrase inside them")

SST2_LABELS = ("negative", "positive")
SST5_LABELS = ("very_negative", "negative", "neutral", "positive", "very_positive")


def _label(code: str, names: tuple[str, ...], path: Path, number: int) -> str:
    if code.isdigit() and int(code) < len(names) and len(code) == 1:
        return names[int(code)]
    raise DataError(f"unknown label {code!r}; expected an integer in 0..{len(names) - 1}", path, number)


@gc_paused
def read_sst2(path: str | Path) -> list[Example]:
    path = Path(path)
    source = str(path)
    out = []
    for number, text in read_lines(path):
        cells = text.split("\t")
        if len(cells) != 2:
            raise DataError(f"expected 2 tab-separated columns SENTENCE LABEL, found {len(cells)}", path, number)
        label = _label(cells[1].strip(), SST2_LABELS, path, number)
        tokens = cells[0].split()
        if not tokens:
            raise DataError("empty sentence; expected 'SENTENCE<TAB>LABEL'", path, number)
        out.append(Example([Sentence(tokens)], label, number, source))
    return out


@gc_paused
def read_sst5(path: str | Path) -> list[Example]:
    path = Path(path)
    source = str(path)
    out = []
    for number, text in read_lines(path):
        code, _, sentence = text.partition(" ")
        label = _label(code, SST5_LABELS, path, number)
        tokens = sentence.split()
        if not tokens:
            raise DataError("empty sentence; expected 'LABEL SENTENCE'", path, number)
        out.append(Example([Sentence(tokens)], label, number, source))
    return out


class HeldOutSplits(dict):
    """The splits a loader returns, with ``held_out``: how a split was carved out of another, for the
    prepared manifest (``cn3 prepare`` writes it there as ``held_out``)."""

    held_out: dict


def _spans(tokens: tuple[str, ...]) -> set[tuple[str, ...]]:
    """Every contiguous token span of a phrase, itself included."""
    return {tokens[i:j] for i in range(len(tokens)) for j in range(i + 1, len(tokens) + 1)}


def hold_out_sentences(phrases: list[Example], seed: int, fraction: float = SST2_TEST_FRACTION
                       ) -> tuple[list[Example], list[Example], dict]:
    """``(train, test, record)``: a labelled test split carved out of SST's train phrases.

    The unit is a *sentence*: a phrase that no other phrase of the file contains as a contiguous span.
    A seeded ``fraction`` of them (``random.Random(f"{seed}:test")``) is the test split, in file order,
    and every phrase that is a span of a held-out sentence is dropped from train. WHY: the train file
    lists every labelled phrase of the train sentences, so holding out phrases would leave a held-out
    phrase's parts and wholes in train.
    """
    import random

    tokens = [tuple(example.sentences[0].tokens) for example in phrases]
    present = set(tokens)
    inside = set()
    for phrase in present:
        inside |= {span for span in _spans(phrase) if span != phrase and span in present}
    sentences = sorted({t for t in present if t not in inside})
    n_test = min(max(round(len(sentences) * fraction), 1), len(sentences) - 1) if len(sentences) >= 2 else 0
    order = list(range(len(sentences)))
    random.Random(f"{seed}:test").shuffle(order)
    held = {sentences[i] for i in order[:n_test]}
    dropped = set().union(*(_spans(t) for t in held)) if held else set()
    train = [ex for ex, t in zip(phrases, tokens) if t not in dropped]
    test = [ex for ex, t in zip(phrases, tokens) if t in held]
    record = {"split": "test", "from": "train", "rule": SST2_TEST_RULE.format(fraction=fraction),
              "fraction": fraction, "seed": seed, "sentences": len(sentences), "test_sentences": len(test),
              "train_phrases_before": len(phrases), "train_phrases_dropped": len(phrases) - len(train) - len(test)}
    return train, test, record


@gc_paused
def load_sst2(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    """Train and the official dev from the files, and a test split held out of train's sentences
    (:func:`hold_out_sentences`, seeded by ``options.seed``; its record in ``.held_out``)."""
    folder = task_dir(root, "sst") / "binary"
    train, test, record = hold_out_sentences(read_sst2(folder / "sentiment-train"), options.seed)
    splits = HeldOutSplits(train=train, dev=read_sst2(folder / "sentiment-dev"), test=test)
    splits.held_out = record
    return splits


@gc_paused
def load_sst5(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    folder = task_dir(root, "sst") / "fine"
    return {split: read_sst5(folder / f"sentiment-{split}") for split in ("train", "dev")}
