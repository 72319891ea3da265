"""The ``none`` annotator: no POS, no trees."""

from __future__ import annotations

from data_prep.annotators.base import ProgressFn
from data_prep.example import Sentence


class NoneAnnotator:
    """Leaves every annotation ``None`` (``upos``, ``heads``, ``deprels`` are reset to ``None``)."""

    name = "none"
    version = "none"
    provides: frozenset[str] = frozenset()

    def annotate(self, sentences: list[Sentence], on_progress: ProgressFn | None = None) -> None:
        for s in sentences:
            s.upos = None
            s.heads = None
            s.deprels = None
        if on_progress is not None:
            on_progress(len(sentences))
