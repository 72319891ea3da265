"""``--out FILE``: the format from the extension, written atomically."""

from __future__ import annotations

from pathlib import Path

from cn3.config import ConfigError
from cn3.visualize.edges import EdgeView
from cn3.visualize.figure import NO_SVG_METADATA, render_figure
from cn3.visualize.html_page import render_html

#: ``--out`` extensions and what writes them.
OUTPUT_FORMATS = (".png", ".svg", ".html")
#: longest sentence drawn into a file (a figure grows with n, its heatmap with n^2).
FIGURE_MAX_WORDS = 80


def output_format(path: Path) -> str:
    """``png``, ``svg`` or ``html`` from ``path``'s extension; anything else is a ConfigError."""
    suffix = Path(path).suffix.lower()
    if suffix not in OUTPUT_FORMATS:
        raise ConfigError(f"--out {path}: unsupported extension {suffix or '(none)'!r}; "
                          f"use one of {', '.join(OUTPUT_FORMATS)}")
    return suffix[1:]


def write_output(view: EdgeView, path: Path, layers: list[int], focus: dict[int, int] | None = None) -> None:
    """Write the view to ``path`` (format from the extension), atomically."""
    from cn3.util.atomic import atomic_write, atomic_write_text

    fmt = output_format(path)
    longest = max(len(side) for side in view.sides)
    if longest > FIGURE_MAX_WORDS:
        raise ConfigError(f"--out: the sentence has {longest} words; files are drawn for at most "
                          f"{FIGURE_MAX_WORDS} (leave out --out for the terminal table, which has no limit)")
    if fmt == "html":
        atomic_write_text(path, render_html(view, layers, focus))
    else:
        fig = render_figure(view, layers, focus)
        metadata = NO_SVG_METADATA if fmt == "svg" else None
        atomic_write(path, lambda handle: fig.savefig(handle, format=fmt, dpi=150, metadata=metadata))
