"""The terminal view: per word its top-3 neighbours, gate and head, plus a shaded ``alpha`` heatmap."""

from __future__ import annotations

from cn3.visualize.edges import (
    EdgeView,
    SideEdges,
    edge_norm_max,
    head_text,
    hub_line,
    learned_head_text,
    top_neighbours,
)

#: longest sentence that still gets a heatmap in the terminal.
TERMINAL_HEATMAP_MAX = 25
#: terminal shades, weakest to strongest (readable without colour too).
SHADES = ("·", "░", "▒", "▓", "█")


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
            console.print(Text(hub_line(side, l)))


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
    tree = side.best_tree(layer) if side.edge_weights == "tree" else None  # searched once per table
    if tree:
        table.add_column("learned head (best tree)")
    table.add_column("head (relation)")
    alpha, gate = side.alphas[layer], side.gates[layer]  # (n, n), (n,)
    for i, token in enumerate(side.tokens):
        neighbours = "  ".join(f"{'(self)' if k == i else side.label(k)} {w:.2f}"
                               for k, w in top_neighbours(alpha[i]))
        row = [str(i + 1), token] + ([side.tags[i]] if side.tags is not None else [])
        row += [f"{gate[i]:.2f}", neighbours] + ([learned_head_text(side, tree, i)] if tree else [])
        row += [head_text(side, i)]
        table.add_row(*(Text(cell) for cell in row))  # Text: words are never read as rich markup
    return table




def outgoing_weights(side: SideEdges, layer: int, i: int):
    """All of word ``i``'s weights ``alpha_i.`` in sentence order, with bars and their sum."""
    from rich.text import Text

    row = side.alphas[layer][i]  # (n,)
    width = max(len(t) for t in side.tokens)
    text = Text(f"alpha of word {i + 1} {side.tokens[i]!r} over every word k (layer {layer + 1}):\n",
                style="bold")
    for k, token in enumerate(side.tokens):
        bar = "█" * round(float(row[k]) * 40)
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
