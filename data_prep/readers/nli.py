"""Sentence-pair inference data: SNLI (jsonl.gz) and SICK (``SICK.txt`` TSV).

Labels are lower-case ``entailment``, ``neutral``, ``contradiction`` for both.
"""

from __future__ import annotations

from pathlib import Path

from cn3.util.errors import DataError
from data_prep.example import Example, Sentence
from data_prep.readers.common import check_label, gc_paused, json_object, task_dir, tokens_of, unbracket
from data_prep.taskspec import TaskOptions
from data_prep.textio import read_lines

NLI_LABELS = ("entailment", "neutral", "contradiction")
SNLI_FILES = {"train": "snli_1.0_train_0.01.jsonl.gz", "dev": "snli_1.0_dev.jsonl.gz"}


def _snli_tokens(record: dict, side: str, path: Path, number: int) -> list[str]:
    parse = record.get(f"{side}_binary_parse")
    if isinstance(parse, str) and parse.strip():
        tokens = unbracket(parse)
    else:
        text = record.get(side)
        if not isinstance(text, str):
            raise DataError(f"missing '{side}' (and '{side}_binary_parse'); expected both sentences of the pair",
                            path, number)
        tokens = text.split()
    if not tokens:
        raise DataError(f"empty '{side}'; expected a non-empty sentence", path, number)
    return tokens


@gc_paused
def read_snli(path: str | Path, stats: dict | None = None) -> list[Example]:
    """SNLI jsonl(.gz). Pairs with ``gold_label == "-"`` (no majority) are dropped and counted in
    ``stats["dropped"]`` when ``stats`` is given. Tokens come from the binary parses, brackets removed."""
    path = Path(path)
    out: list[Example] = []
    dropped = 0
    for number, text in read_lines(path):
        if not text.strip():
            continue
        record = json_object(text, path, number)
        label = record.get("gold_label")
        if label is None:
            raise DataError("missing 'gold_label'; expected entailment, neutral, contradiction or -", path, number)
        if label == "-":
            dropped += 1
            continue
        check_label(label, NLI_LABELS, path, number)
        first = _snli_tokens(record, "sentence1", path, number)
        second = _snli_tokens(record, "sentence2", path, number)
        out.append(
            Example([Sentence(first), Sentence(second)], label, number, str(path), {"id": record.get("pairID")})
        )
    if stats is not None:
        stats["dropped"] = stats.get("dropped", 0) + dropped
    return out


@gc_paused
def load_snli(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    folder = task_dir(root, "snli")
    return {split: read_snli(folder / name) for split, name in SNLI_FILES.items()}


SICK_COLUMNS = ("pair_ID", "sentence_A", "sentence_B", "entailment_label", "relatedness_score", "SemEval_set")
SICK_SETS = {"TRAIN": "train", "TRIAL": "dev", "TEST": "test"}


@gc_paused
def read_sick(path: str | Path) -> dict[str, list[Example]]:
    """``SICK.txt``: the SemEval_set column gives the split (TRAIN/TRIAL/TEST -> train/dev/test).
    ``meta`` keeps ``id`` and ``relatedness`` (float in [1, 5])."""
    path = Path(path)
    splits: dict[str, list[Example]] = {"train": [], "dev": [], "test": []}
    lines = read_lines(path)
    header = next(lines, None)
    if header is None:
        raise DataError("empty file; expected a TSV header line", path, 1)
    names = header[1].split("\t")
    missing = [c for c in SICK_COLUMNS if c not in names]
    if missing:
        raise DataError(f"header lacks column(s) {', '.join(missing)}; expected the SICK.txt header", path, 1)
    width = len(names)
    col = {c: names.index(c) for c in SICK_COLUMNS}
    for number, text in lines:
        if not text:
            continue
        cells = text.split("\t")
        if len(cells) != width:
            raise DataError(f"expected {width} tab-separated columns, found {len(cells)}", path, number)
        split = SICK_SETS.get(cells[col["SemEval_set"]])
        if split is None:
            raise DataError(
                f"unknown SemEval_set {cells[col['SemEval_set']]!r}; expected one of {', '.join(SICK_SETS)}",
                path, number
            )
        label = check_label(cells[col["entailment_label"]].lower(), NLI_LABELS, path, number)
        try:
            score = float(cells[col["relatedness_score"]])
        except ValueError:
            raise DataError(
                f"relatedness_score {cells[col['relatedness_score']]!r} is not a number; expected a value in [1, 5]",
                path,
                number,
            ) from None
        first = tokens_of(cells[col["sentence_A"]], path, number, "sentence_A")
        second = tokens_of(cells[col["sentence_B"]], path, number, "sentence_B")
        meta = {"id": cells[col["pair_ID"]], "relatedness": score}
        splits[split].append(Example([Sentence(first), Sentence(second)], label, number, str(path), meta))
    return splits


@gc_paused
def load_sick(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    return read_sick(task_dir(root, "sick") / "SICK.txt")
