"""SST-2 and SST-5, SentEval copies (train and dev only; the test files are held out).

* ``sst/binary/sentiment-{train,dev}``: ``sentence<TAB>label`` (a space before the tab), label 0/1
  -> ``negative``/``positive``.
* ``sst/fine/sentiment-{train,dev}``: ``label<SPACE>sentence``, label 0..4 -> ``very_negative``,
  ``negative``, ``neutral``, ``positive``, ``very_positive``.
"""

from __future__ import annotations

from pathlib import Path

from data_prep.errors import DataError
from data_prep.example import Example, Sentence
from data_prep.readers.common import gc_paused, task_dir
from data_prep.taskspec import TaskOptions
from data_prep.textio import read_lines

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


@gc_paused
def load_sst2(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    folder = task_dir(root, "sst") / "binary"
    return {split: read_sst2(folder / f"sentiment-{split}") for split in ("train", "dev")}


@gc_paused
def load_sst5(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    folder = task_dir(root, "sst") / "fine"
    return {split: read_sst5(folder / f"sentiment-{split}") for split in ("train", "dev")}
