"""Look inside a trained CN3 run: the soft graph it learns over a sentence (paper Figure 1, Table 5).

For every graph layer CN3 scores each pair of words and normalises over the second one,
``alpha_ik = softmax_k(s_ik)`` (row ``i`` sums to 1), and gates each word's update with
``g_i`` (one value per hidden unit). This module computes both for new text, exactly as
``cn3 predict`` encodes it, and renders them:

* :func:`edge_view` -> :class:`EdgeView`: tokens, per-layer ``alpha`` and mean gates, the
  parser's dependency tree and the model's prediction (one or two sentences);
* :func:`render_terminal`: per word its top-3 neighbours, gate and head, plus a shaded heatmap;
* :func:`render_figure` (PNG/SVG via matplotlib, Agg) and :func:`render_html` (one self-contained
  file: inline SVG arcs and colour-shaded tables); :func:`write_output` picks by file extension.

Nothing here parses arguments or exits: bad requests raise :class:`~cn3.config.ConfigError`.
"""

from __future__ import annotations

import html
import io
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cn3.config import ConfigError

#: ``--out`` extensions and what writes them.
OUTPUT_FORMATS = (".png", ".svg", ".html")
#: longest sentence that still gets a heatmap in the terminal.
TERMINAL_HEATMAP_MAX = 25
#: longest sentence drawn into a file (a figure grows with n, its heatmap with n^2).
FIGURE_MAX_WORDS = 80
#: matplotlib colour maps: edge weights and gates.
EDGE_CMAP, GATE_CMAP = "YlGnBu", "Greens"
#: terminal shades, weakest to strongest (readable without colour too).
SHADES = ("·", "░", "▒", "▓", "█")
#: SVG without date/creator metadata (reproducible output).
_NO_SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
#: encoders whose layers learn edge weights.
EDGE_ENCODERS = ("cn3",)


# ----------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------


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

    def __len__(self) -> int:
        return len(self.tokens)

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


# ----------------------------------------------------------------------------------------------
# compute
# ----------------------------------------------------------------------------------------------


def check_has_edges(encoder: str) -> None:
    """Only CN3 layers learn edge weights; say so for any other encoder."""
    if encoder not in EDGE_ENCODERS:
        raise ConfigError(f"this run's encoder is {encoder!r}, which learns no edge weights: visualize edges "
                          "needs a run trained with model.encoder=cn3")


def input_line(texts: list[str], level: str, task: str) -> str:
    """The one input line for :func:`cn3.inference.text_examples`: one sentence, or two joined by TAB."""
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


def edge_view(loaded, texts: list[str], device) -> EdgeView:
    """Run ``texts`` through a loaded run (``cn3.trainer.load_model``) and collect its soft graphs.

    ``texts``: one sentence, or premise and hypothesis for pair tasks.
    """
    from cn3.inference import examples_dataset, text_examples
    from cn3.trainer import predict

    manifest, encoder = loaded.manifest, loaded.config.model.encoder
    check_has_edges(encoder)
    level = manifest["level"]
    examples = text_examples([input_line(texts, level, manifest["task"])], level)
    dataset = examples_dataset(examples, loaded.vocabs, manifest, with_labels=False)
    preds, infos = predict(loaded.model, dataset, device, keep_info=True)
    info = infos[0][1]  # one batch holding the one item, at row 0
    if not info.get("a"):
        raise ConfigError(f"encoder {encoder!r} returned no edge weights")
    sentences = examples[0].sentences
    tree_source = parse_for_display(sentences, manifest)
    labels = loaded.vocabs["labels"].itos
    names = ("premise", "hypothesis") if level == "pair" else ("sentence",)
    sides = [side_edges(name, sent, info[key]) for name, sent, key in zip(names, sentences, "ab")]
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
    """The ``k`` largest weights of one ``alpha`` row ``(n,)``, strongest first, as ``(word, weight)``."""
    order = np.argsort(-row, kind="stable")[:k]
    return [(int(j), float(row[j])) for j in order]


def edge_norm_max(view: EdgeView, layers: list[int]) -> float:
    """The top of the one colour scale shared by all panels: the largest ``alpha`` shown, but at
    least ``4 / n`` so that uniform attention (``1 / n`` everywhere) looks weak, not saturated."""
    largest = max(float(side.alphas[l].max()) for side in view.sides for l in layers)
    return min(1.0, max(largest, 4.0 / max(len(side) for side in view.sides)))


# ----------------------------------------------------------------------------------------------
# terminal
# ----------------------------------------------------------------------------------------------


def render_terminal(console, view: EdgeView, layers: list[int], focus: dict[int, int] | None = None) -> None:
    """Print the view on a rich ``console``: per layer and sentence a word table and a heatmap."""
    from rich.text import Text

    console.print(Text(view.title, style="bold"))
    trees = view.tree_source or "none (the run has no trees and spaCy is not installed)"
    console.print(Text(f"dependency trees: {trees}"))
    vmax = edge_norm_max(view, layers)
    for s, side in enumerate(view.sides):
        for l in layers:
            console.print()
            head = f"{side.name} ({len(side)} word{'s' * (len(side) != 1)}) · layer {l + 1} of {view.n_layers}"
            console.print(Text(head, style="bold cyan"))
            console.print(word_table(side, l))
            if focus and s in focus:
                console.print(outgoing_weights(side, l, focus[s]))
            if len(side) <= TERMINAL_HEATMAP_MAX:
                console.print(terminal_heatmap(side, l, vmax))
            else:
                console.print(f"(no heatmap: {len(side)} words > {TERMINAL_HEATMAP_MAX}; use --out FILE.png)")


def word_table(side: SideEdges, layer: int):
    """A rich Table: position, word, [tag,] gate, top-3 neighbours, dependency head (relation)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("#", justify="right", style="dim")
    table.add_column("word", style="bold")
    if side.tags is not None:
        table.add_column("tag")
    table.add_column("gate", justify="right")
    table.add_column("strongest neighbours k (alpha_ik)")
    table.add_column("head (relation)")
    alpha, gate = side.alphas[layer], side.gates[layer]  # (n, n), (n,)
    for i, token in enumerate(side.tokens):
        neighbours = "  ".join(f"{'(self)' if k == i else side.label(k)} {w:.2f}"
                               for k, w in top_neighbours(alpha[i]))
        row = [str(i + 1), token] + ([side.tags[i]] if side.tags is not None else [])
        row += [f"{gate[i]:.2f}", neighbours, head_text(side, i)]
        table.add_row(*(Text(cell) for cell in row))  # Text: words are never read as rich markup
    return table


def head_text(side: SideEdges, i: int) -> str:
    """``"2 is (nsubj)"``, ``"root"``, or ``"-"`` without a parse."""
    if side.heads is None:
        return "-"
    h = side.heads[i]
    return "root" if h < 0 else f"{h + 1} {side.tokens[h]} ({side.deprels[i]})"


def outgoing_weights(side: SideEdges, layer: int, i: int):
    """All of word ``i``'s weights ``alpha_i.`` in sentence order, with bars and their sum."""
    from rich.text import Text

    row = side.alphas[layer][i]  # (n,)
    width = max(len(t) for t in side.tokens)
    text = Text(f"alpha of word {i + 1} {side.tokens[i]!r} over every word k (layer {layer + 1}):\n",
                style="bold")
    for k, token in enumerate(side.tokens):
        bar = "█" * int(round(float(row[k]) * 40))
        text.append(f"{k + 1:>4} {token:<{width}} {row[k]:.3f} ")
        text.append(bar + "\n", style="magenta")
    text.append(f"     {'sum':<{width}} {row.sum():.3f}")
    return text


def terminal_heatmap(side: SideEdges, layer: int, vmax: float):
    """``alpha`` as shaded cells (rows = words i, columns = words k by position) with a legend."""
    from rich.text import Text

    alpha = side.alphas[layer]  # (n, n)
    n, width = len(side), max(len(t) for t in side.tokens)
    pad = " " * (width + 5)
    text = Text(style="dim")
    if n >= 10:  # column numbers in two lines (tens, units): every cell is two characters wide
        text.append(pad + "".join(f" {(k + 1) // 10 or ' '}" for k in range(n)) + "\n")
    text.append(pad + "".join(f" {(k + 1) % 10}" for k in range(n)) + "   <- k\n")
    for i, token in enumerate(side.tokens):
        text.append(f"{i + 1:>2} {token:<{width}}  ")
        for k in range(n):
            level = min(int(alpha[i, k] / vmax * len(SHADES)), len(SHADES) - 1) if vmax > 0 else 0
            text.append(SHADES[level] * 2, style=_shade_style(alpha[i, k] / vmax if vmax > 0 else 0.0))
        text.append("\n")
    steps = ", ".join(f"{g} < {(j + 1) / len(SHADES) * vmax:.2f}" for j, g in enumerate(SHADES[:-1]))
    text.append(f"rows i, columns k; {steps}, {SHADES[-1]} up to {vmax:.2f}", style="dim")
    return text


def _shade_style(value: float) -> str:
    """A foreground colour from pale to deep blue for ``value`` in [0, 1]."""
    value = min(max(value, 0.0), 1.0)
    r, g, b = (int(255 - (255 - c) * (0.25 + 0.75 * value)) for c in (8, 64, 160))
    return f"rgb({r},{g},{b})"


# ----------------------------------------------------------------------------------------------
# matplotlib figure
# ----------------------------------------------------------------------------------------------


def _matplotlib():
    """matplotlib on the Agg backend (unless pyplot already runs with another one)."""
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    return matplotlib


def _word_width(side: SideEdges) -> float:
    """Inches per word in arc panels, so that horizontal labels do not collide."""
    longest = max(len(t) for t in side.tokens)
    return min(max(0.4, 0.07 * longest + 0.12), 1.0)


def render_figure(view: EdgeView, layers: list[int], focus: dict[int, int] | None = None):
    """The full figure, per sentence: an arc diagram per layer (learned arcs above the words, the
    parser's tree below), the layers' ``alpha`` heatmaps side by side, a strip of gates per layer."""
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    _matplotlib()
    norm = Normalize(0.0, edge_norm_max(view, layers))
    width = max(8.0, *(_side_width(side, layers) for side in view.sides))
    heights = [sum(_panel_heights(side, layers)) for side in view.sides]
    fig = Figure(figsize=(width, sum(heights) + 0.6), layout="constrained")
    fig.suptitle(view.title, fontsize=13, fontweight="bold")
    subfigs = fig.subfigures(len(view.sides), 1, height_ratios=heights, squeeze=False)[:, 0]
    for s, (side, sub) in enumerate(zip(view.sides, subfigs)):
        word = focus.get(s) if focus else None
        _draw_side(sub, view, side, layers, norm, word)
    return fig


def _side_width(side: SideEdges, layers: list[int]) -> float:
    """Inches: the wider of one arc panel and the row of square-ish heatmaps."""
    return max(len(side) * _word_width(side) + 1.0, len(layers) * (0.3 * len(side) + 2.8))


def _panel_heights(side: SideEdges, layers: list[int]) -> list[float]:
    """Inches per row of one sentence: L arc panels, the heatmaps (grow with n), the gate strip."""
    return [_arc_height(side)] * len(layers) + [0.3 * len(side) + 1.8, 0.35 * len(layers) + 1.1]


def _draw_side(sub, view: EdgeView, side: SideEdges, layers: list[int], norm, word: int | None) -> None:
    """One sentence's panels inside the subfigure ``sub``."""
    sub.suptitle(f"{side.name}: {' '.join(side.tokens)}", fontsize=11)
    grid = sub.add_gridspec(len(layers) + 2, len(layers), height_ratios=_panel_heights(side, layers))
    for r, l in enumerate(layers):
        draw_arcs(sub.add_subplot(grid[r, :]), side, l, norm, word, view.tree_source)
    for c, l in enumerate(layers):
        heat = sub.add_subplot(grid[len(layers), c])
        image = draw_heatmap(heat, side, l, norm, word)
        sub.colorbar(image, ax=heat, shrink=0.8, label="alpha_ik")
    gates = sub.add_subplot(grid[len(layers) + 1, :])
    image = draw_gates(gates, side, layers)
    sub.colorbar(image, ax=gates, shrink=0.9, label="mean g_i")


def _tree_base(side: SideEdges) -> float:
    """How far below the words the dependency arcs start (leaving room for predicted tags)."""
    return 0.3 if side.tags is None else 0.6


def _arc_ylim(side: SideEdges) -> tuple[float, float]:
    """``(bottom, top)`` of an arc panel: room for the longest possible learned arc above and the
    tree's longest arc below, the same for every layer."""
    top = 0.28 + _arc_rise(len(side) - 1) + 0.15
    bottom = -_tree_base(side) - max(_arc_rise(_longest_arc(side)), 0.75) - 0.25
    return bottom, top


def _arc_height(side: SideEdges) -> float:
    """Inches for one arc panel (about 0.55 inch per unit of arc height, plus the title)."""
    bottom, top = _arc_ylim(side)
    return min(0.55 * (top - bottom) + 0.5, 9.0)


def _arc_rise(distance: int) -> float:
    """Height (in word spacings) of an arc spanning ``distance`` words: longer arcs rise higher."""
    return 0.3 + 0.25 * distance


def _arc(ax, x0: float, x1: float, y: float, up: bool, **style) -> None:
    """An arrow from word ``x0`` to word ``x1``, a parabola above (``up``) or below the words at ``y``.

    The curve is built in data coordinates (a quadratic Bezier whose peak is ``_arc_rise`` away
    from ``y``), so its height does not depend on the panel's aspect ratio.
    """
    from matplotlib.patches import FancyArrowPatch
    from matplotlib.path import Path as MplPath

    rise = _arc_rise(abs(x1 - x0)) * (1 if up else -1)
    control = ((x0 + x1) / 2, y + 2 * rise)  # the Bezier peaks half way to its control point
    path = MplPath([(x0, y), control, (x1, y)], [MplPath.MOVETO, MplPath.CURVE3, MplPath.CURVE3])
    ax.add_patch(FancyArrowPatch(path=path, arrowstyle="-|>", mutation_scale=7, **style))


def draw_arcs(ax, side: SideEdges, layer: int, norm, word: int | None, tree_source: str | None) -> None:
    """Learned arcs ``i -> k`` above the words (each word's strongest ``k``, or all of ``word``'s),
    coloured and sized by ``alpha_ik``; the dependency tree (head -> dependent) below them."""
    from matplotlib import colormaps

    cmap = colormaps[EDGE_CMAP]
    n, alpha = len(side), side.alphas[layer]  # alpha (n, n)
    base = _tree_base(side)
    for i, token in enumerate(side.tokens):
        bold = word == i
        ax.text(i, 0, token, ha="center", va="center", fontsize=9, fontweight="bold" if bold else "normal",
                color="crimson" if bold else "black")
        if side.tags is not None:
            ax.text(i, -0.3, side.tags[i], ha="center", va="center", fontsize=7, color="dimgray", style="italic")
    pairs = [(word, k) for k in range(n)] if word is not None else [(i, int(alpha[i].argmax())) for i in range(n)]
    for i, k in sorted(pairs, key=lambda p: alpha[p]):  # strongest drawn last, on top
        colour = cmap(0.3 + 0.7 * norm(alpha[i, k]))
        width = 0.6 + 3.0 * norm(alpha[i, k])
        if i == k:  # a word attending most to itself: a ring above it
            ax.plot([i], [0.38], marker="o", markersize=4 + 6 * norm(alpha[i, k]), markerfacecolor="none",
                    markeredgecolor=colour, markeredgewidth=width * 0.6)
        else:
            _arc(ax, i, k, 0.28, up=True, color=colour, linewidth=width)
    _draw_tree(ax, side, -base)
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(*_arc_ylim(side))
    ax.axis("off")
    what = f"all alpha_ik of word {word + 1} '{side.tokens[word]}'" if word is not None else \
        "each word i -> its strongest k"
    tree = f"; below: dependency tree by {tree_source}" if tree_source else "; no dependency tree"
    ax.set_title(f"layer {layer + 1}: {what}{tree}", fontsize=9)


def _longest_arc(side: SideEdges) -> int:
    if side.heads is None:
        return 0
    return max([abs(h - i) for i, h in enumerate(side.heads) if h >= 0], default=0)


def _draw_tree(ax, side: SideEdges, y: float) -> None:
    """Dependency arcs head -> dependent under the words, labelled at their lowest point."""
    if side.heads is None:
        return
    for i, h in enumerate(side.heads):
        if h < 0:
            ax.annotate("", xy=(i, y), xytext=(i, y - 0.55),
                        arrowprops={"arrowstyle": "-|>", "color": "dimgray", "lw": 0.8})
            ax.text(i, y - 0.62, "root", ha="center", va="top", fontsize=6.5, color="dimgray")
            continue
        _arc(ax, h, i, y, up=False, color="gray", linewidth=0.8)
        ax.text((h + i) / 2, y - _arc_rise(abs(h - i)), side.deprels[i], ha="center", va="center", fontsize=6.5,
                color="dimgray", bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.85})


def draw_heatmap(ax, side: SideEdges, layer: int, norm, word: int | None):
    """``alpha`` of one layer: rows = words i, columns = words k; values printed for short sentences."""
    from matplotlib.patches import Rectangle

    alpha, n = side.alphas[layer], len(side)  # (n, n)
    image = ax.imshow(alpha, cmap=EDGE_CMAP, norm=norm, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(n), side.tokens, rotation=90, fontsize=8)
    ax.set_yticks(range(n), [f"{t} {i + 1}" for i, t in enumerate(side.tokens)], fontsize=8)
    ax.set_xlabel("k (attended word)", fontsize=8)
    ax.set_ylabel("i (attending word)", fontsize=8)
    ax.set_title(f"layer {layer + 1}: alpha_ik (each row sums to 1)", fontsize=9)
    if n <= 14:
        for i in range(n):
            for k in range(n):
                dark = norm(alpha[i, k]) > 0.6
                ax.text(k, i, f"{alpha[i, k]:.2f}".lstrip("0"), ha="center", va="center", fontsize=6,
                        color="white" if dark else "black")
    if word is not None:
        ax.add_patch(Rectangle((-0.5, word - 0.5), n, 1, fill=False, edgecolor="crimson", linewidth=1.5))
    return image


def draw_gates(ax, side: SideEdges, layers: list[int]):
    """Mean gate per word (columns) and layer (rows), values printed in the cells."""
    gates = np.stack([side.gates[l] for l in layers])  # (L', n)
    image = ax.imshow(gates, cmap=GATE_CMAP, vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(side)), side.tokens, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(layers)), [f"layer {l + 1}" for l in layers], fontsize=8)
    for r in range(gates.shape[0]):
        for i in range(gates.shape[1]):
            ax.text(i, r, f"{gates[r, i]:.2f}", ha="center", va="center", fontsize=6.5 if len(side) < 30 else 5,
                    color="white" if gates[r, i] > 0.6 else "black")
    ax.set_title("gate g_i (mean over hidden units): how much of word i is rewritten from its neighbours",
                 fontsize=9)
    return image


# ----------------------------------------------------------------------------------------------
# HTML
# ----------------------------------------------------------------------------------------------


def render_html(view: EdgeView, layers: list[int], focus: dict[int, int] | None = None) -> str:
    """One self-contained page: per sentence inline-SVG arc diagrams, then per layer a word table
    (gate, neighbours, head) and an ``alpha`` table shaded by weight; no external JS or CSS."""
    from matplotlib.colors import Normalize

    norm = Normalize(0.0, edge_norm_max(view, layers))
    parts = [f"<h1>{html.escape(view.title)}</h1>",
             f"<p>dependency trees: {html.escape(view.tree_source or 'none')}. "
             "alpha<sub>ik</sub> = softmax<sub>k</sub>(s<sub>ik</sub>): how much word i reads from word k "
             "(rows sum to 1); gate = mean of g<sub>i</sub> over hidden units.</p>"]
    for s, side in enumerate(view.sides):
        word = focus.get(s) if focus else None
        parts.append(f"<h2>{html.escape(side.name)}: {html.escape(' '.join(side.tokens))}</h2>")
        parts.append(f"<div class='svg'>{arcs_svg(view, side, layers, norm, word)}</div>")
        for l in layers:
            parts.append(f"<h3>layer {l + 1}</h3><div class='row'>{_html_words(side, l)}"
                         f"{_html_heatmap(side, l, norm, word)}</div>")
    return _HTML_PAGE.format(title=html.escape(view.title), body="\n".join(parts))


_HTML_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 1.5em 1em 0; font-size: 13px; }}
td, th {{ padding: 2px 6px; border: 1px solid #ddd; }}
table.heat td {{ width: 2.2em; text-align: center; font-size: 11px; border: 1px solid #fff; }}
table.heat th.col {{ writing-mode: vertical-rl; transform: rotate(180deg); font-weight: normal; }}
.row {{ display: flex; flex-wrap: wrap; align-items: flex-start; }}
.svg svg {{ max-width: 100%; height: auto; }}
tr.focus td, tr.focus th {{ outline: 2px solid crimson; }}
</style></head>
<body>
{body}
</body></html>
"""


def arcs_svg(view: EdgeView, side: SideEdges, layers: list[int], norm, word: int | None) -> str:
    """The arc diagrams of one sentence (one per layer) as an inline ``<svg>`` element."""
    mpl = _matplotlib()
    from matplotlib.figure import Figure

    height = _arc_height(side)
    fig = Figure(figsize=(max(6.0, len(side) * _word_width(side) + 1), height * len(layers)), layout="constrained")
    axes = fig.subplots(len(layers), 1, squeeze=False)[:, 0]
    for ax, l in zip(axes, layers):
        draw_arcs(ax, side, l, norm, word, view.tree_source)
    buffer = io.StringIO()
    with mpl.rc_context({"svg.fonttype": "none"}):  # words stay text: searchable and small
        fig.savefig(buffer, format="svg", metadata=_NO_SVG_METADATA)
    svg = buffer.getvalue()
    return svg[svg.index("<svg"):]  # drop the XML prolog and DOCTYPE


def _html_words(side: SideEdges, layer: int) -> str:
    """Word table: position, word, [tag,] gate, top-3 neighbours, head (relation)."""
    tag = "<th>tag</th>" if side.tags is not None else ""
    rows = [f"<table><tr><th>#</th><th>word</th>{tag}<th>gate</th><th>strongest k (alpha<sub>ik</sub>)</th>"
            "<th>head (relation)</th></tr>"]
    alpha, gate = side.alphas[layer], side.gates[layer]
    for i, token in enumerate(side.tokens):
        near = ", ".join(f"{html.escape('(self)' if k == i else side.label(k))} {w:.2f}"
                         for k, w in top_neighbours(alpha[i]))
        tag = f"<td>{html.escape(side.tags[i])}</td>" if side.tags is not None else ""
        rows.append(f"<tr><td>{i + 1}</td><td><b>{html.escape(token)}</b></td>{tag}"
                    f"<td style='background:{_hex(GATE_CMAP, gate[i])}'>{gate[i]:.2f}</td>"
                    f"<td>{near}</td><td>{html.escape(head_text(side, i))}</td></tr>")
    return "".join(rows) + "</table>"


def _html_heatmap(side: SideEdges, layer: int, norm, word: int | None) -> str:
    """``alpha`` as a table with shaded cells (exact value in each cell's tooltip)."""
    alpha = side.alphas[layer]  # (n, n)
    head = "".join(f"<th class='col'>{html.escape(t)}</th>" for t in side.tokens)
    rows = [f"<table class='heat'><tr><th>i \\ k</th>{head}</tr>"]
    for i, token in enumerate(side.tokens):
        cells = []
        for k, value in enumerate(alpha[i]):
            shade = norm(value)
            colour = "#fff" if shade > 0.6 else "#000"
            tip = html.escape(f"alpha({side.label(i)} -> {side.label(k)}) = {value:.4f}", quote=True)
            cells.append(f"<td title='{tip}' style='background:{_hex(EDGE_CMAP, shade)};color:{colour}'>"
                         f"{value:.2f}</td>")
        focus = " class='focus'" if word == i else ""
        rows.append(f"<tr{focus}><th>{i + 1} {html.escape(token)}</th>{''.join(cells)}</tr>")
    return "".join(rows) + "</table>"


def _hex(cmap: str, value: float) -> str:
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    return to_hex(colormaps[cmap](float(value)))


# ----------------------------------------------------------------------------------------------
# files
# ----------------------------------------------------------------------------------------------


def output_format(path: Path) -> str:
    """``png``, ``svg`` or ``html`` from ``path``'s extension; anything else is a ConfigError."""
    suffix = Path(path).suffix.lower()
    if suffix not in OUTPUT_FORMATS:
        raise ConfigError(f"--out {path}: unsupported extension {suffix or '(none)'!r}; "
                          f"use one of {', '.join(OUTPUT_FORMATS)}")
    return suffix[1:]


def write_output(view: EdgeView, path: Path, layers: list[int], focus: dict[int, int] | None = None) -> None:
    """Write the view to ``path`` (format from the extension), atomically."""
    from cn3.atomic import atomic_write, atomic_write_text

    fmt = output_format(path)
    longest = max(len(side) for side in view.sides)
    if longest > FIGURE_MAX_WORDS:
        raise ConfigError(f"--out: the sentence has {longest} words; files are drawn for at most "
                          f"{FIGURE_MAX_WORDS} (leave out --out for the terminal table, which has no limit)")
    if fmt == "html":
        atomic_write_text(path, render_html(view, layers, focus))
    else:
        fig = render_figure(view, layers, focus)
        metadata = _NO_SVG_METADATA if fmt == "svg" else None
        atomic_write(path, lambda handle: fig.savefig(handle, format=fmt, dpi=150, metadata=metadata))
