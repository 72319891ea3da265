"""Atomic writes: write to a temporary file beside the target, fsync, then rename over it.

A crash or Ctrl-C in the middle leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO


def atomic_write(path: str | Path, write: Callable[[BinaryIO], None]) -> None:
    """Call ``write(fileobj)`` on a temp file in ``path``'s directory and rename it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; the result should be an ordinary file
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))


def atomic_write_json(path: str | Path, obj: Any, inline_lists: bool = False) -> None:
    """``obj`` as indented JSON (:func:`json_text`), written atomically."""
    atomic_write_text(path, json_text(obj, inline_lists))


def json_text(obj: Any, inline_lists: bool = False) -> str:
    """What :func:`atomic_write_json` writes: ``json.dumps(obj, indent=2)`` and a newline; with
    ``inline_lists``, lists holding no list or dict printed on one line (``json.loads`` reads the same)."""
    if not inline_lists:
        return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
    inlined: list[str] = []
    tag = uuid.uuid4().hex  # placeholders no string of obj can equal

    def mark(value: Any) -> Any:  # each flat list becomes a placeholder string, filled in after indenting
        if isinstance(value, dict):
            return {k: mark(v) for k, v in value.items()}
        if isinstance(value, list) and not any(isinstance(v, (list, dict)) for v in value):
            inlined.append(json.dumps(value, ensure_ascii=False))
            return f"{tag}:{len(inlined) - 1}"
        if isinstance(value, list):
            return [mark(v) for v in value]
        return value

    text = json.dumps(mark(obj), indent=2, ensure_ascii=False)
    return re.sub(f'"{tag}:(\\d+)"', lambda m: inlined[int(m.group(1))], text) + "\n"


def atomic_torch_save(path: str | Path, obj: Any) -> None:
    import torch

    atomic_write(path, lambda handle: torch.save(obj, handle))
