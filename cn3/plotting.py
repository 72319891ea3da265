"""The one matplotlib setup of the figures drawn through pyplot (a leaf: analysis and visualize
draw through it without importing each other). Learning curves, ``--by`` plots and experiment reports
draw on a ``Figure`` with its own Agg canvas instead, so they need no backend choice at all."""

from __future__ import annotations

import sys


def matplotlib_agg():
    """matplotlib on the Agg backend (unless pyplot already runs with another one)."""
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    return matplotlib
