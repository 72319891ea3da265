"""Training: one :class:`~cn3.train.trainer.Trainer` for every kind of run.

A run kind (sentence tasks in :mod:`cn3.sentence.task`, translation in :mod:`cn3.nmt.task`) supplies
what differs between kinds (data, model, loss, dev score, what ``results.json`` holds); the trainer
does the rest. :func:`cn3.train.trainer.train_kind` trains a resolved config of a kind into a run directory
(:func:`cn3.kinds.train` finds the kind).
"""
