"""Neural machine translation: a Transformer with pluggable encoders (``cn3 nmt``).

* :mod:`cn3.nmt.config` — the run config (data / model / train sections).
* :mod:`cn3.nmt.data` — parallel files, splits, sentencepiece BPE, token batching.
* :mod:`cn3.layers.transformer` — attention on the shared kernel (:mod:`cn3.attention`), encoder/decoder layers.
* :mod:`cn3.layers.hybrid_attention` — local/global attention (Xu et al., ACL 2019).
* :mod:`cn3.layers.onlstm` — ON-LSTM (Shen et al., 2019) and padding-aware recurrent stacks.
* :mod:`cn3.nmt.encoders` — the registry ``transformer | hybrid | local | onlstm | lstm``
  (ON-LSTM + self-attention: Hao et al., 2019).
* :mod:`cn3.nmt.transformer` — the encoder-decoder model and its loss.
* :mod:`cn3.nmt.search` — greedy and beam search, translation of raw lines.
* :mod:`cn3.nmt.trainer` — training with exact resume, scoring with sacreBLEU.
* :mod:`cn3.nmt.analysis` — hybrid gates per layer and per source-word POS tag.
"""
