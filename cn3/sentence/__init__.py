"""Sentence runs (classification, pairs, tagging), beside :mod:`cn3.nmt` for translation: the run
config (:mod:`.config`), its resolution from a task and the shipped configs (:mod:`.resolve`), batches
of sentence graphs (:mod:`.batching`), the model (node encoder -> zoo encoder -> head: :mod:`.model`,
:mod:`.node_encoder`, :mod:`.heads`, :mod:`.crf_marginals`), its run kind for the trainer (:mod:`.task`),
the prepared dataset (:mod:`.prepared`), a run scored on a split or a file (:mod:`.evaluation`) and inference on new text (:mod:`.inference`). Both kinds train
through the one trainer (:mod:`cn3.train.trainer`) and are told apart by :mod:`cn3.runs.kinds`.
"""
