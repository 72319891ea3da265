"""The surface-information probing tasks (Conneau et al., 2018): SentLen and WC, what a sentence
vector keeps of the sentence's length and of its words."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from data_prep.example import Example
from data_prep.probing.selection import corpus_counts, eligible, labelled
from data_prep.probing.splitting import balanced_split

# SentLen: Conneau et al.'s six bins, kept as they are (EWT's smallest, 26-28, still has ~680 sentences)
SENTLEN_BINS = ((5, 8), (9, 12), (13, 16), (17, 20), (21, 25), (26, 28))
# WC: Conneau et al. take 1,000 words from frequency rank 2,001 of a 1B-word corpus; EWT's vocabulary
# is ~19k types, so 100 words from rank 201 on (about 55-125 occurrences each: mid-frequency here),
# each the one target of 25+ sentences (fewer would leave one or two per class in dev and test)
WC_START, WC_WORDS, WC_MIN_CHARS, WC_MIN_SENTENCES = 200, 100, 4, 25


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
    """The WC target words: by descending frequency in ``counts`` (ties alphabetical) from rank
    ``start + 1``, the first ``n_words`` alphabetic words of 4 characters or more that are the one target
    (:func:`word_content`) of ``min_sentences`` or more ``sentences``. A word with too few sentences
    falls out and the next in rank takes its place, until every target has enough.
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
    Deviation: 100 targets from rank 201 of pooled EWT, each the one target of 25 sentences or more
    (:func:`wc_targets`), instead of 1,000 from rank 2,001 of the BookCorpus.
    """
    pool = eligible(treebank)
    targets = frozenset(wc_targets([ex.sentences[0].tokens for ex in pool], corpus_counts(treebank)))
    items = []
    for ex in pool:
        word = word_content(ex.sentences[0].tokens, targets)
        if word is not None:
            items.append(labelled(ex, ex.sentences[0].tokens, word))
    return balanced_split(items, seed, "wc")
