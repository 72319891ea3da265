"""Probing tasks (Conneau et al., ACL 2018, "What you can cram into a single $&!#* vector") rebuilt from
the staged treebanks.

SentEval's probing data (100k/10k/10k sentences of the Toronto BookCorpus per task) cannot be
downloaded here, so each task is rebuilt from gold treebanks: UD English EWT (dependency trees: 8
tasks) and the NLTK Penn Treebank sample (constituency trees: TreeDepth, TopConst). Every task is a
sentence classification task whose input is the raw tokens only; the gold annotation decides the
label (or the modification) and is then dropped.

What all tasks share, following Conneau et al. where the small treebanks allow it:

* sentences of 5-28 tokens (the range of Conneau et al.'s corpus, see their SentLen bins), each
  distinct token sequence once (a duplicate could land in two splits, or as both O and I);
* balanced classes: every class downsampled to the smallest one (:func:`balance`), seeded;
* seeded train/dev/test of about 80/10/10 (:data:`SPLIT_FRACTIONS`), stratified by class so every
  split stays balanced (:func:`stratified_split`); Tense, SubjNum and ObjNum split by target word form
  instead, as Conneau et al. do (:func:`lexical_split`), and SOMO's replacement words belong to one
  split each;
* ``Example.meta`` keeps what each label was made from (target word, depth, position of a change ...),
  so ``cn3 evaluate --by`` can break scores down by it.

Deviations common to all (each task's own are in its builder's docstring and in the task notes): a
far smaller corpus (hundreds to thousands of items, not 120k), other genres (web text, WSJ) than
novels, gold trees where Conneau et al. parsed automatically, and splits made here. The EWT files
(train, dev, test) are pooled before splitting: the probing splits are not EWT's.

The builders are pure functions: treebank examples (or bracketed trees) and a seed in, labelled
examples per split out.
"""

from __future__ import annotations

import math
import random
import re
import zipfile
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from cn3.util.errors import DataError
from data_prep.example import Example, Sentence
from data_prep.taskspec import SPLITS

MIN_LEN, MAX_LEN = 5, 28  # tokens, as Conneau et al.'s corpus
SPLIT_FRACTIONS = (0.8, 0.1, 0.1)  # train, dev, test
QUOTES = frozenset({'"', "``", "''", "“", "”"})

# SentLen: Conneau et al.'s six bins, kept as they are (EWT's smallest, 26-28, still has ~680 sentences)
SENTLEN_BINS = ((5, 8), (9, 12), (13, 16), (17, 20), (21, 25), (26, 28))
# WC: Conneau et al. take 1,000 words from frequency rank 2,001 of a 1B-word corpus; EWT's vocabulary
# is ~19k types, so 100 words from rank 201 on (about 55-125 occurrences each: mid-frequency here),
# each the one target of 25+ sentences (fewer would leave one or two per class in dev and test)
WC_START, WC_WORDS, WC_MIN_CHARS, WC_MIN_SENTENCES = 200, 100, 4, 25
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
# TreeDepth: Conneau et al.'s classes 5-12
DEPTHS = tuple(range(5, 13))
# TopConst: Conneau et al. keep the 19 commonest sequences + OTHER; the WSJ sample has 5 with 80+
# sentences of 5-28 tokens
TOPCONST_CLASSES = 5
OTHER = "OTHER"


# --- shared steps ---------------------------------------------------------------------------------

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


def balance(examples: Sequence[Example], rng: random.Random,
            key: Callable[[Example], object] = lambda ex: ex.label) -> list[Example]:
    """Every class (``key``) downsampled to the size of the smallest, at random; input order kept."""
    groups: dict = defaultdict(list)
    for i, ex in enumerate(examples):
        groups[key(ex)].append(i)
    if not groups:
        return []
    n = min(len(idx) for idx in groups.values())
    keep = {i for k in sorted(groups, key=str) for i in rng.sample(groups[k], n)}
    return [ex for i, ex in enumerate(examples) if i in keep]


def _cuts(n: int) -> tuple[int, int]:
    train, dev, _ = SPLIT_FRACTIONS
    return round(n * train), round(n * (train + dev))


def stratified_split(examples: Sequence[Example], rng: random.Random,
                     key: Callable[[Example], object] = lambda ex: ex.label) -> dict[str, list[Example]]:
    """Train/dev/test of about 80/10/10 within each class (``key``): balanced classes stay balanced in
    every split. Each split comes out shuffled (as SentEval's files)."""
    groups: dict = defaultdict(list)
    for ex in examples:
        groups[key(ex)].append(ex)
    out: dict[str, list[Example]] = {split: [] for split in SPLITS}
    for k in sorted(groups, key=str):
        items = groups[k][:]
        rng.shuffle(items)
        a, b = _cuts(len(items))
        out["train"] += items[:a]
        out["dev"] += items[a:b]
        out["test"] += items[b:]
    for items in out.values():
        rng.shuffle(items)
    return out


def balanced_split(examples: Sequence[Example], seed: int, task: str) -> dict[str, list[Example]]:
    """:func:`balance`, then :func:`stratified_split`, seeded by ``seed`` and the task name."""
    rng = random.Random(f"{seed}:{task}")
    return stratified_split(balance(examples, rng), rng)


def lexical_split(examples: Sequence[Example], seed: int, task: str) -> dict[str, list[Example]]:
    """Split so that every target form (``meta["target"]``) occurs in one split only, then balance
    each split (Conneau et al.: "a verb form can only occur in one of the partitions").

    Forms are placed from the most frequent down (ties in seeded order), each into the split with the
    most room left for its (majority) class, room being the split's share of the class
    (:data:`SPLIT_FRACTIONS`): the frequent forms fill train, and dev and test get many rarer forms
    rather than one or two frequent ones.
    """
    rng = random.Random(f"{seed}:{task}")
    by_form: dict[str, list[Example]] = defaultdict(list)
    for ex in examples:
        by_form[ex.meta["target"]].append(ex)
    forms = sorted(by_form)
    rng.shuffle(forms)
    forms.sort(key=lambda f: -len(by_form[f]))  # stable: equal counts keep the seeded order
    totals = Counter(ex.label for ex in examples)
    room = {split: {label: share * n for label, n in totals.items()} for split, share in zip(SPLITS, SPLIT_FRACTIONS)}
    parts: dict[str, list[Example]] = {split: [] for split in SPLITS}
    for form in forms:
        items = by_form[form]
        label = Counter(ex.label for ex in items).most_common(1)[0][0]
        split = max(SPLITS, key=lambda s: room[s][label])  # ties: the first (train)
        for ex in items:
            room[split][ex.label] -= 1
        parts[split] += items
    out = {}
    for split, items in parts.items():
        kept = balance(items, rng)
        rng.shuffle(kept)
        out[split] = kept
    return out


def _children(sentence: Sentence, head: int) -> list[int]:
    """0-based positions of the dependents of the word at 0-based ``head``."""
    return [i for i, h in enumerate(sentence.heads) if h == head + 1]


def _root(sentence: Sentence) -> int:
    return sentence.heads.index(0)


def corpus_counts(treebank: Sequence[Example]) -> Counter:
    """Lower-cased token frequencies over every sentence of ``treebank`` ("corpus frequency")."""
    return Counter(t.lower() for ex in treebank for t in ex.sentences[0].tokens)


# --- SentLen --------------------------------------------------------------------------------------

def length_bin(n_tokens: int) -> str | None:
    """The SentLen class of a sentence of ``n_tokens`` (``"9-12"``), ``None`` outside 5-28."""
    return next((f"{lo}-{hi}" for lo, hi in SENTLEN_BINS if lo <= n_tokens <= hi), None)


def probe_sentlen(treebank: Sequence[Example], seed: int) -> dict[str, list[Example]]:
    """SentLen (Conneau et al., 2018): the length of the sentence in tokens, in their six bins 5-8,
    9-12, 13-16, 17-20, 21-25, 26-28. Same bins (no deviation); lengths are UD syntactic words
    ("do n't" is two)."""
    items = [labelled(ex, ex.sentences[0].tokens, length_bin(len(ex.sentences[0])), length=len(ex.sentences[0]))
             for ex in eligible(treebank)]
    return balanced_split(items, seed, "sentlen")


# --- WC -------------------------------------------------------------------------------------------

def wc_targets(sentences: Sequence[Sequence[str]], counts: Counter, start: int = WC_START,
               n_words: int = WC_WORDS, min_sentences: int = WC_MIN_SENTENCES) -> list[str]:
    """The WC target words: by descending frequency in ``counts`` (ties alphabetical), from rank
    ``start + 1`` on, the first ``n_words`` alphabetic words of at least 4 characters (Conneau et al.'s
    noise filter) that are the one target (:func:`word_content`) of ``min_sentences`` or more of
    ``sentences``.

    A word falls out when too few sentences hold it alone (e.g. two words that always occur together)
    and the next in rank takes its place, until every target has enough sentences; removing targets
    only adds sentences to the others, so the loop ends.
    """
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    once = Counter(w for tokens in sentences for w, k in Counter(t.lower() for t in tokens).items() if k == 1)
    # a word in fewer than min_sentences sentences (once each) can never qualify: skip it at once
    pool = iter(w for w in ranked[start:] if w.isalpha() and len(w) >= WC_MIN_CHARS and once[w] >= min_sentences)
    targets = [w for _, w in zip(range(n_words), pool)]
    while True:
        found = Counter(word_content(tokens, frozenset(targets)) for tokens in sentences)
        weak = {w for w in targets if found[w] < min_sentences}
        if not weak:
            return targets
        kept = [w for w in targets if w not in weak]
        targets = kept + [w for _, w in zip(range(n_words - len(kept)), pool)]


def word_content(tokens: Sequence[str], targets: frozenset[str]) -> str | None:
    """The one target word of a sentence: ``None`` unless exactly one target occurs, exactly once
    (lower-cased comparison)."""
    found = [t.lower() for t in tokens if t.lower() in targets]
    return found[0] if len(found) == 1 else None


def probe_wc(treebank: Sequence[Example], seed: int) -> dict[str, list[Example]]:
    """WC, word content (Conneau et al., 2018): which of the target words the sentence contains.

    Deviation: 100 target words from frequency rank 201 of pooled EWT on, each the one target of at
    least 25 sentences (:func:`wc_targets`), instead of 1,000 from rank 2,001 of the BookCorpus: ~25
    sentences per word instead of 120 (EWT has ~11k sentences of 5-28 tokens).
    """
    pool = eligible(treebank)
    targets = frozenset(wc_targets([ex.sentences[0].tokens for ex in pool], corpus_counts(treebank)))
    items = []
    for ex in pool:
        word = word_content(ex.sentences[0].tokens, targets)
        if word is not None:
            items.append(labelled(ex, ex.sentences[0].tokens, word))
    return balanced_split(items, seed, "wc")


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


# --- Tense, SubjNum, ObjNum -----------------------------------------------------------------------

def main_verb(sentence: Sentence) -> int | None:
    """0-based position of the main-clause verb: the root, or its copula when it has one (UD makes the
    predicate of "she is happy" the root: "happy", with "is" as its ``cop`` dependent)."""
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
    ``PRES``)? Each verb form occurs in one split only. Deviations: the main verb is read off the
    gold UD tree (:func:`main_verb`, the copula for copular clauses); forms of corpus frequency
    3-1,000 (:data:`TARGET_FREQ`) instead of 100-5,000."""
    return _lexical_task(treebank, seed, "tense", tense)


def probe_subjnum(treebank: Sequence[Example], seed: int) -> dict[str, list[Example]]:
    """SubjNum (Conneau et al., 2018): is the subject of the main clause singular (``NN``) or plural
    (``NNS``)? Common nouns only; each noun form occurs in one split only. Deviations: the subject is
    the root's ``nsubj`` or ``nsubj:pass`` in the gold UD tree; forms of corpus frequency 3-1,000."""
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
    """SOMO, semantic odd man out (Conneau et al., 2018): was one noun or verb replaced by another of
    the same part of speech (``C``), or is the sentence as written (``O``)?

    As Conneau et al.: half of the sentences are changed, no sentence occurs in both versions, and
    each replacement word is used in one split only (the candidate words are divided among the
    splits ~80/10/10, and a sentence of a split draws from that split's share). Deviations: the
    replacement matches the original's PTB tag and log2 frequency band in EWT (:func:`odd_man_out`)
    instead of the frequencies of the bigrams it forms with its neighbours (EWT is too small for
    bigram counts: most bigrams occur once); words of frequency 5-100 instead of 40-400. Both classes
    are drawn from the sentences that have a replaceable word, so O is not "a sentence without one".
    """
    rng = random.Random(f"{seed}:somo")
    counts = corpus_counts(treebank)
    full = somo_vocabulary(treebank, counts)
    words = sorted({w for ws in full.values() for w in ws})
    rng.shuffle(words)
    a, b = _cuts(len(words))
    share = {**dict.fromkeys(words[:a], "train"), **dict.fromkeys(words[a:b], "dev"),
             **dict.fromkeys(words[b:], "test")}
    pool = eligible(treebank)
    rng.shuffle(pool)
    a, b = _cuts(len(pool))
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
    """The two coordinated main clauses of a sentence, or ``None`` when it has not exactly that shape.

    Conneau et al.: the sentence has one coordinating conjunction (CC) only, and it coordinates two
    top clauses. In UD: the root and its only ``conj`` dependent both have a subject, the ``cc``
    (the sentence's one CC) hangs on that conjunct, whose words are contiguous and followed by
    punctuation only.
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
    swapped (``I``: "there was something to consider but he might be a prince") or not (``O``)?

    As Conneau et al.: one CC per sentence, coordinating two main clauses (:func:`coordination`); no
    sentence in both versions; as many O as I sentences whose first clause is the longer, whose
    second is, and whose clauses are equally long (``meta["longer"]``, as presented), so clause
    length gives nothing away. The split is stratified by class and that length relation.
    Deviations: the clauses come from gold UD trees; the swapped sentence is recased (a capital
    moves to the new first word), which Conneau et al. do not describe.
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


# --- constituency trees (PTB) ---------------------------------------------------------------------

@dataclass(frozen=True)
class Tree:
    """A constituency tree: a label and children, each a ``Tree`` or a word (``str``)."""

    label: str
    children: tuple[Union["Tree", str], ...]


@dataclass(frozen=True)
class ParsedSentence:
    """A tree read from a file, with where it starts (for messages and provenance)."""

    tree: Tree
    source: str
    line: int


_BRACKET_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def parse_brackets(text: str, source: str = "<text>") -> list[tuple[Tree, int]]:
    """Every tree of a PTB bracketed text (``.mrg``) with the 1-based line it starts on.

    ``(S (NP (DT the) (NN cat)) (VP (VBD sat)))``: a node is ``(LABEL child ...)``, a word a token
    without brackets; PTB files wrap each sentence in an unlabelled bracket ``( (S ...) )``, kept
    here as a node labelled ``""``. Unbalanced brackets are a ``DataError``.
    """
    trees: list[tuple[Tree, int]] = []
    stack: list[tuple[str, list, int]] = []  # open nodes: label, children so far, line
    label_next = False  # the token after "(" is the node's label
    for number, line in enumerate(text.splitlines(), start=1):
        for token in _BRACKET_TOKEN.findall(line):
            if token == "(":
                stack.append(("", [], number))
                label_next = True
            elif token == ")":
                if not stack:
                    raise DataError("unbalanced ')': no open bracket", source, number)
                label, children, start = stack.pop()
                node = Tree(label, tuple(children))
                if stack:
                    stack[-1][1].append(node)
                else:
                    trees.append((node, start))
                label_next = False
            elif label_next:
                _, children, start = stack.pop()
                stack.append((token, children, start))
                label_next = False
            elif stack:
                stack[-1][1].append(token)
            else:
                raise DataError(f"word {token!r} outside any bracket", source, number)
    if stack:
        raise DataError("unbalanced '(': the last tree is not closed", source, stack[0][2])
    return trees


def clean_tree(tree: Tree) -> Tree | None:
    """The tree without traces and function tags, as parsers output it: ``-NONE-`` words dropped with
    the constituents left empty, ``NP-SBJ-1`` read as ``NP`` (tags such as ``-LRB-`` kept), and the
    unlabelled wrapping bracket of a PTB sentence removed."""
    if tree.label == "-NONE-":
        return None
    children = tuple(c if isinstance(c, str) else clean_tree(c) for c in tree.children)
    children = tuple(c for c in children if c is not None)
    if not children:
        return None
    if tree.label == "" and len(children) == 1 and isinstance(children[0], Tree):
        return children[0]
    label = tree.label if tree.label.startswith("-") else re.split(r"[-=]", tree.label)[0]
    return Tree(label, children)


def words(tree: Tree) -> list[str]:
    """The words of a tree, left to right."""
    return [w for c in tree.children for w in ([c] if isinstance(c, str) else words(c))]


def tree_depth(tree: Tree) -> int:
    """Nodes on the longest path from the top of the tree to a word, counting the top constituent and
    the part-of-speech level but not the word: ``(S (NP (DT the) (NN cat)) (VP (VBD sat)))`` is 3."""
    return 1 + max((tree_depth(c) for c in tree.children if isinstance(c, Tree)), default=0)


def top_constituents(tree: Tree) -> str:
    """The labels of the top node's children joined by ``_``: ``NP_VP_.`` (Conneau et al.'s TopConst
    classes; the top node is the sentence node, S or another, e.g. SBARQ for a question)."""
    return "_".join(c.label if isinstance(c, Tree) else c for c in tree.children)


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


def _eligible_trees(trees: Sequence[ParsedSentence]) -> list[tuple[ParsedSentence, list[str]]]:
    """As :func:`eligible`, for trees: 5-28 words, each distinct word sequence once."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for item in trees:
        tokens = words(item.tree)
        if MIN_LEN <= len(tokens) <= MAX_LEN and tuple(tokens) not in seen:
            seen.add(tuple(tokens))
            out.append((item, tokens))
    return out


def _tree_item(item: ParsedSentence, tokens: list[str], label: str, **meta) -> Example:
    return Example([Sentence(tokens)], label, item.line, item.source, meta)


def probe_treedepth(trees: Sequence[ParsedSentence], seed: int) -> dict[str, list[Example]]:
    """TreeDepth (Conneau et al., 2018): the depth of the sentence's constituency tree
    (:func:`tree_depth`), classes 5-12 as theirs. Deviations: gold PTB trees (traces removed) instead
    of parser output, and depth is not decorrelated from length (Conneau et al. sample sentences to a
    bivariate Gaussian of length and depth with diagonal covariance; the WSJ sample is too small), so
    a length-only classifier beats chance here: ``meta["length"]`` lets ``cn3 evaluate --by`` check."""
    items = []
    for item, tokens in _eligible_trees(trees):
        depth = tree_depth(item.tree)
        if depth in DEPTHS:
            items.append(_tree_item(item, tokens, str(depth), length=len(tokens)))
    return balanced_split(items, seed, "treedepth")


def probe_topconst(trees: Sequence[ParsedSentence], seed: int,
                   n_classes: int = TOPCONST_CLASSES) -> dict[str, list[Example]]:
    """TopConst (Conneau et al., 2018): the sequence of constituents right below the sentence node
    (:func:`top_constituents`), the ``n_classes`` commonest sequences and ``OTHER``.

    As Conneau et al., sequences with quotes or not ending in ``.`` are left out (of OTHER too).
    Deviations: 5 sequences + OTHER instead of 19 + OTHER (the WSJ sample has only 5 with 80 or more
    sentences); sequences with sentence-internal commas and colons are kept (Conneau et al. drop them,
    which would leave 3 classes of WSJ's comma-rich sentences); gold PTB trees.
    """
    found = []
    for item, tokens in _eligible_trees(trees):
        sequence = top_constituents(item.tree)
        labels = sequence.split("_")
        if labels[-1] == "." and not {"``", "''"} & set(labels):
            found.append((item, tokens, sequence))
    counts = Counter(s for _, _, s in found)
    common = set(sorted(counts, key=lambda s: (-counts[s], s))[:n_classes])  # ties: alphabetical
    items = [_tree_item(item, tokens, s if s in common else OTHER, sequence=s) for item, tokens, s in found]
    return balanced_split(items, seed, "topconst")
