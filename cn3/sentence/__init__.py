"""Sentence runs (classification, pairs, tagging), beside :mod:`cn3.nmt` for translation.

The run config (:mod:`.config`) and its resolution from a task and the shipped configs
(:mod:`.resolve`); batches of sentence graphs (:mod:`.batching`); the model (node encoder -> zoo
encoder -> head: :mod:`.model`, :mod:`.node_encoder`, :mod:`.heads`, :mod:`.crf_marginals`); the run
kind the trainer trains (:mod:`.task`) on its prepared dataset (:mod:`.prepared`); a trained run
scored on a split or a file (:mod:`.evaluation`) and used on new text (:mod:`.inference`). Both
kinds of run train through one trainer (:mod:`cn3.train.trainer`) and are told apart by
:mod:`cn3.kinds`.
"""
