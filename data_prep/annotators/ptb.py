"""Penn Treebank (PTB) tags -> Universal POS (the 17 UD v2 tags): :data:`PTB_TO_UPOS`.

Based on the standard ``en-ptb.map`` of the universal tagset (Petrov, Das & McDonald 2012),
extended to the UD v2 inventory as the UD English treebanks (EWT) use it. Where it differs from
the universal tagset or from UD:

* NNP NNPS -> PROPN, MD -> AUX (universal tagset: NOUN, VERB);
* IN -> ADP: subordinators (*because*, *if*) are SCONJ in UD, not recoverable from the tag;
* TO -> PART: preposition *to* is ADP in UD, not recoverable; POS (possessive *'s*) -> PART;
* WDT -> PRON (relative *which/that*, the majority; DET in *which book* is not recoverable);
* EX -> PRON (existential *there*, as in UD); ``-X-`` (CoNLL-2003's -DOCSTART- tag) -> X.

Rules on top of the table:

* a compound tag such as CoNLL-2003's ``NN|SYM`` maps by its first known alternative;
* a VB* tag on a form of *be* (:data:`BE_FORMS`) -> AUX, as in UD, where *be* is AUX both as
  auxiliary and as copula (*have*/*do* stay VERB: their AUX use is not recoverable from the tag);
* any other tag -> ``X``.
"""

from __future__ import annotations

#: The 45 tags of the Penn Treebank tagset (Marcus et al. 1993 / Santorini 1990).
PTB_TAGS: tuple[str, ...] = (
    "CC", "CD", "DT", "EX", "FW", "IN", "JJ", "JJR", "JJS", "LS", "MD", "NN", "NNS", "NNP",
    "NNPS", "PDT", "POS", "PRP", "PRP$", "RB", "RBR", "RBS", "RP", "SYM", "TO", "UH", "VB",
    "VBD", "VBG", "VBN", "VBP", "VBZ", "WDT", "WP", "WP$", "WRB",
    "$", "#", "``", "''", "-LRB-", "-RRB-", ",", ".", ":",
)  # fmt: skip

PTB_TO_UPOS: dict[str, str] = {
    # nouns
    "NN": "NOUN", "NNS": "NOUN", "NNP": "PROPN", "NNPS": "PROPN", "NP": "PROPN", "NPS": "PROPN",
    # verbs
    "VB": "VERB", "VBD": "VERB", "VBG": "VERB", "VBN": "VERB", "VBP": "VERB", "VBZ": "VERB",
    "MD": "AUX",
    # adjectives, adverbs
    "JJ": "ADJ", "JJR": "ADJ", "JJS": "ADJ", "AFX": "ADJ",
    "RB": "ADV", "RBR": "ADV", "RBS": "ADV", "WRB": "ADV",
    # function words
    "IN": "ADP", "RP": "ADP", "TO": "PART", "POS": "PART",
    "CC": "CCONJ", "CD": "NUM", "DT": "DET", "PDT": "DET",
    "WDT": "PRON", "PRP": "PRON", "PRP$": "PRON", "WP": "PRON", "WP$": "PRON", "EX": "PRON",
    "UH": "INTJ",
    # symbols
    "SYM": "SYM", "$": "SYM", "#": "SYM",
    # punctuation
    ".": "PUNCT", ",": "PUNCT", ":": "PUNCT", "``": "PUNCT", "''": "PUNCT", '"': "PUNCT",
    "'": "PUNCT", "`": "PUNCT", "(": "PUNCT", ")": "PUNCT", "[": "PUNCT", "]": "PUNCT",
    "{": "PUNCT", "}": "PUNCT", "-LRB-": "PUNCT", "-RRB-": "PUNCT", "-LCB-": "PUNCT",
    "-RCB-": "PUNCT", "-LSB-": "PUNCT", "-RSB-": "PUNCT", "HYPH": "PUNCT", "NFP": "PUNCT",
    "!": "PUNCT", "?": "PUNCT", ";": "PUNCT", "-": "PUNCT", "--": "PUNCT",
    # other
    "FW": "X", "LS": "X", "ADD": "X", "GW": "X", "XX": "X", "NIL": "X", "-NONE-": "X", "-X-": "X",
}  # fmt: skip

#: forms of *be* whose VB* tag becomes AUX (compared lower-cased).
BE_FORMS: frozenset[str] = frozenset(
    {"be", "is", "am", "are", "was", "were", "been", "being", "'s", "'re", "'m", "’s", "’re", "’m"}
)


def ptb_to_upos(tag: str, word: str | None = None) -> str:
    """The UPOS of one PTB ``tag`` (``word`` enables the *be* -> AUX rule); unknown tags -> ``X``."""
    upos = PTB_TO_UPOS.get(tag)
    if upos is None:
        upos = "X"
        if "|" in tag:  # CoNLL-2003 "NN|SYM": the first alternative that is known
            for part in tag.split("|"):
                if part in PTB_TO_UPOS:
                    upos = PTB_TO_UPOS[part]
                    break
    if upos == "VERB" and word is not None and word.lower() in BE_FORMS:
        return "AUX"
    return upos


def map_ptb(tags: list[str], words: list[str] | None = None) -> list[str]:
    """:func:`ptb_to_upos` over a sentence."""
    if words is None:
        return [ptb_to_upos(t) for t in tags]
    return [ptb_to_upos(t, w) for t, w in zip(tags, words)]

#: bumped whenever the table or the rules change (part of the ``gold`` annotator's version).
PTB_MAP_VERSION = 1
