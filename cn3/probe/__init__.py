"""Probing a trained encoder (SentEval-style classifiers on frozen sentence vectors: :mod:`.probing`),
comparing probes of two runs (:mod:`.compare`); scores grouped by a property of the items are
:mod:`cn3.sentence.grouped`'s (the sentence evaluation scores them too)."""
