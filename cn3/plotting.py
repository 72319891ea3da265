"""The one matplotlib setup every figure of cn3 shares (a leaf: analysis, visualize, reports and
curves draw through it without importing each other)."""

from __future__ import annotations

import sys


def matplotlib_agg():
    """matplotlib on the Agg backend (unless pyplot already runs with another one)."""
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    return matplotlib
