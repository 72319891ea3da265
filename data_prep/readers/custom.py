"""The generic ``custom`` task: a user's own files (``options.files``: split -> path, ``train`` required).

Formats (``options.format``, else guessed from the train file name: ``.tsv``, ``.jsonl``, ``.conll*``):

* ``tsv``: UTF-8, a header row naming ``text`` and ``label`` (graph level) or ``text_a``, ``text_b``
  and ``label`` (pair level); other columns are ignored. Whitespace tokenisation.
* ``jsonl``: one object per line with the same keys.
* ``conll``: one token per line (tab-separated when the file's first token line has a tab, else
  whitespace-separated), blank line between sentences; ``options.columns`` names the columns, e.g.
  ``word,_,_,tag``: ``word`` and ``tag`` are required, ``pos`` (= ``xpos``), ``upos``, ``xpos``, ``head``,
  ``deprel`` are optional, ``_`` is ignored. Node level; tags are kept as they are.

Labels come from train; a dev/test label never seen in train is a DataError.
"""

from __future__ import annotations

from pathlib import Path

from cn3.util.errors import DataError
from data_prep.example import Example, Sentence
from data_prep.readers.columns import read_blocks
from data_prep.readers.common import gc_paused, json_object, tokens_of
from data_prep.readers.treebanks import check_tree, parse_head
from data_prep.taskspec import SPLITS, TaskOptions
from data_prep.textio import read_lines

FORMATS = ("tsv", "jsonl", "conll")
COLUMN_NAMES = ("word", "tag", "pos", "upos", "xpos", "head", "deprel", "_")

#: how raw text for a custom run is split (``cn3 predict``): as the readers split it (:func:`tokens_of`)
TOKENIZE = str.split


def custom_files(options: TaskOptions) -> dict[str, Path]:
    files = {split: Path(path) for split, path in options.files.items()}
    unknown = sorted(set(files) - set(SPLITS))
    if unknown:
        raise DataError(f"unknown split(s) {', '.join(unknown)} in the custom files; expected {', '.join(SPLITS)}")
    if "train" not in files:
        raise DataError("the custom task needs a train file (--train PATH)")
    return files


def custom_format(options: TaskOptions) -> str:
    """``options.format``, or the format guessed from the train file name."""
    if options.format is not None:
        if options.format not in FORMATS:
            raise DataError(f"unknown custom format {options.format!r}; expected one of {', '.join(FORMATS)}")
        return options.format
    name = custom_files(options)["train"].name.lower().removesuffix(".gz")
    for fmt, suffixes in (("tsv", (".tsv",)), ("jsonl", (".jsonl", ".json")),
                          ("conll", (".conll", ".conllu", ".conllx"))):
        if name.endswith(suffixes):
            return fmt
    raise DataError(f"cannot tell the format of {name!r}; set it with --format ({', '.join(FORMATS)})")


def parse_columns(columns: str | None) -> dict[str, int]:
    """``"word,_,_,tag"`` -> ``{"word": 0, "tag": 3}`` (``pos`` becomes ``xpos``)."""
    if not columns:
        raise DataError("CoNLL custom files need --columns, e.g. 'word,_,_,tag' (word and tag are required)")
    names = [c.strip() for c in columns.split(",")]
    index: dict[str, int] = {}
    for i, name in enumerate(names):
        if name not in COLUMN_NAMES:
            raise DataError(f"unknown column name {name!r} in --columns; expected {', '.join(COLUMN_NAMES)}")
        key = "xpos" if name == "pos" else name
        if key == "_":
            continue
        if key in index:
            raise DataError(f"column {name!r} named twice in --columns {columns!r}")
        index[key] = i
    for required in ("word", "tag"):
        if required not in index:
            raise DataError(f"--columns {columns!r} lacks a '{required}' column; word and tag are required")
    index["_width"] = len(names)
    return index


def _text_level(keys, path: Path, line: int) -> str:
    if "label" not in keys:
        raise DataError("no 'label' field; expected 'text' and 'label', or 'text_a', 'text_b' and 'label'", path, line)
    if "text_a" in keys or "text_b" in keys:
        if "text_a" not in keys or "text_b" not in keys:
            missing = "text_b" if "text_a" in keys else "text_a"
            raise DataError(f"a pair with a missing side: no '{missing}' field; expected both text_a and text_b",
                            path, line)
        return "pair"
    if "text" not in keys:
        raise DataError("no 'text' field; expected 'text' and 'label', or 'text_a', 'text_b' and 'label'", path, line)
    return "graph"


def _example(record: dict, level: str, path: Path, number: int) -> Example:
    label = record.get("label")
    if label is None or str(label).strip() == "":
        raise DataError("empty label; expected a class label", path, number)
    if level == "pair":
        for side in ("text_a", "text_b"):
            if not isinstance(record.get(side), str):
                raise DataError(f"a pair with a missing side: no string '{side}'; expected text_a and text_b",
                                path, number)
        sentences = [Sentence(tokens_of(record[side], path, number, side)) for side in ("text_a", "text_b")]
    else:
        if not isinstance(record.get("text"), str):
            raise DataError("no string 'text'; expected the sentence", path, number)
        sentences = [Sentence(tokens_of(record["text"], path, number))]
    return Example(sentences, str(label).strip(), number, str(path))


@gc_paused
def read_custom_tsv(path: str | Path) -> tuple[str, list[Example]]:
    path = Path(path)
    lines = read_lines(path)
    first = next(lines, None)
    if first is None:
        raise DataError("empty file; expected a header row (text, label or text_a, text_b, label)", path, 1)
    header = first[1].split("\t")
    level = _text_level(header, path, first[0])
    out = []
    for number, text in lines:
        if not text.strip():
            continue
        cells = text.split("\t")
        if len(cells) != len(header):
            raise DataError(
                f"expected {len(header)} tab-separated columns {' '.join(header)}, found {len(cells)}", path, number
            )
        out.append(_example(dict(zip(header, cells)), level, path, number))
    return level, out


@gc_paused
def read_custom_jsonl(path: str | Path) -> tuple[str, list[Example]]:
    path = Path(path)
    level = None
    out = []
    for number, text in read_lines(path):
        if not text.strip():
            continue
        record = json_object(text, path, number)
        if level is None:
            level = _text_level(record.keys(), path, number)
        out.append(_example(record, level, path, number))
    if level is None:
        raise DataError("no records; expected one JSON object per line", path)
    return level, out


def _separator(path: Path) -> str | None:
    for _, text in read_lines(path):
        if text.strip():
            return "\t" if "\t" in text else None
    return None


@gc_paused
def read_custom_conll(path: str | Path, columns: str | None) -> list[Example]:
    path = Path(path)
    index = parse_columns(columns)
    width = index["_width"]
    out = []
    layout = " ".join(c.strip().upper() for c in columns.split(","))  # type: ignore[union-attr]
    for numbers, rows in read_blocks(path, width, layout, _separator(path)):
        sentence = Sentence([r[index["word"]] for r in rows], tags=[r[index["tag"]] for r in rows])
        for field in ("upos", "xpos", "deprel"):
            if field in index:
                setattr(sentence, "deprels" if field == "deprel" else field, [r[index[field]] for r in rows])
        if "head" in index:
            sentence.heads = [parse_head(r[index["head"]], path, n) for r, n in zip(rows, numbers)]
            check_tree(sentence.heads, path, numbers)
        out.append(Example([sentence], None, numbers[0], str(path)))
    if not out:
        raise DataError("no sentences; expected one token per line and a blank line between sentences", path)
    return out


def custom_level(options: TaskOptions) -> str:
    """``node`` (conll), ``pair`` (text_a/text_b) or ``graph`` (text), from the train file."""
    fmt = custom_format(options)
    if fmt == "conll":
        parse_columns(options.columns)
        return "node"
    path = custom_files(options)["train"]
    if fmt == "tsv":
        for number, text in read_lines(path):
            return _text_level(text.split("\t"), path, number)
        raise DataError("empty file; expected a header row", path)
    for number, text in read_lines(path):
        if text.strip():
            return _text_level(json_object(text, path, number).keys(), path, number)
    raise DataError("no records; expected one JSON object per line", path)


@gc_paused
def load_custom(root: Path | None, options: TaskOptions) -> dict[str, list[Example]]:
    """Every split of ``options.files`` (``root`` is unused: the paths are the user's)."""
    files = custom_files(options)
    fmt = custom_format(options)
    data: dict[str, list[Example]] = {}
    level = None
    for split in SPLITS:
        if split not in files:
            continue
        path = files[split]
        if fmt == "conll":
            data[split] = read_custom_conll(path, options.columns)
            continue
        split_level, examples = read_custom_tsv(path) if fmt == "tsv" else read_custom_jsonl(path)
        if level is not None and split_level != level:
            raise DataError(f"this file is {split_level} level but train is {level} level; expected the same columns",
                            path)
        level = split_level
        data[split] = examples
    if fmt != "conll":
        if not data["train"]:
            raise DataError("no examples in the train file", files["train"])
        known = sorted({e.label for e in data["train"]})
        for split in ("dev", "test"):
            for example in data.get(split, []):
                if example.label not in known:
                    raise DataError(
                        f"unknown label {example.label!r} (not in train); expected one of {', '.join(known)}",
                        example.source,
                        example.line,
                    )
    return data
