"""POS/dependency annotators: fill ``Sentence.upos``, ``.heads`` and ``.deprels`` in place.

============  ===========================================================  ================
name          what                                                         provides
============  ===========================================================  ================
``gold``      the task files' own POS/trees (PTB ``xpos`` mapped to UPOS)  the task's gold
``spacy``     spaCy ``en_core_web_sm`` on pretokenized input, UD labels    pos, deps
``stanza``    Stanford stanza UD pipeline, local models only               pos, deps
``none``      nothing (all ``None``)                                       --
============  ===========================================================  ================

Importing this package imports neither spaCy, stanza nor torch; :func:`make_annotator` only checks
that packages/models exist, and the models load on the first ``annotate`` call, once per process.
"""

from __future__ import annotations

from pathlib import Path

from cn3.util.errors import DataError
from data_prep.annotators.base import ANNOTATOR_NAMES, Annotator, ProgressFn
from data_prep.annotators.gold import GoldAnnotator
from data_prep.annotators.none import NoneAnnotator
from data_prep.annotators.spacy_annotator import SpacyAnnotator, spacy_available
from data_prep.annotators.stanza_annotator import StanzaAnnotator, find_models

DEFAULT_BATCH_SIZE = 256

__all__ = [
    "ANNOTATOR_NAMES",
    "Annotator",
    "DEFAULT_BATCH_SIZE",
    "GoldAnnotator",
    "NoneAnnotator",
    "ProgressFn",
    "SpacyAnnotator",
    "StanzaAnnotator",
    "default_annotator_name",
    "make_annotator",
]


def make_annotator(
    name: str,
    *,
    stanza_dir: str | Path | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    gold: frozenset[str] | None = None,
    workers: int = 1,
) -> Annotator:
    """The annotator called ``name`` (one of :data:`ANNOTATOR_NAMES`).

    Args:
        name: ``gold``, ``spacy``, ``stanza`` or ``none``.
        stanza_dir: stanza's model directory (``--stanza-dir``); ``stanza`` only.
        batch_size: sentences per parser batch (``spacy``/``stanza``).
        gold: the task's ``TaskSpec.gold``; ``gold`` only: sets ``provides`` and fails early when
            the task has no POS. ``None``: judged from the sentences at ``annotate`` time.
        workers: parser processes (``spacy`` only; the output is the same for any number).

    Raises:
        DataError: unknown name, missing package or model (with install instructions), or
            ``gold`` for a task without gold POS. Fast: no model is loaded here.
    """
    key = name.strip().lower()
    if key == "gold":
        return GoldAnnotator(gold)
    if key == "spacy":
        return SpacyAnnotator(batch_size=batch_size, workers=workers)
    if key == "stanza":
        return StanzaAnnotator(stanza_dir=stanza_dir, batch_size=batch_size)
    if key == "none":
        return NoneAnnotator()
    raise DataError(f"unknown annotator {name!r}; expected one of: {', '.join(ANNOTATOR_NAMES)}")


def default_annotator_name(gold: frozenset[str], stanza_dir: str | Path | None = None) -> str:
    """The annotator used when the user names none, the first that applies:

    1. ``gold`` when the task's files carry both POS tags and trees;
    2. ``spacy`` when spaCy and its model are installed;
    3. ``stanza`` when a local model directory exists (``stanza_dir``, ``$STANZA_RESOURCES_DIR``
       or stanza's default);
    4. ``gold`` when the files carry POS only;
    5. ``none``.

    Only existence checks: no import, no model load.
    """
    gold = frozenset(gold)
    if {"pos", "deps"} <= gold:
        return "gold"
    if spacy_available():
        return "spacy"
    if find_models(stanza_dir) is not None:
        return "stanza"
    if "pos" in gold:
        return "gold"
    return "none"
