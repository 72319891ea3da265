"""Sentence runs (classification, pairs, tagging), beside :mod:`cn3.nmt` for translation: the run
config (:mod:`.config`), its resolution from a task and the shipped configs (:mod:`.resolve`), batches
of sentence graphs (:mod:`.batching`), the model (node encoder -> zoo encoder -> head: :mod:`.model`,
:mod:`.node_encoder`, :mod:`.heads`, :mod:`.crf_marginals`), training (:mod:`.trainer`) and inference
on new text (:mod:`.inference`). Both kinds train through the one loop (:mod:`cn3.loop`) and are told
apart by :mod:`cn3.run_kinds`.
"""
