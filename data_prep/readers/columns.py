"""Column files (one token per line, blank line between sentences): CoNLL-2003 NER, CoNLL-2000 chunking.

* CoNLL-2003: ``WORD POS CHUNK NER``, IOB1 NER tags, ``-DOCSTART-`` lines skipped; train = eng.train,
  dev = eng.testa (eng.testb is held out).
* CoNLL-2000: ``WORD POS CHUNK`` (gz), IOB2; train = train minus its last 1,000 sentences, dev = those
  1,000, test = test.txt.gz.

Tags are validated in the file's scheme (types from a fixed inventory) and converted to
``options.tag_scheme`` (BIOES or IOB2) by :mod:`data_prep.tagging`. POS (PTB) go to ``Sentence.xpos``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from cn3.util.errors import DataError
from data_prep import tagging
from data_prep.example import Example, Sentence
from data_prep.readers.common import gc_paused, task_dir
from data_prep.taskspec import TaskOptions
from data_prep.textio import read_lines

NER_TYPES = ("LOC", "MISC", "ORG", "PER")
CHUNK_TYPES = ("ADJP", "ADVP", "CONJP", "INTJ", "LST", "NP", "PP", "PRT", "SBAR", "UCP", "VP")
CONLL2000_DEV_SIZE = 1000

Block = tuple[list[int], list[list[str]]]  # line numbers, rows of cells


def read_blocks(
    path: str | Path,
    n_columns: int,
    layout: str,
    separator: str | None = " ",
    encoding: str = "utf-8",
    skip_docstart: bool = False,
) -> Iterator[Block]:
    """Sentences of a column file as ``(line_numbers, rows)``; every row must have ``n_columns`` cells.

    ``separator=None`` splits on any whitespace. ``layout`` names the columns in messages.
    """
    path = Path(path)
    numbers: list[int] = []
    rows: list[list[str]] = []
    what = "tab" if separator == "\t" else ("space" if separator == " " else "whitespace")
    for number, text in read_lines(path, encoding):
        if not text.strip():
            if rows:
                yield numbers, rows
                numbers, rows = [], []
            continue
        if skip_docstart and text.startswith("-DOCSTART-"):
            if rows:
                yield numbers, rows
                numbers, rows = [], []
            continue
        cells = text.split(separator)
        if len(cells) != n_columns or "" in cells:
            found = "an empty column (two separators in a row?)" if "" in cells else str(len(cells))
            raise DataError(f"expected {n_columns} {what}-separated columns {layout}, found {found}", path, number)
        numbers.append(number)
        rows.append(cells)
    if rows:
        yield numbers, rows


def convert_tags(
    tags: list[str], source: str, target: str, types, path: Path, numbers: list[int]
) -> list[str]:
    """``tagging.convert`` with errors re-raised at the offending token's line."""
    try:
        return tagging.convert(tags, source, target, types)
    except tagging.TagSchemeError as err:
        raise DataError(err.message, path, numbers[err.index]) from None


@gc_paused
def read_conll2003(path: str | Path, tag_scheme: str = "BIOES") -> list[Example]:
    path = Path(path)
    target = tagging.check_scheme(tag_scheme, tagging.OUTPUT_SCHEMES)
    source = str(path)
    out = []
    for numbers, rows in read_blocks(path, 4, "WORD POS CHUNK NER", " ", skip_docstart=True):
        tokens = [r[0] for r in rows]
        tags = convert_tags([r[3] for r in rows], "IOB1", target, NER_TYPES, path, numbers)
        out.append(Example([Sentence(tokens, xpos=[r[1] for r in rows], tags=tags)], None, numbers[0], source))
    return out


@gc_paused
def read_conll2000(path: str | Path, tag_scheme: str = "BIOES") -> list[Example]:
    path = Path(path)
    target = tagging.check_scheme(tag_scheme, tagging.OUTPUT_SCHEMES)
    source = str(path)
    out = []
    for numbers, rows in read_blocks(path, 3, "WORD POS CHUNK", " "):
        tokens = [r[0] for r in rows]
        tags = convert_tags([r[2] for r in rows], "IOB2", target, CHUNK_TYPES, path, numbers)
        out.append(Example([Sentence(tokens, xpos=[r[1] for r in rows], tags=tags)], None, numbers[0], source))
    return out


@gc_paused
def load_conll2003(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    folder = task_dir(root, "conll2003")
    return {
        "train": read_conll2003(folder / "eng.train", options.tag_scheme),
        "dev": read_conll2003(folder / "eng.testa", options.tag_scheme),
    }


@gc_paused
def load_conll2000(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    folder = task_dir(root, "conll2000")
    train = read_conll2000(folder / "train.txt.gz", options.tag_scheme)
    if len(train) <= CONLL2000_DEV_SIZE:
        raise DataError(
            f"expected more than {CONLL2000_DEV_SIZE} training sentences (the last {CONLL2000_DEV_SIZE} are dev), "
            f"found {len(train)}",
            folder / "train.txt.gz",
        )
    return {
        "train": train[:-CONLL2000_DEV_SIZE],
        "dev": train[-CONLL2000_DEV_SIZE:],
        "test": read_conll2000(folder / "test.txt.gz", options.tag_scheme),
    }
