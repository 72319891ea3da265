"""spaCy's English dependency labels (ClearNLP style) -> Universal Dependencies v2 relations.

spaCy's English pipelines are trained on OntoNotes converted with ClearNLP, whose labels and
attachment conventions predate UD. The spaCy annotator keeps spaCy's **tree** (heads) and
relabels each token with the UD relation that *token* would carry in a UD analysis, as far as
the label, the token's UPOS and its head's UPOS can tell (:data:`CLEARNLP_TO_UD`, then the context
rules of :func:`to_ud`). The tree itself is *not* converted, so it differs from UD in these places:

* **prepositions head their objects**: *sat on the mat* is ``sat -> on -> mat`` (UD: ``sat -> mat
  -> on``); ``prep`` becomes ``case`` and ``pobj`` ``obl`` (``nmod`` under a nominal), each its UD
  role, but hanging on the other end of the chain than in UD.
* **copulas head their predicates**: *she is happy* is ``is -> happy``; ``acomp``/``attr``/``oprd``
  become ``xcomp``, the UD label of the same construction with a non-copular verb (*she seems
  happy*); UD ``cop`` is never produced.
* **subordinate clauses under prepositions** (*after leaving*, ``pcomp``): the clause gets
  ``advcl`` (``acl`` under a nominal), the preposition ``case`` (UD would have ``mark``).
* **passive agents**: *by* is ``agent`` of the verb -> ``case``; its object ``obl:agent``.

Other labels without a same-named UD relation: ``dative`` -> ``iobj`` (``case`` on an ADP: *gave it
to him*), ``aux`` on infinitival *to* (PART) -> ``mark``, ``intj`` -> ``discourse``, ``meta`` -> ``dep``
(no UD analogue), ``neg`` -> ``advmod`` (UD v2 has no ``neg``; ``det`` for *no*, a DET), ``npadvmod``
-> ``obl:unmarked`` (``nmod:unmarked`` under a nominal; UD >= 2.14 names, formerly ``obl:npmod``/
``nmod:npmod``), ``poss`` -> ``nmod:poss``, ``prt`` -> ``compound:prt``, ``quantmod`` -> ``advmod``
(*about 5*), ``relcl`` -> ``acl:relcl``.

"Nominal" is :data:`~data_prep.annotators.ud.NOMINAL_UPOS`. A label not in the table is kept when
it already is a UD relation, else it becomes ``dep``.
"""

from __future__ import annotations

from data_prep.annotators.ud import NOMINAL_UPOS, is_ud_deprel

CLEARNLP_TO_UD: dict[str, str] = {
    "ROOT": "root",
    "acl": "acl",
    "acomp": "xcomp",
    "advcl": "advcl",
    "advmod": "advmod",
    "agent": "case",
    "amod": "amod",
    "appos": "appos",
    "attr": "xcomp",
    "aux": "aux",
    "auxpass": "aux:pass",
    "case": "case",
    "cc": "cc",
    "ccomp": "ccomp",
    "compound": "compound",
    "conj": "conj",
    "csubj": "csubj",
    "csubjpass": "csubj:pass",
    "dative": "iobj",
    "dep": "dep",
    "det": "det",
    "dobj": "obj",
    "expl": "expl",
    "intj": "discourse",
    "mark": "mark",
    "meta": "dep",
    "neg": "advmod",
    "nmod": "nmod",
    "npadvmod": "obl:unmarked",
    "nsubj": "nsubj",
    "nsubjpass": "nsubj:pass",
    "nummod": "nummod",
    "oprd": "xcomp",
    "parataxis": "parataxis",
    "pcomp": "advcl",
    "pobj": "obl",
    "poss": "nmod:poss",
    "preconj": "cc:preconj",
    "predet": "det:predet",
    "prep": "case",
    "prt": "compound:prt",
    "punct": "punct",
    "quantmod": "advmod",
    "relcl": "acl:relcl",
    "xcomp": "xcomp",
}

#: labels whose UD relation depends on the token's or its head's UPOS (see the table).
CONTEXT_LABELS: frozenset[str] = frozenset({"aux", "dative", "neg", "npadvmod", "pcomp", "pobj"})


def label_to_ud(label: str) -> str:
    """The context-free UD relation of one ClearNLP label (unknown, non-UD labels -> ``dep``)."""
    ud = CLEARNLP_TO_UD.get(label)
    if ud is not None:
        return ud
    return label if is_ud_deprel(label) else "dep"


def to_ud(labels: list[str], upos: list[str], heads: list[int]) -> list[str]:
    """UD relations for one sentence.

    Args:
        labels: spaCy's ``dep_`` per token.
        upos: the UPOS per token.
        heads: 0-based index of each token's head; a root points to itself.
    """
    out = [CLEARNLP_TO_UD.get(lab) or label_to_ud(lab) for lab in labels]
    for i, lab in enumerate(labels):
        if lab not in CONTEXT_LABELS:
            continue
        if lab == "pobj" or lab == "pcomp":
            prep = heads[i]
            if lab == "pobj" and labels[prep] == "agent":
                out[i] = "obl:agent"
                continue
            grand = heads[prep]
            if grand != prep and upos[grand] in NOMINAL_UPOS:
                out[i] = "nmod" if lab == "pobj" else "acl"
        elif lab == "npadvmod":
            head = heads[i]
            if head != i and upos[head] in NOMINAL_UPOS:
                out[i] = "nmod:unmarked"
        elif lab == "aux":
            if upos[i] == "PART":
                out[i] = "mark"
        elif lab == "dative":
            if upos[i] == "ADP":
                out[i] = "case"
        elif lab == "neg":
            if upos[i] == "DET":
                out[i] = "det"
    return out
