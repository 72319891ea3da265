"""Reading staged text files: gzip transparently, an explicit encoding, lines split on ``\\n`` only.

``str.splitlines()`` treats U+0085 (byte 0x85 in latin-1, present in MR) as a line break, so every
reader goes through :func:`read_lines`, which splits on ``\\n`` and strips a trailing ``\\r``.
Undecodable bytes raise :class:`DataError` naming the file and line instead of a UnicodeDecodeError.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

from cn3.util.errors import DataError


def read_bytes(path: str | Path) -> bytes:
    """The file's content, gunzipped when it is gzip (by magic number, not by name)."""
    path = Path(path)
    if not path.exists():
        raise DataError("file not found", path)
    if path.is_dir():
        raise DataError("expected a file, found a directory", path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise DataError(f"corrupt gzip file ({err})", path) from None
    return raw


def read_lines(path: str | Path, encoding: str = "utf-8") -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` with 1-based numbers, no ``\\n``/``\\r`` at the end.

    A final empty line after the last ``\\n`` is not yielded.
    """
    raw = read_bytes(path)
    pieces = raw.split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()
    for number, piece in enumerate(pieces, start=1):
        if piece.endswith(b"\r"):
            piece = piece[:-1]
        try:
            text = piece.decode(encoding)
        except UnicodeDecodeError as err:
            bad = piece[err.start : err.start + 1]
            raise DataError(
                f"byte {bad!r} at column {err.start + 1} is not valid {encoding}; "
                f"expected {encoding} text (re-encode the file, e.g. `iconv -f latin1 -t utf-8`)",
                path,
                number,
            ) from None
        yield number, text
