"""NLTK's ``treebank.zip`` (the WSJ sample of the Penn Treebank) read straight from the archive."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

from cn3.util.errors import DataError
from data_prep.probing.brackets import Tree, clean_tree, parse_brackets


@dataclass(frozen=True)
class ParsedSentence:
    """A tree read from a file, with where it starts (for messages and provenance)."""

    tree: Tree
    source: str
    line: int


def read_treebank_zip(path: str | Path) -> list[ParsedSentence]:
    """Every tree of NLTK's ``treebank.zip`` (the ``.mrg`` files of its WSJ sample, in file order),
    cleaned (:func:`clean_tree`); ``source`` is ``<zip>:<member>``."""
    path = Path(path)
    out = []
    try:
        with zipfile.ZipFile(path) as archive:
            members = sorted(n for n in archive.namelist() if n.endswith(".mrg"))
            if not members:
                raise DataError("no .mrg files in the archive; expected NLTK's treebank.zip", path)
            for member in members:
                source = f"{path}:{member}"
                text = archive.read(member).decode("utf-8")
                for tree, line in parse_brackets(text, source):
                    cleaned = clean_tree(tree)
                    if cleaned is not None:
                        out.append(ParsedSentence(cleaned, source, line))
    except zipfile.BadZipFile:
        raise DataError("not a readable zip archive; expected NLTK's treebank.zip", path) from None
    return out
