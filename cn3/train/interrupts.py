"""Ctrl-C and SIGTERM during training: held back while an update runs, so that ``latest.pt`` holds
whole updates only."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


class Interrupts:
    """Ctrl-C and SIGTERM (``kill``, job schedulers, ``cn3 experiment run``) as ``KeyboardInterrupt``,
    after which the loop writes ``latest.pt``, held back while an update and its bookkeeping run
    (:meth:`held`): one arriving mid-update would leave weights, optimizer, RNG streams (dropout
    drawn) and step counters from different moments in the checkpoint, and the resumed run would
    not be the uninterrupted one. A second signal within the same update raises at once (``torn``:
    the state is not whole, so ``latest.pt`` is not rewritten). Installed from the main thread only,
    where signal handlers can be; restored by :meth:`restore`."""

    def __init__(self):
        self.holding = self.pending = self.torn = False
        self.previous = {}
        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGINT, signal.SIGTERM):
                self.previous[number] = signal.signal(number, self._interrupt)

    def _interrupt(self, signum, frame) -> None:
        if self.holding and not self.pending:
            self.pending = True
            return
        self.torn = self.holding
        raise KeyboardInterrupt

    @contextmanager
    def held(self):
        """A block that a signal does not interrupt: it raises when the block is done."""
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt

    def restore(self) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)
