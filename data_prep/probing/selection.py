"""Which sentences a probing task draws on, and how a probing item is made of one.

Sentences of 5-28 tokens (Conneau et al.'s range), each distinct token sequence once (WHY: a
duplicate could land in two splits, or as both O and I). An item keeps the raw tokens only.
"Corpus frequency" is counted over the whole treebank.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from data_prep.example import Example, Sentence
from data_prep.probing.brackets import words
from data_prep.probing.treebank_zip import ParsedSentence

MIN_LEN, MAX_LEN = 5, 28  # tokens, as Conneau et al.'s corpus


def eligible(treebank: Sequence[Example]) -> list[Example]:
    """The examples whose (first) sentence has 5-28 tokens, each distinct token sequence once (the first)."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for ex in treebank:
        tokens = tuple(ex.sentences[0].tokens)
        if MIN_LEN <= len(tokens) <= MAX_LEN and tokens not in seen:
            seen.add(tokens)
            out.append(ex)
    return out


def labelled(source: Example, tokens: Sequence[str], label: str, **meta) -> Example:
    """A probing item: the raw ``tokens`` only (no annotation), provenance from ``source``."""
    return Example([Sentence(list(tokens))], label, source.line, source.source, meta)


def corpus_counts(treebank: Sequence[Example]) -> Counter:
    """Lower-cased token frequencies over every sentence of ``treebank`` ("corpus frequency")."""
    return Counter(t.lower() for ex in treebank for t in ex.sentences[0].tokens)


def eligible_trees(trees: Sequence[ParsedSentence]) -> list[tuple[ParsedSentence, list[str]]]:
    """As :func:`eligible`, for trees: 5-28 words, each distinct word sequence once."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for item in trees:
        tokens = words(item.tree)
        if MIN_LEN <= len(tokens) <= MAX_LEN and tuple(tokens) not in seen:
            seen.add(tuple(tokens))
            out.append((item, tokens))
    return out


def labelled_tree(item: ParsedSentence, tokens: list[str], label: str, **meta) -> Example:
    """As :func:`labelled`, for a tree: its words ``tokens``, provenance from the file it was read from."""
    return Example([Sentence(tokens)], label, item.line, item.source, meta)
