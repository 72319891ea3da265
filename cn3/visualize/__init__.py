"""Look inside a trained CN3 run: the soft graph it learns over a sentence (paper Figure 1, Table 5).

* :mod:`.edges`: :func:`edge_view` -> :class:`EdgeView`: tokens, per-layer ``alpha`` and mean gates,
  the parser's dependency tree and the model's prediction (one or two sentences);
* :mod:`.terminal`: :func:`render_terminal`, a word table and a shaded heatmap per layer;
* :mod:`.figure` (PNG/SVG via matplotlib, Agg) and :mod:`.html_page` (one self-contained file);
  :func:`write_output` (:mod:`.output`) picks by file extension.

Nothing here parses arguments or exits: bad requests raise :class:`~cn3.config.ConfigError`.
"""

from cn3.visualize.edges import (
           EdgeView,
           SideEdges,
           edge_view,
           resolve_layers,
           resolve_word,
)
from cn3.visualize.output import output_format, write_output
from cn3.visualize.terminal import render_terminal

__all__ = ["EdgeView", "SideEdges", "edge_view", "output_format", "render_terminal", "resolve_layers",
           "resolve_word", "write_output"]
