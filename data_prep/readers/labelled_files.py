"""One sentence per line, the label from the file name: MR, SUBJ, CR, MPQA (10-fold cross-validation).

Empty lines are skipped. MR's files are decoded as ``cp1252`` (latin-1 would turn the ellipsis 0x85
into U+0085, a whitespace character); lines are split on ``\n`` only (:func:`data_prep.textio.read_lines`).
Labels: ``negative``/``positive`` (MR, CR, MPQA), ``objective``/``subjective`` (SUBJ). Folds and
the dev hold-out: :mod:`data_prep.readers.splits`.
"""

from __future__ import annotations

from pathlib import Path

from data_prep.example import Example, Sentence
from data_prep.readers.common import gc_paused, task_dir
from data_prep.readers.splits import check_fold, cv_split
from data_prep.taskspec import TaskOptions
from data_prep.textio import read_lines

POLARITY = ("negative", "positive")
SUBJECTIVITY = ("objective", "subjective")

# task -> (folder, encoding, ((file, label), ...)); files are read in this order (fold assignment depends on it).
LABELLED_FILES = {
    "mr": ("mr", "cp1252", (("rt-polarity.pos", "positive"), ("rt-polarity.neg", "negative"))),
    "subj": ("subj", "utf-8", (("quote.tok.gt9.5000", "subjective"), ("plot.tok.gt9.5000", "objective"))),
    "cr": ("cr", "utf-8", (("custrev.pos", "positive"), ("custrev.neg", "negative"))),
    "mpqa": ("mpqa", "utf-8", (("mpqa.pos", "positive"), ("mpqa.neg", "negative"))),
}


@gc_paused
def read_labelled_lines(path: str | Path, label: str, encoding: str = "utf-8") -> list[Example]:
    """Every non-empty line of ``path`` as one example labelled ``label`` (whitespace tokens)."""
    path = Path(path)
    source = str(path)
    out = []
    for number, text in read_lines(path, encoding):
        tokens = text.split()
        if tokens:
            out.append(Example([Sentence(tokens)], label, number, source))
    return out


@gc_paused
def load_labelled_files(task: str, root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    check_fold(options)
    folder_name, encoding, files = LABELLED_FILES[task]
    folder = task_dir(root, folder_name)
    items: list[Example] = []
    for name, label in files:
        items.extend(read_labelled_lines(folder / name, label, encoding))
    return cv_split(items, options)


@gc_paused
def load_mr(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    return load_labelled_files("mr", root, options)


@gc_paused
def load_subj(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    return load_labelled_files("subj", root, options)


@gc_paused
def load_cr(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    return load_labelled_files("cr", root, options)


@gc_paused
def load_mpqa(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    return load_labelled_files("mpqa", root, options)
