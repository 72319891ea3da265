"""Propositional-logic inference (Bowman et al., 2015): ``RELATION<TAB>left<TAB>right`` per line.

Files ``trainN.gz`` / ``testN.gz``: N is the number of operators (``and``, ``or``, ``not``) of the larger
side of the pair, checked on every line (SOURCE.md says "in the pair", but the files count the larger
side); the last files (N = 12) are open-ended: 12 or more (up to 19). Tokens = the formula without
brackets. ``meta["n_ops"]`` = N (the file index), ``meta["n_ops_pair"]`` = operators of both sides.
Splits (Shen et al., ICLR 2019): train = train0..train6 minus a seeded 10% (dev); test = test0..test12,
all kept so that short (<= 6) and long (7-12) pairs can both be reported via ``n_ops``.
"""

from __future__ import annotations

from pathlib import Path

from data_prep.errors import DataError
from data_prep.example import Example, Sentence
from data_prep.readers.common import check_label, gc_paused, task_dir, unbracket
from data_prep.readers.splits import hold_out
from data_prep.taskspec import TaskOptions
from data_prep.textio import read_lines

LOGIC_LABELS = ("#", "<", ">", "=", "^", "v", "|")
OPERATORS = ("and", "or", "not")  # counted as tokens (list.count)
TRAIN_MAX_OPS = 6
TEST_MAX_OPS = 12
LAST_FILE = 12  # train12/test12 hold every pair with 12 or more operators on a side


@gc_paused
def read_logic(path: str | Path, n_ops: int | None = None, open_ended: bool = False) -> list[Example]:
    """One file; when ``n_ops`` is given, every pair must have exactly that many operators on its larger
    side (at least that many when ``open_ended``)."""
    path = Path(path)
    source = str(path)
    out = []
    for number, text in read_lines(path):
        if not text.strip():
            continue
        cells = text.split("\t")
        if len(cells) != 3:
            raise DataError(f"expected 3 tab-separated columns RELATION LEFT RIGHT, found {len(cells)}", path, number)
        label = check_label(cells[0], LOGIC_LABELS, path, number, "relation")
        left, right = unbracket(cells[1]), unbracket(cells[2])
        if not left or not right:
            side = "left" if not left else "right"
            raise DataError(f"empty {side} formula; expected a bracketed formula on both sides", path, number)
        ops_left = left.count("and") + left.count("or") + left.count("not")
        ops_right = right.count("and") + right.count("or") + right.count("not")
        larger = max(ops_left, ops_right)
        if n_ops is not None and (larger < n_ops if open_ended else larger != n_ops):
            expected = f"{n_ops} or more" if open_ended else str(n_ops)
            raise DataError(
                f"pair has {ops_left} + {ops_right} operators; expected {expected} on its larger side (file index)",
                path,
                number,
            )
        meta = {"n_ops": larger if n_ops is None else n_ops, "n_ops_pair": ops_left + ops_right}
        out.append(Example([Sentence(left), Sentence(right)], label, number, source, meta))
    return out


@gc_paused
def load_logic(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    folder = task_dir(root, "logic_inference")
    train_all: list[Example] = []
    for n in range(TRAIN_MAX_OPS + 1):
        train_all.extend(read_logic(folder / f"train{n}.gz", n, n == LAST_FILE))
    test: list[Example] = []
    for n in range(TEST_MAX_OPS + 1):
        test.extend(read_logic(folder / f"test{n}.gz", n, n == LAST_FILE))
    train, dev = hold_out(train_all, options.seed)
    return {"train": train, "dev": dev, "test": test}
