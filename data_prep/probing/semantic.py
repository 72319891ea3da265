"""The semantic-information probing tasks (Conneau et al., 2018), all from UD EWT: Tense, SubjNum
and ObjNum (a property of one word of the main clause, split by that word's form), SOMO (was a word
replaced?) and CoordInv (were two coordinated clauses swapped?)."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from data_prep.example import Example, Sentence
from data_prep.probing.selection import corpus_counts, eligible, labelled
from data_prep.probing.splitting import lexical_split, split_cuts, stratified_split
from data_prep.taskspec import SPLITS

# Tense, SubjNum, ObjNum: Conneau et al. keep target forms of corpus frequency 100-5,000, which drops
# the commonest forms (is, was, ...). Here: 3-1,000 in pooled EWT, which drops is/are/was/have/'s
# (a third of the Tense data otherwise) and one-off forms (typos).
TARGET_FREQ = (3, 1000)
SUBJECT_RELATIONS = ("nsubj", "nsubj:pass")
# SOMO: Conneau et al. draw target and replacement from frequency 40-400 (lower than the other tasks:
# frequent words fit too many contexts); here 5-100, in log2 frequency bands
SOMO_FREQ = (5, 100)
SOMO_XPOS = frozenset({"NN", "NNS", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ"})
SOMO_UPOS = frozenset({"NOUN", "VERB"})  # not AUX (is, have) nor PROPN


# --- UD dependency trees --------------------------------------------------------------------------

def _children(sentence: Sentence, head: int) -> list[int]:
    """0-based positions of the dependents of the word at 0-based ``head``."""
    return [i for i, h in enumerate(sentence.heads) if h == head + 1]


def _root(sentence: Sentence) -> int:
    return sentence.heads.index(0)


# --- Tense, SubjNum, ObjNum -----------------------------------------------------------------------

def main_verb(sentence: Sentence) -> int | None:
    """0-based position of the main-clause verb: the root, or its ``cop`` dependent when it has one (UD
    makes "happy" the root of "she is happy").
    """
    root = _root(sentence)
    cop = [i for i in _children(sentence, root) if sentence.deprels[i] == "cop"]
    return cop[0] if cop else root


def tense(sentence: Sentence) -> tuple[str, str] | None:
    """``(PAST|PRES, form)`` of the main-clause verb by its PTB tag (VBD; VBP/VBZ), lower-cased form;
    ``None`` for any other tag (VB, VBN, VBG, MD: e.g. "has eaten", "will go")."""
    i = main_verb(sentence)
    label = {"VBD": "PAST", "VBP": "PRES", "VBZ": "PRES"}.get(sentence.xpos[i])
    return (label, sentence.tokens[i].lower()) if label else None


def _noun_number(sentence: Sentence, relations: Sequence[str]) -> tuple[str, str] | None:
    """``(NN|NNS, form)`` of the root's first dependent with one of ``relations``, when it is a
    common noun (NN or NNS); ``None`` otherwise."""
    dependent = next((i for i in _children(sentence, _root(sentence)) if sentence.deprels[i] in relations), None)
    if dependent is None or sentence.xpos[dependent] not in ("NN", "NNS"):
        return None
    return sentence.xpos[dependent], sentence.tokens[dependent].lower()


def subject_number(sentence: Sentence) -> tuple[str, str] | None:
    """``(NN|NNS, form)`` of the main clause's subject (the root's ``nsubj`` or ``nsubj:pass``)."""
    return _noun_number(sentence, SUBJECT_RELATIONS)


def object_number(sentence: Sentence) -> tuple[str, str] | None:
    """``(NN|NNS, form)`` of the main clause's direct object (the root's ``obj``)."""
    return _noun_number(sentence, ("obj",))


def _lexical_task(treebank: Sequence[Example], seed: int, task: str,
                  label_of: Callable[[Sentence], tuple[str, str] | None]) -> dict[str, list[Example]]:
    """Label every eligible sentence with ``label_of``, keep target forms of corpus frequency in
    :data:`TARGET_FREQ`, and split by target form (:func:`lexical_split`)."""
    counts = corpus_counts(treebank)
    lo, hi = TARGET_FREQ
    items = []
    for ex in eligible(treebank):
        found = label_of(ex.sentences[0])
        if found is not None and lo <= counts[found[1]] <= hi:
            items.append(labelled(ex, ex.sentences[0].tokens, found[0], target=found[1]))
    return lexical_split(items, seed, task)


def probe_tense(treebank: Sequence[Example], seed: int) -> dict[str, list[Example]]:
    """Tense (Conneau et al., 2018): is the main-clause verb past (VBD: ``PAST``) or present (VBP, VBZ:
    ``PRES``)? Each verb form occurs in one split only. Deviations: the main verb comes from the gold
    UD tree (:func:`main_verb`); forms of corpus frequency in :data:`TARGET_FREQ` instead of 100-5,000.
    """
    return _lexical_task(treebank, seed, "tense", tense)


def probe_subjnum(treebank: Sequence[Example], seed: int) -> dict[str, list[Example]]:
    """SubjNum (Conneau et al., 2018): is the main clause's subject (the root's ``nsubj``/``nsubj:pass``
    in the gold tree) singular (``NN``) or plural (``NNS``)? Common nouns only, each form in one split;
    forms of corpus frequency in :data:`TARGET_FREQ`.
    """
    return _lexical_task(treebank, seed, "subjnum", subject_number)


def probe_objnum(treebank: Sequence[Example], seed: int) -> dict[str, list[Example]]:
    """ObjNum (Conneau et al., 2018): is the direct object of the main clause singular (``NN``) or
    plural (``NNS``)? As :func:`probe_subjnum`, with the root's ``obj``."""
    return _lexical_task(treebank, seed, "objnum", object_number)


# --- SOMO -----------------------------------------------------------------------------------------

def frequency_band(count: int) -> int:
    """The log2 frequency band of a word (4-7 occurrences: 2, 8-15: 3, ...)."""
    return int(math.log2(count))


def somo_positions(sentence: Sentence, counts: Counter) -> list[int]:
    """Positions of the words SOMO may replace: lower-case alphabetic nouns and verbs (not auxiliaries,
    not proper nouns) of corpus frequency in :data:`SOMO_FREQ`."""
    lo, hi = SOMO_FREQ
    return [i for i, (t, u, x) in enumerate(zip(sentence.tokens, sentence.upos, sentence.xpos))
            if u in SOMO_UPOS and x in SOMO_XPOS and t.isalpha() and t.islower() and lo <= counts[t] <= hi]


def somo_vocabulary(treebank: Sequence[Example], counts: Counter) -> dict[tuple[str, int], list[str]]:
    """Candidate replacements by ``(xpos, frequency band)``: every word :func:`somo_positions` finds,
    sorted (deterministic)."""
    vocab: dict[tuple[str, int], set[str]] = defaultdict(set)
    for ex in treebank:
        s = ex.sentences[0]
        for i in somo_positions(s, counts):
            vocab[s.xpos[i], frequency_band(counts[s.tokens[i]])].add(s.tokens[i])
    return {key: sorted(words) for key, words in vocab.items()}


def odd_man_out(sentence: Sentence, counts: Counter, vocab: dict[tuple[str, int], list[str]],
                rng: random.Random) -> tuple[int, str] | None:
    """``(position, replacement)``: a random replaceable word and another word of the same PTB tag
    and frequency band from ``vocab``; ``None`` when no word of the sentence has one."""
    positions = somo_positions(sentence, counts)
    rng.shuffle(positions)
    for i in positions:
        word = sentence.tokens[i]
        others = [w for w in vocab.get((sentence.xpos[i], frequency_band(counts[word])), []) if w != word]
        if others:
            return i, rng.choice(others)
    return None


def probe_somo(treebank: Sequence[Example], seed: int) -> dict[str, list[Example]]:
    """SOMO, semantic odd man out (Conneau et al., 2018): was one noun or verb replaced by another of the
    same part of speech (``C``), or is the sentence as written (``O``)?

    As Conneau et al.: half of the sentences changed, none in both versions, each replacement word used
    in one split only. Deviations: the replacement matches the original's PTB tag and log2 frequency
    band (:func:`odd_man_out`), not bigram frequencies (EWT is too small for them); words of frequency
    in :data:`SOMO_FREQ` instead of 40-400. Both classes come from sentences that have a replaceable word.
    """
    rng = random.Random(f"{seed}:somo")
    counts = corpus_counts(treebank)
    full = somo_vocabulary(treebank, counts)
    words = sorted({w for ws in full.values() for w in ws})
    rng.shuffle(words)
    a, b = split_cuts(len(words))
    share = {**dict.fromkeys(words[:a], "train"), **dict.fromkeys(words[a:b], "dev"),
             **dict.fromkeys(words[b:], "test")}
    pool = eligible(treebank)
    rng.shuffle(pool)
    a, b = split_cuts(len(pool))
    out = {}
    for split, part in zip(SPLITS, (pool[:a], pool[a:b], pool[b:])):
        vocab = {key: [w for w in ws if share[w] == split] for key, ws in full.items()}
        changeable = [(ex, odd_man_out(ex.sentences[0], counts, vocab, rng)) for ex in part]
        changeable = [(ex, change) for ex, change in changeable if change is not None]
        half = len(changeable) // 2
        items = []
        for k, (ex, (position, word)) in enumerate(changeable[: 2 * half]):
            tokens = ex.sentences[0].tokens
            if k < half:
                items.append(labelled(ex, tokens[:position] + [word] + tokens[position + 1:], "C",
                                      position=position, original=tokens[position], replacement=word))
            else:
                items.append(labelled(ex, tokens, "O"))
        rng.shuffle(items)
        out[split] = items
    return out


# --- CoordInv -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Coordination:
    """A sentence cut around its clausal coordination: ``first + connector + second + tail``
    (connector: the conjunction with the punctuation before it, e.g. ``, but``; tail: final punctuation)."""

    first: list[str]
    connector: list[str]
    second: list[str]
    tail: list[str]


def _has_subject(sentence: Sentence, word: int) -> bool:
    return any(sentence.deprels[i] in (*SUBJECT_RELATIONS, "expl", "csubj") for i in _children(sentence, word))


def _subtree(sentence: Sentence, word: int) -> list[int]:
    out, todo = [], [word]
    while todo:
        node = todo.pop()
        out.append(node)
        todo += _children(sentence, node)
    return sorted(out)


def coordination(sentence: Sentence) -> Coordination | None:
    """The two coordinated main clauses of a sentence, or ``None`` when it has not exactly that shape
    (Conneau et al.: one CC only, coordinating two top clauses). In UD: the root and its only ``conj``
    both have a subject, the sentence's one ``cc`` hangs on that conjunct, whose words are contiguous
    and followed by punctuation only.
    """
    if sum(x == "CC" for x in sentence.xpos) != 1:
        return None
    root = _root(sentence)
    conj = [i for i in _children(sentence, root) if sentence.deprels[i] == "conj"]
    if len(conj) != 1 or not (_has_subject(sentence, root) and _has_subject(sentence, conj[0])):
        return None
    span = _subtree(sentence, conj[0])
    cc = [i for i in _children(sentence, conj[0]) if sentence.deprels[i] == "cc" and sentence.xpos[i] == "CC"]
    lo, hi = span[0], span[-1]
    punct = [u == "PUNCT" for u in sentence.upos]
    if (not cc or span != list(range(lo, hi + 1)) or not all(punct[hi + 1:])
            or not all(punct[lo:cc[0]])):  # the conjunct must open with (punctuation and) its conjunction
        return None
    end = hi + 1
    while end > cc[0] + 1 and punct[end - 1]:  # final punctuation inside the conjunct goes to the tail
        end -= 1
    start = lo
    while start > 0 and punct[start - 1]:  # a comma before the conjunction attached to the first clause
        start -= 1
    tokens = sentence.tokens
    parts = Coordination(tokens[:start], tokens[start: cc[0] + 1], tokens[cc[0] + 1: end], tokens[end:])
    return parts if parts.first and parts.second else None


def invert_coordination(parts: Coordination, xpos_first: str) -> list[str]:
    """``second + connector + first + tail``, recased: the new first word gets a capital, the old one
    loses it unless it is "I", a proper noun (``xpos_first`` NNP/NNPS) or an acronym ("US")."""
    first, second = list(parts.first), list(parts.second)
    word = first[0]
    if word != "I" and xpos_first not in ("NNP", "NNPS") and word[:1].isupper() and not word[1:2].isupper():
        first[0] = word[0].lower() + word[1:]
    second[0] = second[0][0].upper() + second[0][1:]
    return second + parts.connector + first + parts.tail


def _longer(parts: Coordination) -> str:
    """Which clause is longer as presented: ``first``, ``second`` or ``equal``."""
    a, b = len(parts.first), len(parts.second)
    return "first" if a > b else "second" if b > a else "equal"


def probe_coordinv(treebank: Sequence[Example], seed: int) -> dict[str, list[Example]]:
    """CoordInv, coordination inversion (Conneau et al., 2018): were the two coordinated main clauses
    swapped (``I``) or not (``O``)?

    As Conneau et al.: one CC per sentence, coordinating two main clauses (:func:`coordination`); no
    sentence in both versions; O and I balanced within each clause-length relation (``meta["longer"]``),
    so length gives nothing away; split stratified by class and that relation. Deviations: gold UD
    trees; the swapped sentence is recased.
    """
    rng = random.Random(f"{seed}:coordinv")
    by_relation: dict[str, list[tuple[Example, Coordination]]] = defaultdict(list)
    for ex in eligible(treebank):
        parts = coordination(ex.sentences[0])
        if parts is not None:
            by_relation[_longer(parts)].append((ex, parts))
    for group in by_relation.values():
        rng.shuffle(group)
    # Swapping turns "first longer" into "second longer" and back: m of each kept and m of each swapped
    # gives m + m of both in both classes; equal lengths stay equal.
    m = min(len(by_relation["first"]), len(by_relation["second"])) // 2
    e = len(by_relation["equal"]) // 2
    items = []
    for relation, n in (("first", m), ("second", m), ("equal", e)):
        group = by_relation[relation]
        for ex, parts in group[:n]:
            items.append(labelled(ex, ex.sentences[0].tokens, "O", longer=relation))
        for ex, parts in group[n: 2 * n]:
            swapped = {"first": "second", "second": "first", "equal": "equal"}[relation]
            tokens = invert_coordination(parts, ex.sentences[0].xpos[0])
            items.append(labelled(ex, tokens, "I", longer=swapped))
    return stratified_split(items, rng, key=lambda ex: (ex.label, ex.meta["longer"]))
