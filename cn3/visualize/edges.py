"""The soft graph a CN3 run learns over new text: per layer ``alpha_ik = softmax_k(s_ik)`` and the
mean gates ``g_i``, computed by :func:`edge_view` as ``cn3 predict`` encodes the text; the
renderers only read the :class:`EdgeView`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cn3.config import ConfigError

#: ``model.edge_weights`` values whose rows hold exact zeros: views draw only the non-zero edges.
SPARSE_WEIGHTS = ("sparsemax", "entmax15")


@dataclass
class SideEdges:
    """One sentence as the model saw it.

    ``alphas``: one ``(n, n)`` array per graph layer, row ``i`` = ``alpha_i.`` over words ``k``
    (sums to 1); ``gates``: one ``(n,)`` array per layer, ``g_i`` averaged over hidden units;
    ``heads``: 0-based head per word, -1 = root (``None`` without a parse); ``tags``: predicted
    tag per word (tagging tasks only).
    """

    name: str
    tokens: list[str]
    alphas: list[np.ndarray]
    gates: list[np.ndarray]
    heads: list[int] | None = None
    deprels: list[str] | None = None
    tags: list[str] | None = None
    edge_weights: str = "softmax"

    def __len__(self) -> int:
        return len(self.tokens)

    def best_tree(self, layer: int) -> list[int]:
        """The best tree of ``layer``'s graph (:func:`cn3.analysis.trees.best_tree`: 0-based heads, -1 root)."""
        from cn3.analysis.trees import best_tree

        return [int(h) for h in best_tree(self.alphas[layer])]

    def shown_arcs(self, layer: int, word: int | None = None) -> list[tuple[int, int]]:
        """The arcs ``(i, k)`` (word ``i`` reads ``k``) a view draws for ``layer``: all of ``word``'s
        non-zero ones when one word is in focus; else the best tree's (dependent, head) arcs for
        ``edge_weights: tree``, every non-zero edge for the sparse normalisers (``sparsemax``,
        ``entmax15``), and each word's strongest key for the softmax."""
        alpha = self.alphas[layer]  # (n, n)
        n = len(self)
        if word is not None:
            return [(word, k) for k in range(n) if alpha[word, k] > 0]
        if self.edge_weights == "tree":
            return [(i, h if h >= 0 else i) for i, h in enumerate(self.best_tree(layer))]
        if self.edge_weights in SPARSE_WEIGHTS:
            return [(i, k) for i in range(n) for k in range(n) if alpha[i, k] > 0]
        return [(i, int(alpha[i].argmax())) for i in range(n)]

    def label(self, k: int) -> str:
        """Word ``k`` (0-based), with its 1-based position when the word occurs twice."""
        token = self.tokens[k]
        return f"{token}#{k + 1}" if self.tokens.count(token) > 1 else token


@dataclass
class EdgeView:
    """Everything rendered for one input: the run, the prediction, one or two sentences."""

    task: str
    encoder: str
    level: str
    prediction: str
    tree_source: str | None
    sides: list[SideEdges]

    @property
    def n_layers(self) -> int:
        return len(self.sides[0].alphas)

    @property
    def title(self) -> str:
        shown = "tags per word (beside each word)" if self.level == "node" else self.prediction
        return f"{self.task.upper()} · {self.encoder} · prediction: {shown}"


def check_has_edges(encoder: str) -> None:
    """Only CN3 layers learn edge weights; say so for any other encoder."""
    from cn3.encoders import get_spec

    if not get_spec(encoder).learns_edges:
        raise ConfigError(f"this run's encoder is {encoder!r}, which learns no edge weights: visualize edges "
                          "needs a run trained with model.encoder=cn3")


def input_line(texts: list[str], level: str, task: str) -> str:
    """The one input line for :func:`cn3.sentence.inference.text_examples`: one sentence, or two joined by TAB."""
    if level == "pair":
        if len(texts) == 1 and texts[0].count("\t") == 1:
            return texts[0]
        if len(texts) != 2:
            raise ConfigError(f"{task} is a sentence-pair task: give two sentences (premise, hypothesis), "
                              f"got {len(texts)}")
        return "\t".join(texts)
    if len(texts) != 1:
        raise ConfigError(f"{task} takes one sentence, got {len(texts)} (quote the sentence as one argument)")
    return texts[0]


def edge_view(loaded, texts: list[str], device, vectors=None) -> EdgeView:
    """Run ``texts`` through a loaded run (``cn3.sentence.inference.load_model``) and collect its soft graphs.

    ``texts``: one sentence, or premise and hypothesis for pair tasks. ``vectors``: the run's word
    vectors (``cn3.sentence.inference.run_vectors``), for the words outside its vocabulary.
    """
    from cn3.sentence.inference import examples_dataset, predict, text_examples

    manifest, encoder = loaded.manifest, loaded.config.model.encoder
    check_has_edges(encoder)
    level = manifest["level"]
    examples = text_examples([input_line(texts, level, manifest["task"])], manifest)
    dataset = examples_dataset(examples, loaded.vocabs, manifest, with_labels=False, vectors=vectors).dataset
    preds, infos = predict(loaded.model, dataset, device, keep_info=True)
    info = infos[0][1]  # one batch holding the one item, at row 0
    if not info.get("a"):
        raise ConfigError(f"encoder {encoder!r} returned no edge weights")
    sentences = examples[0].sentences
    tree_source = parse_for_display(sentences, manifest)
    labels = loaded.vocabs["labels"].itos
    names = ("premise", "hypothesis") if level == "pair" else ("sentence",)
    sides = [side_edges(name, sent, info[key]) for name, sent, key in zip(names, sentences, "ab")]
    for side in sides:
        side.edge_weights = getattr(loaded.config.model, "edge_weights", "softmax")
    if level == "node":
        sides[0].tags = [labels[t] for t in preds[0]]
        prediction = " ".join(sides[0].tags)
    else:
        prediction = labels[preds[0]]
    return EdgeView(manifest["task"], encoder, level, prediction, tree_source, sides)


def side_edges(name: str, sentence, info: dict) -> SideEdges:
    """Row 0 of one side's ``{"alphas": L x (1, N, N), "gates": L x (1, N, d)}``, cut to the words."""
    n = len(sentence.tokens)
    alphas = [a[0, :n, :n].float().cpu().numpy() for a in info["alphas"]]  # L x (n, n)
    gates = [g[0, :n].float().mean(-1).cpu().numpy() for g in info["gates"]]  # L x (n,)
    heads = [h - 1 for h in sentence.heads] if sentence.heads is not None else None  # 0-based, -1 root
    deprels = list(sentence.deprels) if sentence.deprels is not None else None
    if heads is not None and deprels is None:
        deprels = ["dep"] * n
    return SideEdges(name, list(sentence.tokens), alphas, gates, heads, deprels)


def parse_for_display(sentences, manifest: dict) -> str | None:
    """Name the source of the dependency trees shown beside the learned graph.

    The run's annotator has already parsed ``sentences`` when its data had trees. Otherwise
    spaCy parses them here, for display only (the model input is already encoded), when installed.
    """
    from data_prep.annotators.spacy_annotator import SpacyAnnotator, spacy_available

    ann = manifest["annotator"]
    if all(s.heads is not None for s in sentences):
        return "spacy" if ann["name"] == "gold" else ann["name"]  # raw text: spaCy stands in for gold
    if not spacy_available():
        return None
    SpacyAnnotator().annotate(sentences)
    return "spacy (display only: the run has no trees)"


def resolve_layers(view: EdgeView, layer: int | None) -> list[int]:
    """0-based indices of the layers to show: all, or ``layer`` (1-based) after a range check."""
    n = view.n_layers
    if layer is None:
        return list(range(n))
    if not 1 <= layer <= n:
        raise ConfigError(f"--layer {layer} is out of range: this model has {n} graph layer{'s' * (n != 1)} "
                          f"(1..{n})")
    return [layer - 1]


def resolve_word(view: EdgeView, word: str) -> dict[int, int]:
    """Where ``word`` is, per side: ``{side index: 0-based word index}``.

    ``word`` is a 1-based position, or a token (exact match first, then ignoring case; the first
    occurrence). A number counts as a token only where it is no valid position but is a word.
    """
    found: dict[int, int] = {}
    for s, side in enumerate(view.sides):
        position = int(word) - 1 if word.strip().isdigit() else -1
        if 0 <= position < len(side):
            found[s] = position
        elif word in side.tokens:
            found[s] = side.tokens.index(word)
        else:
            lower = [t.lower() for t in side.tokens]
            if word.lower() in lower:
                found[s] = lower.index(word.lower())
    if not found:
        words = " | ".join(" ".join(f"{i + 1}:{t}" for i, t in enumerate(side.tokens)) for side in view.sides)
        raise ConfigError(f"--word {word!r} is not in the sentence; give a word or its 1-based position: {words}")
    return found


def top_neighbours(row: np.ndarray, k: int = 3) -> list[tuple[int, float]]:
    """The ``k`` largest weights of one ``alpha`` row ``(n,)``, strongest first, as ``(word, weight)``;
    exact zeros (a sparse row's unread words) are left out, except when the row has no other."""
    order = np.argsort(-row, kind="stable")[:k]
    return [(int(j), float(row[j])) for j in order if row[j] > 0 or j == order[0]]


def edge_norm_max(view: EdgeView, layers: list[int]) -> float:
    """The top of the one colour scale shared by all panels: the largest ``alpha`` shown, but at
    least ``4 / n`` so that uniform attention (``1 / n`` everywhere) looks weak, not saturated."""
    largest = max(float(side.alphas[l].max()) for side in view.sides for l in layers)
    return min(1.0, max(largest, 4.0 / max(len(side) for side in view.sides)))


def hub_line(side: SideEdges, layer: int) -> str:
    """One line on the layer's hub share (:func:`cn3.analysis.graphs.hub`: rows nearly all pointing at
    one word make a star, not a tree) with the mean row entropy (near-uniform rows share an argmax too).
    """
    from cn3.analysis.graphs import hub, row_entropy

    alpha = side.alphas[layer]  # (n, n)
    word, share = hub(alpha)
    entropy = f"; row entropy {np.mean(row_entropy(alpha)):.2f} of its maximum, 1 = uniform" if len(side) > 1 else ""
    line = (f"hub share of this sentence: {share:.0%} of rows point at {side.label(word)!r} "
            f"(a star, not a tree, when near 100%{entropy})")
    if side.edge_weights in SPARSE_WEIGHTS:
        line += f"; {np.mean((alpha > 0).sum(1)):.1f} non-zero edges per word"
    if side.edge_weights == "tree" and side.heads is not None and len(side) > 1:
        tree = side.best_tree(layer)
        same = np.mean([h == g for h, g in zip(tree, side.heads)])
        line += f"; best tree: {same:.0%} of its heads are the parse's"
    return line


def learned_head_text(side: SideEdges, tree: list[int], i: int) -> str:
    """Word ``i``'s head in ``tree`` (:meth:`SideEdges.best_tree`), as :func:`head_text` writes a head."""
    h = tree[i]
    return "root" if h < 0 else f"{h + 1} {side.tokens[h]}"


def head_text(side: SideEdges, i: int) -> str:
    """``"2 is (nsubj)"``, ``"root"``, or ``"-"`` without a parse."""
    if side.heads is None:
        return "-"
    h = side.heads[i]
    return "root" if h < 0 else f"{h + 1} {side.tokens[h]} ({side.deprels[i]})"
