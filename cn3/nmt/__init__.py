"""Neural machine translation: a Transformer decoder over any source encoder of the zoo (``cn3 nmt``).

* :mod:`cn3.nmt.config` — the run config (data / model / train sections).
* :mod:`cn3.nmt.data` — parallel files, splits, sentencepiece BPE, padded batches.
* :mod:`cn3.nmt.transformer` — the encoder-decoder model and its loss; the source encoder comes from
  :mod:`cn3.encoders` (``transformer``, ``hybrid``/``local`` of Xu et al., ``onlstm_san``/``lstm_san``
  of Hao et al., ``cn3``, and the other baselines), the layers from :mod:`cn3.layers`.
* :mod:`cn3.nmt.search` — greedy and beam search, translation of raw lines.
* :mod:`cn3.nmt.task` — translation as a run kind of the trainer (:mod:`cn3.train.trainer`).
* :mod:`cn3.nmt.inference` — a trained run loaded back, translation scored with sacreBLEU.
* :mod:`cn3.nmt.analysis` — hybrid gates per layer and per source-word POS tag.
"""
