"""The one rich Console shared by logs, progress bars and summaries."""

import os
import sys
import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

# Logs and tables are read from files and CI logs too: there, use a width that fits the summary
# tables instead of rich's 80-column default.
_width = None if sys.stderr.isatty() else int(os.environ.get("COLUMNS", 120))
console = Console(stderr=True, highlight=False, width=_width)

#: Seconds between plain progress lines when stderr is not a terminal.
LOG_INTERVAL = float(os.environ.get("CN3_PROGRESS_INTERVAL", 30))


class _Progress(Progress):
    """A live bar on a terminal; elsewhere (a log file, CI, ``nohup``) a plain line every
    :data:`LOG_INTERVAL` seconds, so a long annotation or epoch is never silent."""

    _last_line = 0.0

    def line_due(self) -> bool:
        """Whether the next :meth:`update` prints a plain line (never for a live bar), so that a caller fills
        costly fields (a loss read from the device) only then.
        """
        return self.disable and time.monotonic() - self._last_line >= LOG_INTERVAL

    def update(self, task_id: TaskID, **kwargs) -> None:
        super().update(task_id, **kwargs)
        now = time.monotonic()
        if self.disable and now - self._last_line >= LOG_INTERVAL:
            self._last_line = now
            task = self._tasks[task_id]
            total = f"/{task.total:,.0f}" if task.total is not None else ""
            console.print(f"{task.description}: {task.completed:,.0f}{total} {task.fields.get('rate', '')} "
                          f"({task.elapsed or 0:,.0f} s)", highlight=False)


def progress(transient: bool = True) -> Progress:
    """A progress bar on the shared console (plain periodic lines when stderr is not a terminal)."""
    bar = _Progress(
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
    bar._last_line = time.monotonic()  # the first line after one interval, not at once
    return bar
