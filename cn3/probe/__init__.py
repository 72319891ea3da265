"""Probing a trained encoder (SentEval-style classifiers on frozen sentence vectors: :mod:`.probing`),
comparing probes of two runs (:mod:`.compare`) and scores grouped by a property of the items
(:mod:`.grouped`)."""
