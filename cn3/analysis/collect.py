"""Run a trained model over a prepared split and measure its attention graphs, layer by layer.

The encoders that return attention weights (``info["alphas"]``, one matrix per layer) and how their
rows are read:

* ``graph``: row ``i`` is word ``i``'s query over every word (CN3's ``alpha_ik``; the Transformer,
  hybrid and local attention and the recurrent + self-attention stacks, their heads averaged by
  the encoder); a ``local`` layer sees only its window ``|i - k| <= m``.
* ``causal``: row ``i`` reads only the earlier words ``k < i`` (the LSTMN's tape, ``selfatt2``).
* ``annotation``: ``r`` rows that are attention hops, not words (``selfatt1``, Lin et al.).
"""

from __future__ import annotations

import numpy as np
import torch

from cn3.analysis.graphs import GraphStatistics, sentence_statistics, visible_keys
from cn3.config import ConfigError


def attention_kind(encoder: str) -> str:
    """``graph``, ``causal`` or ``annotation`` (module docstring); a ConfigError naming the encoders
    that have attention weights for any other encoder."""
    from cn3.encoders import ENCODERS, get_spec

    kind = get_spec(encoder).attention
    if kind is None:
        having = [name for name, spec in ENCODERS.items() if spec.attention is not None]
        raise ConfigError(f"this run's encoder is {encoder!r}, which returns no attention weights; "
                          f"analyze graphs needs one of: {', '.join(having)}")
    return kind


def local_windows(model) -> list[int | None]:
    """Per self-attention layer, the window ``m`` of a layer whose weights stay inside it (``local``
    mode), else None; empty without self-attention layers. Read from the modules, not the config: only
    the lowest ``hybrid.layers`` layers are windowed, and ``hybrid``/``concat`` mix in global weights.
    """
    from cn3.encoders.san import SelfAttentionEncoder

    stack = next((m for m in model.modules() if isinstance(m, SelfAttentionEncoder)), None)
    if stack is None:
        return []
    return [layer.attn.window if getattr(layer.attn, "mode", None) == "local" else None for layer in stack.layers]


def _keys(kind: str, n: int, window: int | None) -> np.ndarray | None:
    """The words each row can read (``visible_keys``), or None when every row reads every word."""
    if kind == "causal":
        return visible_keys(n, causal=True)
    if window is not None and window < n - 1:
        return visible_keys(n, window=window)
    return None


def _tree(dataset, side: str, i: int) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    """``(heads, deprels)`` of item ``i``'s ``side`` from the columnar store, or ``(None, None)``."""
    t = dataset.t
    if f"{side}.head" not in t:
        return None, None
    lo, hi = int(t[f"{side}.ptr"][i]), int(t[f"{side}.ptr"][i + 1])
    return t[f"{side}.head"][lo:hi].numpy(), t[f"{side}.deprel"][lo:hi].numpy()


def analyze_graphs(model, dataset, encoder: str, device: torch.device, layer: int | None = None,
                   batch_size: int = 128, per_head: bool = False) -> tuple[GraphStatistics, int]:
    """The statistics of every sentence's attention in ``dataset`` (both sides of a pair).

    Args:
        model: a loaded :class:`~cn3.sentence.model.SentenceGraphModel` (run in eval mode).
        dataset: a :class:`~data_prep.store.GraphDataset`; its trees (when prepared with them)
            give the tree statistics.
        encoder: the run's ``model.encoder`` (:func:`attention_kind`).
        layer: only this layer (1-based); default: all.
        per_head: also each energy head of a CN3 model with ``energy_heads > 1``
            (``info["head_alphas"]``); a ConfigError for any other model.

    Returns:
        the aggregate and the model's number of attention layers.
    """
    from cn3.sentence.inference import scored_batches

    kind = attention_kind(encoder)
    windows = local_windows(model)
    stats = GraphStatistics()
    n_layers = 0
    for _, out, rows in scored_batches(model, dataset, device, batch_size):
        for side, info in out.info.items():
            alphas = info.get("alphas")
            if not alphas:
                raise ConfigError(f"encoder {encoder!r} returned no attention weights")
            n_layers = len(alphas)
            if layer is not None and not 1 <= layer <= n_layers:
                raise ConfigError(f"--layer {layer} is out of range: this model has {n_layers} attention "
                                  f"layer{'s' * (n_layers != 1)} (1..{n_layers})")
            chosen = range(n_layers) if layer is None else [layer - 1]
            weights = {l: alphas[l].float().cpu().numpy() for l in chosen}  # (B, rows, N) each
            heads = _head_weights(info, chosen) if per_head else {}  # l -> (B, H, N, N)
            ptr = dataset.t[f"{side}.ptr"]
            for row, i, _ in rows:
                n = int(ptr[i + 1] - ptr[i])
                tree, deprels = _tree(dataset, side, i)
                for l in chosen:
                    A = weights[l][row, : (n if kind != "annotation" else None), :n].astype(np.float64)
                    keys = _keys(kind, n, windows[l] if l < len(windows) else None)
                    stats.add(l, sentence_statistics(A, kind != "annotation", tree, deprels, keys))
                    for h, head_weights in enumerate(heads.get(l, ())):
                        A = head_weights[row, :n, :n].astype(np.float64)
                        stats.add(l, sentence_statistics(A, True, tree, deprels, keys), head=h)
    return stats, n_layers


def _head_weights(info: dict, chosen) -> dict[int, list[np.ndarray]]:
    """Layer -> its energy heads' weights ``[(B, N, N)] * H`` from a CN3 encoder's ``info``."""
    if "head_alphas" not in info:
        raise ConfigError("per-head statistics need a CN3 run with model.energy_heads > 1 (its info[\"head_alphas\"]); "
                          "the other encoders return their heads' mean only")
    return {l: list(info["head_alphas"][l].float().cpu().numpy().transpose(1, 0, 2, 3)) for l in chosen}


def analysis_notes(encoder: str, kind: str, heads: int, windows: list[int | None], pair: bool) -> list[str]:
    """What the numbers mean for this encoder: one sentence per caveat."""
    notes = []
    from cn3.encoders import get_spec

    if get_spec(encoder).multi_head:
        notes.append(f"{encoder}: each layer's weights are averaged over its {heads} attention heads before any "
                     "statistic (a star may hide heads that differ)")
    if kind == "annotation":
        notes.append(f"{encoder}: the rows are annotation hops, not words: only hub share and entropy over the "
                     "hops are meaningful (no distances, rankings or tree agreement)")
    if kind == "causal":
        notes.append(f"{encoder}: word i reads only the words before it, so early words are chosen more often by "
                     "construction: the first word is left out, entropy and chance rates count the earlier words, "
                     "query dependence and static share are not computed")
    local = [str(l + 1) for l, w in enumerate(windows) if w is not None]
    if local:
        which = f"layers {', '.join(local)} attend" if len(local) > 1 else f"layer {local[0]} attends"
        notes.append(f"{which} only within |i - k| <= {next(w for w in windows if w is not None)}: entropy and "
                     "chance rates count the visible words, query dependence and static share are not computed there")
    if kind == "graph":
        notes.append("a word may read itself (k = i): one whose strongest key is itself is a tree miss "
                     "(distance 0 in the histogram)")
    if pair:
        notes.append("sentence pairs: premise and hypothesis are pooled, each one sentence")
    return notes
