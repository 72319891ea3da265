"""The one rich Console shared by logs, progress bars and summaries."""

import os
import sys

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

# Logs and tables are read from files and CI logs too: there, use a width that fits the summary
# tables instead of rich's 80-column default.
_width = None if sys.stderr.isatty() else int(os.environ.get("COLUMNS", 120))
console = Console(stderr=True, highlight=False, width=_width)


def progress(transient: bool = True) -> Progress:
    """A progress bar on the shared console (hidden automatically when stderr is not a terminal)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=transient,
        disable=not console.is_terminal,
    )
