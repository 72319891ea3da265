"""The ``gold`` annotator: the POS tags and trees the task's files carry.

* ``upos`` is kept; when it is ``None`` but ``xpos`` (PTB tags) is there, ``upos`` is mapped from
  ``xpos`` with :mod:`data_prep.annotators.ptb`. Tags in ``upos`` that are not UPOS (a PTB column
  read as UPOS) are mapped the same way.
* ``heads``/``deprels`` are kept as read, full UD labels with subtypes (``nsubj:pass``); trees
  without labels (the PTB sample) keep ``deprels = None``.
* Data without any POS raises :class:`DataError` naming the other annotators, unless the task
  declares trees alone (``TaskSpec.gold == {"deps"}``: the logic formulas, whose operator trees come
  from their brackets and which have no POS): then every sentence must carry heads, and POS stays
  ``None``.
"""

from __future__ import annotations

from cn3.util.errors import DataError
from data_prep.annotators.base import ProgressFn, alternatives
from data_prep.annotators.ptb import PTB_MAP_VERSION, map_ptb, ptb_to_upos
from data_prep.annotators.ud import UPOS
from data_prep.example import Sentence


def no_gold_error() -> DataError:
    return DataError(
        "the data has no gold POS tags or dependency trees, so the 'gold' annotator has nothing to "
        f"use; {alternatives('gold')}"
    )


class GoldAnnotator:
    """Uses the reader's annotations (see the module docstring).

    Args:
        gold: the task's ``TaskSpec.gold`` when known: ``provides`` follows it, and a task with
            neither ``"pos"`` nor ``"deps"`` fails here, before any data is read. ``None``: judged
            from the sentences.
    """

    name = "gold"

    def __init__(self, gold: frozenset[str] | None = None):
        if gold is not None and not gold & {"pos", "deps"}:
            raise no_gold_error()
        self.provides: frozenset[str] = (
            frozenset(gold) & {"pos", "deps"} if gold is not None else frozenset({"pos", "deps"})
        )
        self.version = f"gold (PTB->UPOS map v{PTB_MAP_VERSION})"

    def annotate(self, sentences: list[Sentence], on_progress: ProgressFn | None = None) -> None:
        missing: list[int] = []
        nonempty = 0
        for k, s in enumerate(sentences):
            n = len(s.tokens)
            nonempty += n > 0
            if s.upos is None and s.xpos is not None:
                _check_len(s.xpos, n, "xpos", k)
                s.upos = map_ptb(s.xpos, s.tokens)
            if s.upos is None and "pos" not in self.provides:  # trees alone (the logic formulas)
                if n and s.heads is None:
                    missing.append(k)
                elif s.heads is not None:
                    _check_len(s.heads, n, "heads", k)
                continue
            if s.upos is None:
                if n:
                    missing.append(k)
                continue
            _check_len(s.upos, n, "upos", k)
            if not UPOS.issuperset(s.upos):
                s.upos = [t if t in UPOS else ptb_to_upos(t, w) for t, w in zip(s.upos, s.tokens)]
            if s.heads is not None:
                _check_len(s.heads, n, "heads", k)
            if s.deprels is not None:
                _check_len(s.deprels, n, "deprels", k)
        if missing:
            if len(missing) == nonempty:
                raise no_gold_error()
            first = sentences[missing[0]]
            what = "POS tags" if "pos" in self.provides else "trees"
            raise DataError(
                f"{len(missing)} of {nonempty} sentences carry no gold {what} (the first is sentence "
                f"{missing[0] + 1}: {' '.join(first.tokens[:8])!r}); the 'gold' annotator needs them "
                f"on every sentence; {alternatives('gold')}"
            )
        if on_progress is not None:
            on_progress(len(sentences))


def _check_len(values: list, n: int, what: str, k: int) -> None:
    if len(values) != n:
        raise DataError(f"sentence {k + 1} has {n} tokens but {len(values)} {what} values")
