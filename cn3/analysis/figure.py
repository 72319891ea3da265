"""``graphs.png``: the per-layer summaries of :class:`cn3.analysis.graphs.GraphStatistics` as bar charts.

Panels, each with one bar colour per layer: how many sentences have which hub share; how far each
word's strongest key is (token-to-token rows only); how often the dependent of each relation reads
its head, against chance (runs with trees only).
"""

from __future__ import annotations

import numpy as np

from cn3.analysis.graphs import HUB_BINS, layer_label

#: distances drawn one by one in the histogram; longer ones share the last bar.
MAX_DISTANCE = 12
#: relations drawn, the most frequent first.
MAX_RELATIONS = 12


def render_graphs_figure(layers: list[dict], title: str):
    """A matplotlib Figure (Agg) of the per-layer summaries ``layers`` (``GraphStatistics.summary()``)."""
    from matplotlib.figure import Figure

    from cn3.plotting import matplotlib_agg

    matplotlib_agg()
    panels = [_hub_panel]
    if any("argmax_distance" in entry for entry in layers):
        panels.append(_distance_panel)
    if any("relations" in entry for entry in layers):
        panels.append(_relation_panel)
    fig = Figure(figsize=(5.2 * len(panels), 4.6), layout="constrained")
    fig.suptitle(title, fontsize=12, fontweight="bold")
    for ax, draw in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels):
        draw(ax, layers)
        if len(layers) > 1:
            ax.legend(fontsize=8)
    return fig


def _bars(ax, values: list[np.ndarray], labels: list[str], horizontal: bool = False) -> np.ndarray:
    """Grouped bars, one group per position and one bar per series; returns the group positions."""
    x = np.arange(len(values[0]))
    width = 0.8 / len(values)
    for j, (v, label) in enumerate(zip(values, labels)):
        offset = x - 0.4 + width * (j + 0.5)
        (ax.barh if horizontal else ax.bar)(offset, v, width, label=label)
    return x


def _hub_panel(ax, layers: list[dict]) -> None:
    counts = [np.asarray(entry["hub_share_histogram"], dtype=float) for entry in layers]
    x = _bars(ax, [c / max(c.sum(), 1.0) for c in counts], [layer_label(e) for e in layers])
    edges = np.linspace(0.0, 1.0, HUB_BINS + 1)
    ax.set_xticks(x, [f"{lo:.1f}" for lo in edges[:-1]], fontsize=8)
    ax.set_xlabel("hub share of the sentence (bin start; 1.0 = a star)", fontsize=9)
    ax.set_ylabel("fraction of sentences", fontsize=9)
    ax.set_title("rows pointing at the most-chosen word", fontsize=10)


def _distance_panel(ax, layers: list[dict]) -> None:
    shown = [e for e in layers if "argmax_distance" in e]
    values = []
    for entry in shown:
        counts = np.asarray(entry["argmax_distance"], dtype=float)
        head = np.zeros(MAX_DISTANCE + 2)
        head[: min(counts.size, MAX_DISTANCE + 1)] = counts[: MAX_DISTANCE + 1]
        head[-1] = counts[MAX_DISTANCE + 1:].sum()
        values.append(head / max(counts.sum(), 1.0))
    x = _bars(ax, values, [layer_label(e) for e in shown])
    ax.set_xticks(x, [str(d) for d in range(MAX_DISTANCE + 1)] + [f">{MAX_DISTANCE}"], fontsize=8)
    ax.set_xlabel("|i - argmax_k alpha_ik| (0 = the word itself)", fontsize=9)
    ax.set_ylabel("fraction of words", fontsize=9)
    ax.set_title("distance to each word's strongest key", fontsize=10)


def _relation_panel(ax, layers: list[dict]) -> None:
    shown = [e for e in layers if "relations" in e]
    names = list(shown[0]["relations"])[:MAX_RELATIONS]  # the same arcs in every layer: the most frequent
    rates = [np.array([e["relations"].get(r, {}).get("to_head", 0.0) for r in names]) for e in shown]
    y = _bars(ax, rates, [layer_label(e) for e in shown], horizontal=True)
    chance = [shown[0]["relations"][r]["to_head_chance"] for r in names]
    ax.scatter(chance, y, marker="|", s=160, color="black", label="chance", zorder=3)
    ax.set_yticks(y, [f"{r} ({shown[0]['relations'][r]['arcs']})" for r in names], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("fraction of arcs whose dependent's strongest key is its head", fontsize=9)
    ax.set_title("dependent -> head, per relation (arcs); | = chance", fontsize=10)
