"""An exclusive lock on a file: parallel ``cn3 prepare`` (or ``cn3 train``, which prepares on the fly)
of the same dataset wait for the first one instead of deleting each other's temporary files
(:func:`exclusive`); a second trainer of one run directory is refused at once (:func:`exclusive_now`).

The lock is the operating system's (``flock`` on POSIX, ``msvcrt.locking`` on Windows), so it is
released when its holder exits, however that happens: a crashed run never leaves a stale lock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from cn3.util.console import console

if os.name == "nt":
    import msvcrt

    def _try_lock(handle: BinaryIO) -> bool:
        try:
            handle.seek(0)
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False

    def _lock(handle: BinaryIO) -> None:
        while not _try_lock(handle):
            time.sleep(0.5)

    def _unlock(handle: BinaryIO) -> None:
        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(handle: BinaryIO) -> bool:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _lock(handle: BinaryIO) -> None:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)

    def _unlock(handle: BinaryIO) -> None:
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextmanager
def exclusive(path: Path, waiting: str) -> Iterator[None]:
    """Hold the lock on ``path`` (created if missing) inside the block; print ``waiting`` if another
    process holds it, then wait for it."""
    with open(path, "a+b") as handle:
        if not _try_lock(handle):
            console.log(waiting)
            _lock(handle)
        try:
            yield
        finally:
            _unlock(handle)


@contextmanager
def exclusive_now(path: Path, error: Exception) -> Iterator[None]:
    """Hold the lock on ``path`` (created if missing) inside the block; raise ``error`` at once if
    another process holds it."""
    with open(path, "a+b") as handle:
        if not _try_lock(handle):
            raise error
        try:
            yield
        finally:
            _unlock(handle)

def held(path: Path) -> bool:
    """Whether another process holds the lock on ``path`` now (a missing file is not held)."""
    if not path.is_file():
        return False
    with open(path, "a+b") as handle:
        if not _try_lock(handle):
            return True
        _unlock(handle)
        return False
