"""cn3's errors for what a user can fix, each ending a command with one line and exit code 1.

* :class:`ConfigError`: a bad configuration (unknown key, wrong type, invalid value), named by key;
* :class:`DataError`: bad input data, named by file and line;
* :class:`RunError`: a run directory or checkpoint that cannot be used as asked (missing, busy,
  unfinished, unreadable, of another kind).
"""

from __future__ import annotations

from pathlib import Path


class Cn3Error(Exception):
    """An error the user can fix: the CLI prints ``str(err)`` and exits with :attr:`exit_code`,
    without a traceback."""

    exit_code = 1


class ConfigError(Cn3Error):
    """A bad configuration: unknown key, wrong type, invalid value. The message names the key."""


class ArgumentError(ConfigError):
    """A request that is wrong in itself: options that do not go together, or a split that the run's
    dataset does not have. The CLI reports it as a bad parameter (usage, exit code 2)."""


class RunError(Cn3Error):
    """A run directory or checkpoint that cannot be used as asked: missing, busy (another process
    trains into it), unfinished, unreadable, or of another kind of run."""


class DataError(Cn3Error):
    """Bad input data.

    Args:
        message: what is wrong and what was expected.
        path: the offending file (or directory), when there is one.
        line: the 1-based line number in ``path``, when known.
    """

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.message = message
        self.path = Path(path) if path is not None else None
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}"
            if self.line is not None:
                where += f", line {self.line}"
            where += ": "
        return where + self.message
