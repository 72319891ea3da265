"""The syntactic-information probing tasks (Conneau et al., 2018): BShift (word order, from UD
EWT), TreeDepth and TopConst (the shape of the constituency tree, from the PTB sample)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

from data_prep.example import Example
from data_prep.probing.brackets import Tree
from data_prep.probing.selection import eligible, eligible_trees, labelled, labelled_tree
from data_prep.probing.splitting import balanced_split, stratified_split
from data_prep.probing.treebank_zip import ParsedSentence

# BShift: as Conneau et al., sentences with double quotes are left out
QUOTES = frozenset({'"', "``", "''", "“", "”"})
# TreeDepth: Conneau et al.'s classes 5-12
DEPTHS = tuple(range(5, 13))
# TopConst: Conneau et al. keep the 19 commonest sequences + OTHER; the WSJ sample has 5 with 80+
# sentences of 5-28 tokens
TOPCONST_CLASSES = 5
OTHER = "OTHER"


# --- BShift ---------------------------------------------------------------------------------------

def shift_positions(tokens: Sequence[str], upos: Sequence[str]) -> list[int]:
    """Positions ``i`` where tokens ``i`` and ``i + 1`` may be swapped: not the first token, neither
    punctuation, and two different words (a swap of equal words would change nothing)."""
    return [i for i in range(1, len(tokens) - 1)
            if upos[i] != "PUNCT" and upos[i + 1] != "PUNCT" and tokens[i] != tokens[i + 1]]


def shift_bigram(tokens: Sequence[str], position: int) -> list[str]:
    """``tokens`` with tokens ``position`` and ``position + 1`` swapped."""
    out = list(tokens)
    out[position], out[position + 1] = out[position + 1], out[position]
    return out


def probe_bshift(treebank: Sequence[Example], seed: int) -> dict[str, list[Example]]:
    """BShift, bigram shift (Conneau et al., 2018): were two adjacent tokens swapped (``I``) or is the
    sentence as written (``O``)? As Conneau et al.: the first token and punctuation are never moved
    and sentences with double quotes are left out; half of the sentences are changed, and no
    sentence occurs in both versions."""
    rng = random.Random(f"{seed}:bshift")
    pool = [ex for ex in eligible(treebank) if not QUOTES & set(ex.sentences[0].tokens)
            and shift_positions(ex.sentences[0].tokens, ex.sentences[0].upos)]
    rng.shuffle(pool)
    half = len(pool) // 2
    items = []
    for k, ex in enumerate(pool[: 2 * half]):
        s = ex.sentences[0]
        if k < half:
            position = rng.choice(shift_positions(s.tokens, s.upos))
            items.append(labelled(ex, shift_bigram(s.tokens, position), "I", position=position))
        else:
            items.append(labelled(ex, s.tokens, "O"))
    return stratified_split(items, rng)


# --- TreeDepth ------------------------------------------------------------------------------------

def tree_depth(tree: Tree) -> int:
    """Nodes on the longest path from the top of the tree to a word, counting the top constituent and
    the part-of-speech level but not the word: ``(S (NP (DT the) (NN cat)) (VP (VBD sat)))`` is 3."""
    return 1 + max((tree_depth(c) for c in tree.children if isinstance(c, Tree)), default=0)


def probe_treedepth(trees: Sequence[ParsedSentence], seed: int) -> dict[str, list[Example]]:
    """TreeDepth (Conneau et al., 2018): the depth of the sentence's constituency tree (:func:`tree_depth`),
    classes 5-12. Deviations: gold PTB trees (traces removed); depth is not decorrelated from length
    (the WSJ sample is too small for Conneau et al.'s sampling), so a length-only classifier beats
    chance: ``meta["length"]`` lets ``cn3 evaluate --by`` check.
    """
    items = []
    for item, tokens in eligible_trees(trees):
        depth = tree_depth(item.tree)
        if depth in DEPTHS:
            items.append(labelled_tree(item, tokens, str(depth), length=len(tokens)))
    return balanced_split(items, seed, "treedepth")


# --- TopConst -------------------------------------------------------------------------------------

def top_constituents(tree: Tree) -> str:
    """The labels of the top node's children joined by ``_``: ``NP_VP_.`` (Conneau et al.'s TopConst
    classes; the top node is the sentence node, S or another, e.g. SBARQ for a question)."""
    return "_".join(c.label if isinstance(c, Tree) else c for c in tree.children)


def probe_topconst(trees: Sequence[ParsedSentence], seed: int,
                   n_classes: int = TOPCONST_CLASSES) -> dict[str, list[Example]]:
    """TopConst (Conneau et al., 2018): the sequence of constituents right below the sentence node
    (:func:`top_constituents`): the ``n_classes`` commonest sequences and ``OTHER``.

    As Conneau et al., sequences with quotes or not ending in ``.`` are left out. Deviations: 5
    sequences + OTHER instead of 19 + OTHER (the WSJ sample has 5 with 80 or more sentences); sequences
    with sentence-internal commas and colons are kept (dropping them would leave 3 classes); gold trees.
    """
    found = []
    for item, tokens in eligible_trees(trees):
        sequence = top_constituents(item.tree)
        labels = sequence.split("_")
        if labels[-1] == "." and not {"``", "''"} & set(labels):
            found.append((item, tokens, sequence))
    counts = Counter(s for _, _, s in found)
    common = set(sorted(counts, key=lambda s: (-counts[s], s))[:n_classes])  # ties: alphabetical
    items = [labelled_tree(item, tokens, s if s in common else OTHER, sequence=s) for item, tokens, s in found]
    return balanced_split(items, seed, "topconst")
