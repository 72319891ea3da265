"""Treebanks: UD English EWT (CoNLL-U) and the PTB WSJ sample (POS TSV + CoNLL-X heads).

CoNLL-U: comment lines, multiword-token ranges (``3-4``) and empty nodes (``8.1``) are skipped;
FORM, UPOS, XPOS, HEAD, DEPREL (full, e.g. ``nsubj:pass``) are kept. Heads must be integers in
``[0, n]`` and form a tree (one root, no cycle). Node labels (``Sentence.tags``) are the UPOS tags
(UD) or the PTB tags (WSJ sample).
"""

from __future__ import annotations

from pathlib import Path

from cn3.util.errors import DataError
from data_prep.example import Example, Sentence
from data_prep.readers.columns import read_blocks
from data_prep.readers.common import gc_paused, task_dir
from data_prep.taskspec import TaskOptions
from data_prep.textio import read_lines

UPOS_TAGS = (
    "ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM",
    "PART", "PRON", "PROPN", "PUNCT", "SCONJ", "SYM", "VERB", "X",
)  # fmt: skip
PTB_TAGS = (
    "#", "$", "''", ",", "-LRB-", "-RRB-", ".", ":", "CC", "CD", "DT", "EX", "FW", "IN", "JJ", "JJR",
    "JJS", "LS", "MD", "NN", "NNP", "NNPS", "NNS", "PDT", "POS", "PRP", "PRP$", "RB", "RBR", "RBS", "RP",
    "SYM", "TO", "UH", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "WDT", "WP", "WP$", "WRB", "``",
)  # fmt: skip
_UPOS_SET = frozenset(UPOS_TAGS)
_PTB_SET = frozenset(PTB_TAGS)
UD_FILES = {
    "train": "en_ewt-ud-train.conllu.gz",
    "dev": "en_ewt-ud-dev.conllu",
    "test": "en_ewt-ud-test.conllu",
}


def parse_head(text: str, path: Path, number: int) -> int:
    if not text.isdigit():
        raise DataError(f"HEAD {text!r} is not a non-negative integer; expected 0 (root) or a word ID", path, number)
    return int(text)


def check_tree(heads: list[int], path: Path, numbers: list[int]) -> None:
    """Heads (1-based, 0 = root) in ``[0, n]``, exactly one root, no cycle; DataError at the bad word."""
    n = len(heads)
    roots = []
    for i, head in enumerate(heads):
        if head > n:
            raise DataError(f"HEAD {head} is out of range; expected 0..{n} in a sentence of {n} words",
                            path, numbers[i])
        if head == i + 1:
            raise DataError(f"HEAD {head} points to the word itself; expected a tree", path, numbers[i])
        if head == 0:
            roots.append(i)
    if len(roots) != 1:
        where = numbers[roots[1]] if roots else numbers[0]
        raise DataError(f"expected exactly one word with HEAD 0 (the root), found {len(roots)}", path, where)
    state = [0] * (n + 1)  # 0 unseen, 1 on the current path, 2 reaches the root
    state[0] = 2
    for start in range(1, n + 1):
        path_nodes = []
        node = start
        while state[node] == 0:
            state[node] = 1
            path_nodes.append(node)
            node = heads[node - 1]
        if state[node] == 1:
            raise DataError("the HEAD column forms a cycle; expected a tree", path, numbers[node - 1])
        for visited in path_nodes:
            state[visited] = 2


@gc_paused
def read_conllu(path: str | Path) -> list[Example]:
    """CoNLL-U: one example per sentence (see the module docstring)."""
    path = Path(path)
    source = str(path)
    out: list[Example] = []
    numbers: list[int] = []
    rows: list[list[str]] = []

    def finish() -> None:
        tokens = [r[1] for r in rows]
        upos = [r[3] for r in rows]
        heads = [parse_head(r[6], path, n) for r, n in zip(rows, numbers)]
        check_tree(heads, path, numbers)
        sentence = Sentence(tokens, upos, [r[4] for r in rows], heads, [r[7] for r in rows], list(upos))
        out.append(Example([sentence], None, numbers[0], source))

    for number, text in read_lines(path):
        if not text:
            if rows:
                finish()
                numbers, rows = [], []
            continue
        if text[0] == "#":
            continue
        cells = text.split("\t")
        if len(cells) != 10:
            raise DataError(
                f"expected 10 tab-separated CoNLL-U columns ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC, "
                f"found {len(cells)}",
                path,
                number,
            )
        word_id = cells[0]
        if not word_id.isdigit():
            if "-" in word_id or "." in word_id:
                continue  # multiword-token range or empty node
            raise DataError(f"ID {word_id!r} is not an integer, a range (3-4) or an empty node (8.1)", path, number)
        if int(word_id) != len(rows) + 1:
            raise DataError(f"word ID {word_id} out of sequence; expected {len(rows) + 1}", path, number)
        if cells[3] not in _UPOS_SET:
            raise DataError(f"unknown UPOS tag {cells[3]!r}; expected one of {', '.join(UPOS_TAGS)}", path, number)
        numbers.append(number)
        rows.append(cells)
    if rows:
        finish()
    return out


@gc_paused
def load_ud_pos(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    folder = task_dir(root, "ud_english_ewt")
    return {split: read_conllu(folder / name) for split, name in UD_FILES.items()}


@gc_paused
def read_ptb_sample(pos_path: str | Path, dep_path: str | Path) -> list[Example]:
    """Tokens and PTB tags from ``pos_path`` (``WORD<TAB>TAG``), heads from ``dep_path`` (CoNLL-X, HEAD = column 7).

    The two files must agree token by token; ``deprels`` is ``None`` (the sample has no relation labels).
    """
    pos_path, dep_path = Path(pos_path), Path(dep_path)
    source = str(pos_path)
    pos_blocks = list(read_blocks(pos_path, 2, "WORD TAG", "\t"))
    dep_blocks = list(read_blocks(dep_path, 10, "ID FORM LEMMA CPOS POS FEATS HEAD DEPREL PHEAD PDEPREL", "\t"))
    out = []
    for k, ((numbers, rows), (dep_numbers, dep_rows)) in enumerate(zip(pos_blocks, dep_blocks)):
        if len(rows) != len(dep_rows):
            raise DataError(
                f"sentence {k + 1} has {len(rows)} tokens here but {len(dep_rows)} in {dep_path} "
                f"(line {dep_numbers[0]}); expected the two files to agree token by token",
                pos_path,
                numbers[0],
            )
        tokens, tags = [], []
        for (word, tag), number, dep_row, dep_number in zip(rows, numbers, dep_rows, dep_numbers):
            if word != dep_row[1]:
                raise DataError(
                    f"token {word!r} differs from {dep_row[1]!r} in {dep_path} (line {dep_number}); "
                    "expected the two files to agree token by token",
                    pos_path,
                    number,
                )
            if tag not in _PTB_SET:
                raise DataError(f"unknown PTB tag {tag!r}; expected one of {' '.join(PTB_TAGS)}", pos_path, number)
            tokens.append(word)
            tags.append(tag)
        heads = [parse_head(r[6], dep_path, n) for r, n in zip(dep_rows, dep_numbers)]
        check_tree(heads, dep_path, dep_numbers)
        out.append(Example([Sentence(tokens, None, tags, heads, None, list(tags))], None, numbers[0], source))
    if len(pos_blocks) != len(dep_blocks):
        raise DataError(
            f"{len(pos_blocks)} sentences here but {len(dep_blocks)} in {dep_path}; "
            "expected the two files to agree token by token",
            pos_path,
        )
    return out


@gc_paused
def load_ptb_pos(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    folder = task_dir(root, "ptb_wsj_sample")
    return {
        split: read_ptb_sample(folder / f"wsj_sample_pos.{split}.tsv", folder / f"wsj_sample_dep.{split}.conllx")
        for split in ("train", "dev", "test")
    }
