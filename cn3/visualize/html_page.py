"""One self-contained HTML page: inline SVG arcs and colour-shaded tables, no external JS or CSS."""

from __future__ import annotations

import html
import io

from cn3.plotting import matplotlib_agg
from cn3.visualize.edges import (
    EdgeView,
    SideEdges,
    edge_norm_max,
    head_text,
    top_neighbours,
)
from cn3.visualize.figure import (
    EDGE_CMAP,
    GATE_CMAP,
    NO_SVG_METADATA,
    arc_height,
    draw_arcs,
    word_width,
)


def render_html(view: EdgeView, layers: list[int], focus: dict[int, int] | None = None) -> str:
    """One self-contained page: per sentence inline-SVG arc diagrams, then per layer a word table
    (gate, neighbours, head) and an ``alpha`` table shaded by weight; no external JS or CSS."""
    from matplotlib.colors import Normalize

    norm = Normalize(0.0, edge_norm_max(view, layers))
    parts = [f"<h1>{html.escape(view.title)}</h1>",
             (f"<p>dependency trees: {html.escape(view.tree_source or 'none')}. "
             "alpha<sub>ik</sub> = softmax<sub>k</sub>(s<sub>ik</sub>): how much word i reads from word k "
             "(rows sum to 1); gate = mean of g<sub>i</sub> over hidden units.</p>")]
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
    mpl = matplotlib_agg()
    from matplotlib.figure import Figure

    height = arc_height(side)
    fig = Figure(figsize=(max(6.0, len(side) * word_width(side) + 1), height * len(layers)), layout="constrained")
    axes = fig.subplots(len(layers), 1, squeeze=False)[:, 0]
    for ax, l in zip(axes, layers):
        draw_arcs(ax, side, l, norm, word, view.tree_source)
    buffer = io.StringIO()
    with mpl.rc_context({"svg.fonttype": "none"}):  # words stay text: searchable and small
        fig.savefig(buffer, format="svg", metadata=NO_SVG_METADATA)
    svg = buffer.getvalue()
    return svg[svg.index("<svg"):]  # drop the XML prolog and DOCTYPE


def _html_words(side: SideEdges, layer: int) -> str:
    """Word table: position, word, [tag,] gate, top-3 neighbours, head (relation)."""
    tag = "<th>tag</th>" if side.tags is not None else ""
    rows = [(f"<table><tr><th>#</th><th>word</th>{tag}<th>gate</th><th>strongest k (alpha<sub>ik</sub>)</th>"
            "<th>head (relation)</th></tr>")]
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
