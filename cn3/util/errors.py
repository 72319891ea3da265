"""The one error type for bad input: it names the file, the line and what was expected."""

from __future__ import annotations

from pathlib import Path


class DataError(Exception):
    """Bad input data. The CLI prints ``str(err)`` and exits with code 1, without a traceback.

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
