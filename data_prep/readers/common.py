"""Helpers shared by the readers: task folders, labels, JSON lines, bracket-free tokens."""

from __future__ import annotations

import functools
import gc
import json
from collections.abc import Callable, Collection
from pathlib import Path
from typing import ParamSpec, TypeVar

from cn3.util.errors import DataError

P = ParamSpec("P")
R = TypeVar("R")
DATA_ROOT_HINT = "set the data root with --data or the CN3_DATA environment variable"


def task_dir(root: str | Path | None, name: str) -> Path:
    """``root/name``, or a DataError naming the missing directory and how to set the data root."""
    if root is None:
        raise DataError(f"no data root given; {DATA_ROOT_HINT}")
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"data root not found; {DATA_ROOT_HINT}", root)
    folder = root / name
    if not folder.is_dir():
        raise DataError(f"data directory not found (expected '{name}/' under the data root); {DATA_ROOT_HINT}", folder)
    return folder


def check_label(label: str, allowed: Collection[str], path: Path | str, line: int, what: str = "label") -> str:
    """``label`` when it is in ``allowed``, else a DataError listing the inventory."""
    if label not in allowed:
        raise DataError(f"unknown {what} {label!r}; expected one of {', '.join(allowed)}", path, line)
    return label


def tokens_of(text: str, path: Path | str, line: int, what: str = "text") -> list[str]:
    """Whitespace tokens of ``text``; DataError when there are none (an empty sentence)."""
    tokens = text.split()
    if not tokens:
        raise DataError(f"empty {what}; expected at least one token", path, line)
    return tokens


def unbracket(formula: str) -> list[str]:
    """Tokens of a bracketed binary parse / formula without the ``(`` and ``)`` tokens."""
    return formula.replace("(", " ").replace(")", " ").split()


def gc_paused(func: Callable[P, R]) -> Callable[P, R]:
    """Run ``func`` with the cyclic garbage collector paused (restored afterwards). WHY: readers build
    millions of small lists and no reference cycles, and full collections over a large heap made
    loading several times slower.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return func(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return wrapper


def json_object(text: str, path: Path, number: int) -> dict:
    """``text`` parsed as one JSON object, or a DataError naming file and line."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"invalid JSON ({err.msg} at column {err.colno}); expected one JSON object per line",
                        path, number) from None
    if not isinstance(record, dict):
        raise DataError(f"expected a JSON object, found {type(record).__name__}", path, number)
    return record
