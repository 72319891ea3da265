"""What a run shows while it trains: the running loss (kept on the device), TensorBoard scalars and
the curves drawn at the end."""

from __future__ import annotations

import importlib
import time

import torch

from cn3.config import ConfigError
from cn3.runs.layout import RunDir
from cn3.train.config import LoopConfig


def check_tensorboard(t: LoopConfig) -> None:
    """Under ``train.tensorboard``, a ConfigError when the package is missing. Trainers call it
    first, so such a run fails at once rather than after preparing data and building the model."""
    if t.tensorboard:
        try:
            importlib.import_module("tensorboard")
        except ImportError:
            raise ConfigError("train.tensorboard: true needs the tensorboard package "
                              "(pip install tensorboard)") from None


class Scalars:
    """TensorBoard scalars of a run (``train.tensorboard``); a no-op when it is off, so the loop
    calls it unconditionally."""

    def __init__(self, t: LoopConfig, run: RunDir, enabled: bool = True):
        """``enabled``: ``False`` on torchrun ranks other than 0, which write nothing."""
        self.writer = None
        if t.tensorboard and enabled:
            check_tensorboard(t)
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(log_dir=str(run.tensorboard))

    def train(self, step: int, loss: float, lr: float) -> None:
        if self.writer is not None:
            self.writer.add_scalar("train/loss", loss, step)
            self.writer.add_scalar("train/lr", lr, step)

    def dev(self, step: int, fields: dict) -> None:
        """The numbers of an evaluation's record fields, each under ``dev/<what it is>``: a sentence
        run's ``dev`` under its ``metric`` name (``dev/accuracy``), translation's ``dev_bleu`` as
        ``dev/bleu``."""
        if self.writer is None:
            return
        for key, value in fields.items():
            if isinstance(value, (int, float)):
                name = fields.get("metric", "score") if key == "dev" else key.removeprefix("dev_")
                self.writer.add_scalar(f"dev/{name}", value, step)
        self.writer.flush()  # evaluations are minutes apart: let a running TensorBoard see each one

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def draw_curves(run: RunDir) -> None:
    """``RUN/curves.png`` from ``metrics.jsonl``. A figure is a convenience: a failure to draw it
    (a broken matplotlib, a full disk) is a warning in the log, never a failed training."""
    from cn3.train.curves import plot_runs

    try:
        plot_runs([run.path], run.curves)
    except Exception as err:  # whatever went wrong, the trained run stands
        run.log(f"[yellow]warning[/]: could not draw {run.curves}: {type(err).__name__}: {err}")


class RunningLoss:
    """The train loss summed since the epoch began, kept on the device: adding an update's loss
    queues an addition and does not wait for the device; reading it (:meth:`total`, at most once per
    update) does, so the loop reads it for a log line, an evaluation or the progress display only.
    The sum is float64, in update order: the numbers of a sum of Python floats."""

    def __init__(self, device: torch.device):
        self.sum = torch.zeros((), dtype=torch.float64, device=device)
        self.count = 0
        self._read: float | None = 0.0

    def add(self, loss: torch.Tensor, count: int) -> None:
        """``loss``: summed over ``count`` items or tokens (:func:`cn3.train.trainer.train_step`)."""
        self.sum += loss
        self.count += count
        self._read = None

    def total(self) -> float:
        if self._read is None:
            self._read = float(self.sum)  # waits for the device
        return self._read

    def mean(self) -> float:
        return self.total() / max(self.count, 1)


def loss_due(bar, shown_at: float) -> bool:
    """Whether to re-read the running loss from the device for the progress display: every second
    for a live bar; without a terminal, just before the bar prints its next plain line (so a
    redirected log never shows a line without the loss)."""
    return bar.line_due() if bar.disable else time.perf_counter() - shown_at >= 1.0
