"""Look inside a trained CN3 run: the soft graph it learns over a sentence (paper Figure 1, Table 5).

:func:`edge_view` (:mod:`.edges`) computes an :class:`EdgeView`; renderers: :mod:`.terminal`,
:mod:`.figure` (PNG/SVG), :mod:`.html_page`, chosen by extension in :func:`write_output`. Bad
requests raise :class:`~cn3.config.ConfigError`.
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
