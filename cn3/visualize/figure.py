"""The figure (PNG/SVG via matplotlib, Agg), as the paper's Figure 1: per layer learned arcs above
the words and the parser's tree below, the ``alpha`` heatmaps, and a strip of gates."""

from __future__ import annotations

import textwrap

import numpy as np

from cn3.plotting import matplotlib_agg
from cn3.visualize.edges import EdgeView, SideEdges, edge_norm_max, hub_line

#: matplotlib colour maps: edge weights and gates.
EDGE_CMAP, GATE_CMAP = "YlGnBu", "Greens"
#: SVG without date/creator metadata (reproducible output).
NO_SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}


def word_width(side: SideEdges) -> float:
    """Inches per word in arc panels, so that horizontal labels do not collide."""
    longest = max(len(t) for t in side.tokens)
    return min(max(0.4, 0.07 * longest + 0.12), 1.0)


def render_figure(view: EdgeView, layers: list[int], focus: dict[int, int] | None = None):
    """The full figure, per sentence: an arc diagram per layer (learned arcs above the words, the
    parser's tree below), the layers' ``alpha`` heatmaps side by side, a strip of gates per layer."""
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    matplotlib_agg()
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
    return max(len(side) * word_width(side) + 1.0, len(layers) * (0.3 * len(side) + 2.8))


def _panel_heights(side: SideEdges, layers: list[int]) -> list[float]:
    """Inches per row of one sentence: L arc panels, the heatmaps (grow with n), the gate strip."""
    return [arc_height(side)] * len(layers) + [0.3 * len(side) + 1.8, 0.35 * len(layers) + 1.1]


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


def arc_height(side: SideEdges) -> float:
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
    pairs = side.shown_arcs(layer, word)
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
    what = f"all alpha_ik of word {word + 1} '{side.tokens[word]}'" if word is not None else {
        "tree": "the best tree of the learned marginals (word i -> its head k; a ring: the root)",
        "sparsemax": "every non-zero edge i -> k", "entmax15": "every non-zero edge i -> k",
    }.get(side.edge_weights, "each word i -> its strongest k")
    tree = f"; below: dependency tree by {tree_source}" if tree_source else "; no dependency tree"
    # the hub line is the longest text of the panel: wrapped to the figure's width, or it is cut off
    # at both ends (9 pt characters are about 0.075 in wide)
    inches = getattr(ax.figure, "figure", ax.figure).get_figwidth()
    hub = textwrap.fill(hub_line(side, layer), width=max(40, int(inches / 0.075)))
    ax.set_title(f"layer {layer + 1}: {what}{tree}\n{hub}", fontsize=9)


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
