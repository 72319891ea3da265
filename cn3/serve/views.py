"""What a model does with one typed input, as JSON-ready dicts (the ``/api/view`` contract).

A sentence run's view goes through the code of ``cn3 predict`` (:func:`cn3.sentence.inference.text_examples`,
:func:`~cn3.sentence.inference.examples_dataset`, :func:`~cn3.sentence.inference.probabilities`), so the
tokens, annotation and open-vocabulary lookup are the same, and reads the weights the encoder returns
in ``info["alphas"]`` (one matrix per layer) as ``cn3 analyze graphs`` does:

* ``cn3`` graph: CN3's learned edges ``alpha_ik`` per graph layer, per energy head when
  ``model.energy_heads > 1`` (``info["head_alphas"]``), with the update gate per word.
* ``attention`` graph: every encoder with a :attr:`~cn3.encoders.registry.EncoderSpec.attention`
  kind (Transformer, hybrid, local, SelfAtt1/2, LSTMN, ON-LSTM+SAN, ...): per layer, each head of a
  vanilla multi-head attention layer (captured while the encoder runs, :func:`attention_heads`, and
  matched to the layer by their mean, which is what the encoder returns); a layer whose heads are
  not captured (the hybrid and local windowed layers, single-head attention) sends its one mean
  matrix. SelfAtt1's rows are its ``r`` annotation hops, not words (``"rows": "hops"``); a causal
  encoder's first row reads no word (all zeros).
* no graph (LSTM, CNN, bag of words, Tree-LSTM): the prediction only, ``layers`` empty.

A translation run's view holds the source pieces, the encoder's self-attention per layer, the
translation (greedy), the decoder's cross-attention per decoder layer (head-averaged, target x
source, captured while the translation is fed back to the decoder) and the hybrid encoder's local
gate per source piece. Its source is split into the run's sentencepiece pieces whatever
``pretokenized`` says (the model reads nothing else).

Numbers are rounded to :data:`DIGITS` decimals; ``NaN`` (the row entropy of a one-word sentence)
becomes ``None``.
"""

from __future__ import annotations

import math
import threading
from contextlib import contextmanager

import numpy as np
import torch

from cn3.util.errors import ArgumentError

#: decimals kept of every weight and probability sent
DIGITS = 5
#: the manifest's level -> the level the page shows
LEVELS = {"graph": "sentence", "pair": "pair", "node": "tagging"}
SIDE_NAMES = {"sentence": ("sentence",), "tagging": ("sentence",), "pair": ("premise", "hypothesis")}


class TooLong(ArgumentError):
    """The input has more words than the server takes (HTTP 413)."""


def graph_kind(encoder: str) -> str | None:
    """``"cn3"`` for encoders that learn edges, ``"attention"`` for those returning attention
    weights, else ``None`` (module docstring)."""
    from cn3.encoders import get_spec

    spec = get_spec(encoder)
    if spec.learns_edges:
        return "cn3"
    return "attention" if spec.attention is not None else None


def rounded(values) -> list:
    """A nested list of floats rounded to :data:`DIGITS`, ``NaN`` as ``None``."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 0:
        value = float(array)
        return None if math.isnan(value) else round(value, DIGITS)
    out = np.round(array, DIGITS).tolist()
    return _nan_to_none(out) if np.isnan(array).any() else out


def _nan_to_none(values):
    if isinstance(values, list):
        return [_nan_to_none(v) for v in values]
    return None if isinstance(values, float) and math.isnan(values) else values


def input_sides(text, level: str) -> list[str]:
    """The request's ``text`` as the sentences of one input: one string, or two for a pair task
    (a list of two, or one string with a TAB between them).

    Raises:
        ArgumentError: the wrong number or type of sentences, or an empty one.
    """
    if isinstance(text, str):
        sides = text.split("\t") if level == "pair" and "\t" in text else [text]
    elif isinstance(text, list) and all(isinstance(t, str) for t in text):
        sides = list(text)
    else:
        raise ArgumentError('"text" must be a string, or a list of two strings for a sentence pair')
    wanted = 2 if level == "pair" else 1
    if len(sides) != wanted:
        what = "two sentences (premise, hypothesis)" if wanted == 2 else "one sentence"
        raise ArgumentError(f"this run takes {what}, got {len(sides)}")
    if any("\t" in s or "\n" in s for s in sides) and wanted == 1:
        raise ArgumentError("a sentence may not hold a TAB or a line break")
    if any(not s.strip() for s in sides):
        raise ArgumentError("empty sentence: type some words")
    return sides


def check_length(tokens: list[str], max_words: int) -> None:
    """Raises :class:`TooLong` when a sentence has more than ``max_words`` tokens."""
    if len(tokens) > max_words:
        raise TooLong(f"the text has {len(tokens)} words; this server takes at most {max_words} words per "
                      "sentence (cn3 serve --max-words)")


_spacy_lock = threading.Lock()
_spacy: list = []


def display_parse(sentences, manifest: dict) -> str | None:
    """Give ``sentences`` a dependency parse for display when they have none (the run read no trees):
    spaCy's, loaded once per process, when it and its English model are installed. Returns the parse's
    source, or ``None`` without one (:func:`cn3.visualize.edges.parse_for_display` does the same per call)."""
    from data_prep.annotators.spacy_annotator import SpacyAnnotator, spacy_available

    if all(s.heads is not None for s in sentences):
        name = manifest["annotator"]["name"]
        return "spacy" if name == "gold" else name
    with _spacy_lock:
        if not _spacy:
            _spacy.append(SpacyAnnotator() if spacy_available() else None)
        if _spacy[0] is None:
            return None
        _spacy[0].annotate(sentences)
    return "spacy (display only: the run has no trees)"


def tree_marks(alpha: np.ndarray, heads: list[int] | None) -> list[list]:
    """``[i, k, "head" | "dependent"]`` for each word ``i`` whose strongest key ``k = argmax_k alpha_ik``
    (``k != i``) is its head (``heads[i] == k``) or a dependent (``heads[k] == i``); ``alpha (n, n)``,
    ``heads`` 0-based with -1 the root. Empty without a parse."""
    if heads is None:
        return []
    marks = []
    for i, k in enumerate(alpha.argmax(1).tolist()):
        if k != i and heads[i] == k:
            marks.append([i, k, "head"])
        elif k != i and heads[k] == i:
            marks.append([i, k, "dependent"])
    return marks


def graph_stats(matrix: np.ndarray, keys: np.ndarray | None, parse: list[int] | None, word_rows: bool) -> dict:
    """Hub share and mean row entropy (:mod:`cn3.analysis.graphs`) and tree marks (:func:`tree_marks`)
    of one ``(rows, n)`` matrix; ``keys (rows, n)`` the visible keys (None = all)."""
    from cn3.analysis.graphs import hub, row_entropy

    live = np.ones(matrix.shape[0], dtype=bool) if keys is None else keys.any(1)
    entropy = row_entropy(matrix, keys)[live] if matrix.shape[1] > 1 and live.any() else np.array([np.nan])
    with np.errstate(invalid="ignore"):
        mean_entropy = float(np.nanmean(entropy)) if not np.isnan(entropy).all() else float("nan")
    return {"hub_share": rounded(hub(matrix, keys)[1]) if live.any() else None,
            "row_entropy": rounded(mean_entropy),
            "tree_marks": tree_marks(matrix, parse) if word_rows else []}


def layer_json(l: int, heads: np.ndarray, gate: np.ndarray | None, keys: np.ndarray | None,
               parse: list[int] | None, word_rows: bool, tree: bool = False) -> dict:
    """One layer of one side: ``heads (H, rows, n)`` weights, ``gate (n,)`` or ``None``, the visible
    ``keys (rows, n)`` (None = all), ``parse`` 0-based heads.

    ``hub_share``, ``row_entropy`` and ``tree_marks`` (:func:`graph_stats`) are those of the mean of the
    heads ("all heads"); ``per_head`` holds the same three of each head's own matrix, in head order.
    ``tree`` (a run with ``model.edge_weights: tree``): ``best_tree`` holds the best tree of the mean's
    marginals (:func:`cn3.analysis.trees.best_tree`, 0-based heads, -1 the root), drawn like the parse;
    left out past :data:`cn3.analysis.graphs.TREE_MAX_WORDS` words."""
    mean = heads.mean(0)  # (rows, n)
    per_head = [graph_stats(head, keys, parse, word_rows) for head in heads]
    out = {"layer": l, "heads": rounded(heads), "gate": None if gate is None else rounded(gate),
           **graph_stats(mean, keys, parse, word_rows), "per_head": per_head}
    if tree and word_rows and keys is None:
        from cn3.analysis.graphs import TREE_MAX_WORDS
        from cn3.analysis.trees import best_tree

        if mean.shape[0] == mean.shape[1] <= TREE_MAX_WORDS:
            out["best_tree"] = [int(h) for h in best_tree(mean)]
    return out


def _heads_of(alpha, captured: list):
    """The captured per-head weights ``(1, H, N, N)`` whose mean over heads is ``alpha (1, N, N)``, or None."""
    for weights in captured:
        if weights.shape[0] == alpha.shape[0] and weights.shape[2:] == alpha.shape[1:] and \
                torch.allclose(weights.float().mean(1), alpha.float(), atol=1e-5):
            return weights
    return None


def side_json(name: str, sentence, info: dict | None, kind: str, windows: list, cn3_gates: bool,
              captured: list = (), tree: bool = False) -> dict:
    """One sentence of the input with its layers (row 0 of the encoder's ``info``, cut to its words);
    ``captured``: per-head weights recorded by :func:`attention_heads`; ``tree``: see :func:`layer_json`."""
    from cn3.analysis.graphs import visible_keys

    n = len(sentence.tokens)
    parse = [h - 1 for h in sentence.heads] if sentence.heads is not None else None
    side = {"name": name, "tokens": list(sentence.tokens), "rows": "hops" if kind == "annotation" else "words",
            "parse": None if parse is None else {
                "heads": parse, "relations": list(sentence.deprels) if sentence.deprels else ["dep"] * n},
            "pos": list(sentence.upos) if getattr(sentence, "upos", None) else None,
            "layers": []}
    if not info or not info.get("alphas"):
        return side
    gates = info.get("gates") or []
    for l, alpha in enumerate(info["alphas"]):
        rows = n if kind != "annotation" else alpha.shape[1]
        per_head = info["head_alphas"][l] if "head_alphas" in info else _heads_of(alpha, captured)
        if per_head is not None:
            heads = per_head[0, :, :n, :n].float().cpu().numpy()  # (H, n, n)
        else:
            heads = alpha[0, :rows, :n].float().cpu().numpy()[None]  # (1, rows, n)
        gate = gates[l] if l < len(gates) else None
        if gate is not None:  # CN3: (1, N, d) -> mean over units; hybrid: (1, H, N) -> mean over heads
            gate = gate[0, :n].float().mean(-1) if cn3_gates else gate[0].float().mean(0)[:n]
            gate = gate.cpu().numpy()
        window = windows[l] if l < len(windows) else None
        keys = visible_keys(n, causal=True) if kind == "causal" else (
            visible_keys(n, window=window) if window is not None and window < n - 1 else None)
        side["layers"].append(layer_json(l, heads, gate, keys, parse, kind != "annotation", tree))
    return side


def sentence_view(served, text, pretokenized: bool, max_words: int) -> dict:
    """The ``/api/view`` answer for a sentence run (module docstring).

    Args:
        served: a :class:`cn3.serve.runs.ServedRun` of kind ``sentence`` (its model loaded).
        text: one sentence, or two for a pair task (:func:`input_sides`).
        pretokenized: split on whitespace only, tokens kept as given.
        max_words: the most tokens a sentence may have.

    Raises:
        ArgumentError: a malformed input; :class:`TooLong` past ``max_words``.
    """
    from cn3.analysis.collect import attention_kind, local_windows
    from cn3.sentence.inference import examples_dataset, probabilities, scored_batches, text_examples

    loaded, manifest = served.model, served.model.manifest
    level = LEVELS[manifest["level"]]
    sides = input_sides(text, level)
    for side in sides:
        check_length(side.split(), max_words)  # before tokenising: a tokenizer only splits words further
    examples = text_examples(["\t".join(sides)], manifest, "<request>", pretokenized)
    for sentence in examples[0].sentences:
        check_length(sentence.tokens, max_words)
    new = examples_dataset(examples, loaded.vocabs, manifest, with_labels=False, vectors=served.vectors)
    with attention_heads(loaded.model) as captured:
        batch, out, _ = next(iter(scored_batches(loaded.model, new.dataset, served.device)))
    with torch.no_grad():
        probs = probabilities(loaded.model, batch, out)[0].float().cpu().numpy()
    labels = loaded.vocabs["labels"].itos
    sentences = examples[0].sentences
    display_parse(sentences, manifest)
    kind = served.graph and attention_kind(loaded.config.model.encoder)
    windows = local_windows(loaded.model) if served.graph else []
    infos = [out.info.get(key) if served.graph else None for key in "ab"]
    tree = getattr(loaded.config.model, "edge_weights", "softmax") == "tree"
    view_sides = [side_json(name, s, info, kind, windows, served.graph == "cn3", captured, tree)
                  for name, s, info in zip(SIDE_NAMES[level], sentences, infos)]
    if level == "tagging":
        n = len(sentences[0].tokens)
        prediction = {"tags": [labels[t] for t in out.pred[0, :n].tolist()],
                      "marginals": [dict(zip(labels, rounded(row))) for row in probs[:n]]}
    else:
        prediction = {"label": labels[int(out.pred[0])], "probs": dict(zip(labels, rounded(probs)))}
    return {"level": level, "prediction": prediction, "sides": view_sides, "translation": None,
            "annotation": new.annotation, "truncated": bool(new.truncated)}


@contextmanager
def attention_heads(module):
    """Record the per-head weights ``(B, H, Nq, Nk)`` of every vanilla
    :class:`~cn3.layers.transformer.MultiHeadAttention` in ``module`` while in the block (the
    encoders return only their mean): yields the list they are appended to, one per call.

    Wraps ``attend_heads`` on these instances only, computing what it computes (the energy
    ``q k^T``, then :func:`cn3.layers.attention.attention`) with the weights kept; subclasses (the
    hybrid and local layers) are left alone."""
    from cn3.layers.attention import attention
    from cn3.layers.transformer import MultiHeadAttention

    captured: list = []
    wrapped = [m for m in module.modules() if type(m) is MultiHeadAttention]
    for m in wrapped:
        def recording(q, k, v, key_mask=None, band=None, need_weights=False, _m=m):
            out, weights = attention(q @ k.transpose(-1, -2), v, key_mask, band, dropout_p=_m.dropout,
                                     training=_m.training)
            captured.append(weights.detach())
            out = _m.out_proj(_m.merge(out))
            return (out, weights.mean(1)) if need_weights else out

        m.attend_heads = recording
    try:
        yield captured
    finally:
        for m in wrapped:
            del m.attend_heads  # the class's method again


@contextmanager
def cross_attention(model):
    """Record each decoder layer's cross-attention weights while in the block: yields a list that
    receives ``(B, T, S)`` head-averaged weights, one per decoder layer per call. Wraps the layers'
    ``cross_attn.attend_heads`` on these instances only (the decoder computes but does not return them)."""
    captured: list = []
    originals = []
    for layer in model.decoder:
        attn = layer.cross_attn
        original = attn.attend_heads

        def recording(q, k, v, key_mask=None, band=None, need_weights=False, _original=original):
            out, weights = _original(q, k, v, key_mask, band, need_weights=True)
            captured.append(weights)
            return (out, weights) if need_weights else out

        originals.append((attn, original))
        attn.attend_heads = recording
    try:
        yield captured
    finally:
        for attn, _ in originals:
            del attn.attend_heads  # the class's method again


def translation_view(served, text, max_words: int) -> dict:
    """The ``/api/view`` answer for a translation run (module docstring): greedy translation, the
    source side's encoder self-attention and the decoder's source attention (``T x S``, rows sum to 1)."""
    from cn3.analysis.collect import local_windows
    from cn3.nmt.data import BOS, EOS
    from cn3.nmt.search import greedy_search
    from data_prep.example import Sentence

    (source,) = input_sides(text, "sentence")
    check_length(source.split(), max_words)
    run, device = served.model, served.device
    tok, model = run.tokenizer, run.model
    ids = tok.src.encode(source)[: 4 * max_words] + [EOS]
    pieces = [tok.src.id_to_piece(i) for i in ids[:-1]] + ["</s>"]
    src = torch.tensor([ids], device=device)
    with torch.no_grad():
        hyp = [i for i in greedy_search(model, src)[0] if i != EOS]
        with attention_heads(model.encoder) as captured:
            memory, mask, info = model.encode(src)
        with cross_attention(model) as weights:
            model.decode(torch.tensor([[BOS] + hyp], device=device), memory, mask)
    targets = [tok.tgt.id_to_piece(i) for i in hyp] + ["</s>"]
    gates = [g for g in (info.get("gates") or []) if g is not None]
    local_gate = rounded(torch.stack([g[0].float().mean(0) for g in gates]).mean(0).cpu()) if gates else None

    side = side_json("source", Sentence(pieces), info, "graph", local_windows(model), False, captured)
    translation = tok.decode_tgt([hyp])[0]
    return {"level": None, "prediction": {"translation": translation}, "sides": [side],
            "translation": {"source_tokens": pieces, "target_tokens": targets,
                            "source_attention": [rounded(w[0].cpu()) for w in weights],
                            "local_gate": local_gate}}
