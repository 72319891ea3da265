"""The Universal Dependencies inventories every annotator maps to (UD v2).

* :data:`UPOS`: the 17 universal part-of-speech tags.
* :data:`UD_RELATIONS`: the 37 universal dependency relations. Language-specific subtypes
  (``nsubj:pass``, ``obl:tmod``, ``acl:relcl`` ...) are valid labels too: :func:`is_ud_deprel`
  checks the part before the colon. Gold labels are never stripped of their subtype.
"""

from __future__ import annotations

UPOS: frozenset[str] = frozenset(
    {
        "ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM",
        "PART", "PRON", "PROPN", "PUNCT", "SCONJ", "SYM", "VERB", "X",
    }
)  # fmt: skip

UD_RELATIONS: frozenset[str] = frozenset(
    {
        "acl", "advcl", "advmod", "amod", "appos", "aux", "case", "cc", "ccomp", "clf",
        "compound", "conj", "cop", "csubj", "dep", "det", "discourse", "dislocated", "expl",
        "fixed", "flat", "goeswith", "iobj", "list", "mark", "nmod", "nsubj", "nummod", "obj",
        "obl", "orphan", "parataxis", "punct", "reparandum", "root", "vocative", "xcomp",
    }
)  # fmt: skip

#: the UD "nominal" parts of speech: a prepositional phrase under one of these is ``nmod``, else ``obl``.
NOMINAL_UPOS: frozenset[str] = frozenset({"NOUN", "PROPN", "PRON", "NUM", "DET", "SYM"})


def is_ud_deprel(label: str) -> bool:
    """True for a universal relation, with or without a subtype (``nsubj``, ``nsubj:pass``)."""
    return label.split(":", 1)[0] in UD_RELATIONS
