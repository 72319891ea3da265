"""The Trainer: one training loop for every kind of run (``cn3 train`` and ``cn3 nmt train``).

A :class:`RunTask` supplies what differs between kinds (model, batches, loss, dev score, learning
rate, its checkpoint entries, final scores); the :class:`Trainer` does the rest identically:

* updates with gradient clipping (:func:`train_step`), progress with throughput, a log line every
  ``log_every`` steps;
* ``evals_per_epoch`` evaluations per epoch, ``best.pt`` at each improvement, early stopping after
  ``patience`` evaluations without one, ``max_steps``;
* ``latest.pt`` every ``checkpoint_every`` steps, at every epoch end, at a stop and on Ctrl-C or
  SIGTERM, with everything resuming needs (``best.pt`` leaves out the optimizer and RNG states):
  one :class:`~cn3.train.checkpoint.Checkpoint`, built by :meth:`Trainer.checkpoint` and restored
  by :meth:`Trainer.restore`;
* the weight average (``train.ema``, :mod:`cn3.train.averaging`), evaluated and kept in ``best.pt``;
* the loss an update takes, normalised the same way for every kind (:func:`loss_for_backward`);
* at the end ``results.json``, the results line of ``log.txt`` and ``curves.png``.

Exact resume: each epoch's batch order is a pure function of ``(seed, epoch)``; a checkpoint stores
the weights, optimizer, every RNG stream and the :class:`~cn3.train.state.TrainState` (an interrupted
evaluation included), so ``--resume`` replays nothing and skips nothing.

The device is not waited for at every update: batches are collated ahead (loader workers, pinned
memory on CUDA) or gathered on the device (``train.device_batches``), the running loss is summed on
the device (:class:`~cn3.train.monitor.RunningLoss`) and read only for a log line, an evaluation or
the progress display (``tests/train/test_host_sync.py`` counts these reads). Under ``fp16``,
``GradScaler.step`` reads its inf/NaN check once per update.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

import torch

import cn3
from cn3.config import ConfigError, to_dict
from cn3.runs.compat import check_resumable
from cn3.runs.kinds import RunKind
from cn3.runs.layout import RunDir
from cn3.train import runtime
from cn3.train.averaging import WeightAverage, make_ema
from cn3.train.bucketing import batch_loader
from cn3.train.checkpoint import Checkpoint
from cn3.train.checkpoints import check_resume_config, read_saved_config
from cn3.train.config import LoopConfig
from cn3.train.distributed import SINGLE, World, check_world_size, init_world, shutdown, step_seed
from cn3.train.interrupts import Interrupts
from cn3.train.monitor import RunningLoss, Scalars, check_tensorboard, draw_curves, loss_due
from cn3.train.runtime import deterministic_algorithms, resolve_device, rng_state, seed_everything, slow_precision_note
from cn3.train.state import TrainState
from cn3.util.atomic import atomic_write_json
from cn3.util.console import console, progress
from cn3.util.errors import RunError

#: what a kind's batch loss is over the items or tokens it counts (:attr:`RunTask.loss_reduction`)
Reduction = Literal["mean", "sum"]


def loss_for_backward(loss: torch.Tensor, reduction: Reduction, count: int,
                      weight: float | torch.Tensor) -> torch.Tensor:
    """The loss whose gradient an update takes, for every kind: the batch's loss per item or token,
    times ``weight`` (a rank's share of a global batch, :mod:`cn3.train.distributed`, times the fp16
    loss scale).

    ``loss`` is the batch's loss over ``count`` items or tokens, as ``reduction`` says: its ``"mean"``
    (a sentence batch's, per item: multiplied by ``weight`` as it is) or its ``"sum"`` (a translation
    batch's, over target tokens: divided by ``count`` here; ``count`` comes from the host, where
    counting the batch's tokens would wait for the device)."""
    if reduction == "mean":
        return loss * weight
    return loss * (weight / count)


def summed_loss(loss: torch.Tensor, reduction: Reduction, count: int) -> torch.Tensor:
    """``loss`` (as in :func:`loss_for_backward`) summed over its ``count`` items or tokens, detached,
    in float64, on the device: what a task's ``forward_backward`` returns and the running loss adds."""
    loss = loss.detach().double()
    return loss * count if reduction == "mean" else loss


class RunTask(Protocol):
    """What a kind of run gives the :class:`Trainer`.

    Attributes:
        model: the trained module.
        args: the model's constructor arguments (a dataclass), saved in every checkpoint.
        optimizer: built over ``model``'s parameters.
        scaler: the loss scaler of an ``fp16`` run (:func:`cn3.train.runtime.make_scaler`) or ``None``.
        ema_decay: the decay of the weight average the Trainer keeps (0: none).
        checkpoint_kind: the ``kind`` of its checkpoints (:mod:`cn3.train.kinds`).
        loss_reduction: what its batch loss is over the items or tokens :meth:`count` counts
            (:func:`loss_for_backward`).
        device: where the model is.
        unit: what the throughput counts (``items``, ``tgt tok``).
        device_collate: :meth:`collate` builds batches on ``device`` itself: no loader workers, no
            pinned memory.
    """

    model: torch.nn.Module
    args: object
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler | None
    ema_decay: float
    checkpoint_kind: str
    loss_reduction: Reduction
    device: torch.device
    unit: str
    device_collate: bool

    def batches(self, epoch: int) -> list:
        """The epoch's batches (lists of item indices), a pure function of ``(seed, epoch)``."""

    def collate(self, indices: list[int]):
        """The batch of the items ``indices`` (with ``.to(device)`` and ``.pin_memory()``), built on
        the host in the loader's workers (picklable, drawing no random numbers) or on the device."""

    def count(self, indices: list[int]) -> int:
        """What the batch's loss is over (items, target tokens), from the indices alone."""

    def forward_backward(self, batch, count: int, weight: float | torch.Tensor = 1.0) -> torch.Tensor:
        """Forward and backward on a collated batch of ``count`` items or tokens, backward through
        :func:`loss_for_backward`. Returns :func:`summed_loss`."""

    def lr(self, step: int, epoch: int) -> float:
        """The learning rate of update ``step`` (from 1) in ``epoch`` (from 0)."""

    def evaluate(self, model: torch.nn.Module, bar) -> tuple[float, dict, str]:
        """``(dev score, record fields, log text)`` of ``model`` (the weight average, or the model
        itself); higher scores are better."""

    def checkpoint_payload(self) -> dict:
        """The kind's own entries of its checkpoints (plain data: what loading the run needs besides
        config, arguments and weights), the same in ``best.pt`` and ``latest.pt``."""

    def final_results(self, run: RunDir, state: TrainState) -> tuple[dict, object, list[str]]:
        """Score the best checkpoint: ``(results, table, notes)``: what ``results.json`` holds, a
        rich table to print (or ``None``) and lines printed after it."""


def train_step(task: RunTask, batch, count: int, weight: float | torch.Tensor, lr: float, clip: float,
               world: World = SINGLE, average: WeightAverage | None = None) -> torch.Tensor:
    """One optimizer update of ``task.model`` on a collated ``batch`` of ``count`` items or tokens:
    forward and backward (:func:`loss_for_backward` with ``weight``), gradients averaged over
    torchrun ranks, unscaled under fp16, clipped to norm ``clip`` (0: not clipped), then a step at
    learning rate ``lr`` and the weight ``average``'s update.

    Returns the loss summed over ``count``, on the device. Reads nothing from the device (but
    ``GradScaler.step``'s inf/NaN check under fp16).
    """
    model, optimizer, scaler = task.model, task.optimizer, task.scaler
    optimizer.zero_grad(set_to_none=True)
    loss = task.forward_backward(batch, count, weight)
    world.average_gradients(model)
    if scaler is not None:
        scaler.unscale_(optimizer)  # clip the true gradients
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    for group in optimizer.param_groups:
        group["lr"] = lr
    if scaler is None:
        optimizer.step()
    else:  # skipped when a gradient is inf/NaN; the scale then backs off
        scaler.step(optimizer)
        scaler.update()
    if average is not None:
        average.update_parameters(model)
    return loss


@dataclass
class EpochMeter:
    """An epoch's progress display: its bar row, the running loss and when it was last read."""

    bar: object
    row: int
    batches: int
    running: RunningLoss
    tick: float = field(default_factory=time.perf_counter)
    loss_text: str = "loss –"
    shown_at: float = field(default_factory=time.perf_counter)


class Trainer:
    """Trains a :class:`RunTask` into a run directory.

    Args:
        task: the kind's model, data and scoring.
        config: the loop settings (``cfg.train``).
        run: the run directory.
        config_dict: the resolved config, saved in every checkpoint.
        world: the torchrun process group (:mod:`cn3.train.distributed`); rank 0 alone evaluates and writes.

    Attributes:
        average: the moving average of the task's model (``task.ema_decay``; :mod:`cn3.train.averaging`)
            or ``None``; :attr:`evaluated` is what evaluations score and checkpoints keep as ``model``.

    Call :meth:`start` (new or resumed), then :meth:`fit`.
    """

    def __init__(self, task: RunTask, config: LoopConfig, run: RunDir, config_dict: dict, world: World = SINGLE):
        self.task, self.config, self.run, self.config_dict, self.world = task, config, run, config_dict, world
        self.average = make_ema(task.model, task.ema_decay)
        self.state = TrainState(world_size=world.size)
        self.scalars = Scalars(config, run, enabled=False)
        self.interrupts: Interrupts | None = None
        self._clock = time.perf_counter()

    @property
    def evaluated(self) -> torch.nn.Module:
        """The weights evaluations score and ``best.pt`` keeps: the average, or the model itself."""
        return self.average.module if self.average is not None else self.task.model

    def start(self, resume: bool, what: str) -> None:
        """A new run (``what`` names it in the log), or, when ``resume``, :meth:`restore` from
        ``latest.pt``, which must have been written by this release. A resumed run must have the
        number of processes it was started with.

        Raises:
            ConfigError: ``latest.pt`` is another release's.
            RunError: it is no readable checkpoint.
        """
        if not resume:
            self.run.log(f"cn3 {cn3.__version__}: training {what} into {self.run.path}")
            return
        ckpt = Checkpoint.load(self.run.latest)
        check_resumable(ckpt.cn3_version, self.run.latest)
        self.restore(ckpt)
        check_world_size(self.state.world_size, self.world, self.run.path)
        s = self.state
        self.run.log(f"resuming {self.run.path} at epoch {s.epoch + 1}, batch {s.batch_in_epoch}, "
                     f"step {s.step} (best dev {s.best_score:.2f})")

    # ------------------------------------------------------------------ checkpoints and evaluation

    def checkpoint(self, full: bool) -> Checkpoint:
        """This moment of the run as a checkpoint: ``full`` (``latest.pt``) with the optimizer,
        scaler and RNG states and the raw weights under an average, which resuming needs; else
        (``best.pt``) the evaluated weights, the state and the task's payload only."""
        t, average = self.task, self.average
        return Checkpoint(
            kind=t.checkpoint_kind, cn3_version=cn3.__version__, config=self.config_dict,
            model_args=dict(vars(t.args)), model=self.evaluated.state_dict(), state=self.state.state_dict(),
            payload=t.checkpoint_payload(),
            optimizer=t.optimizer.state_dict() if full else None,
            scaler=t.scaler.state_dict() if full and t.scaler is not None else None,
            rng=rng_state() if full else None,
            raw_model=t.model.state_dict() if full and average is not None else None,
            ema_updates=average.updates if full and average is not None else None)

    def restore(self, ckpt: Checkpoint) -> None:
        """Take a full checkpoint's weights, average, optimizer, loss scaler, RNG streams and state.
        The checkpoint is on the host; the model and optimizer take their states to their device."""
        t = self.task
        if self.average is None:
            t.model.load_state_dict(ckpt.model)
        else:  # model: the average's weights; raw_model: those training goes on from
            t.model.load_state_dict(ckpt.raw_model)
            self.average.load(ckpt.model, ckpt.ema_updates)
        t.optimizer.load_state_dict(ckpt.optimizer)
        if t.scaler is not None:
            t.scaler.load_state_dict(ckpt.scaler)
        runtime.set_rng_state(ckpt.rng)
        self.state = TrainState()
        self.state.load_state_dict(ckpt.state)

    def save(self, path: Path) -> None:
        """Write :meth:`checkpoint` to ``path`` (rank 0 only): full when it is ``latest.pt``."""
        if self.world.main:
            self.checkpoint(full=path == self.run.latest).write(path)

    def save_latest(self) -> None:
        """``latest.pt`` with the time trained so far."""
        self._elapsed()
        self.save(self.run.latest)

    def _elapsed(self) -> float:
        self.state.seconds = time.perf_counter() - self._clock
        return self.state.seconds

    def evaluate(self, epoch: int, train_loss: float, bar, final: bool = False) -> None:
        """A dev evaluation by rank 0, whose state the other ranks then take. ``final``: a stop
        before any evaluation wrote ``best.pt``; it writes one without counting for patience."""
        if self.world.main:
            self._dev_evaluation(epoch, train_loss, bar, final)
        self.state.load_state_dict(self.world.broadcast(self.state.state_dict()))

    def _dev_evaluation(self, epoch: int, train_loss: float, bar, final: bool) -> None:
        s = self.state
        score, fields, text = self.task.evaluate(self.evaluated, bar)
        score = float(score)  # a numpy scalar would make the checkpoint unloadable with weights_only
        self.task.model.train()
        record = {"epoch": epoch, "batch": s.batch_in_epoch, "step": s.step, "train_loss": round(train_loss, 4),
                  **fields, "seconds": round(self._elapsed(), 1)}
        if final:
            record["stop"] = True
            improved = not s.best_written
        else:
            improved = score > s.best_score
            if improved:
                s.best_score, s.best_step, s.best_epoch, s.bad_evals = score, s.step, epoch, 0
            else:
                s.bad_evals += 1
        s.eval_due = False
        if improved:
            s.best_written = True
            self.save(self.run.best)
        self.run.append_metrics(record)
        self.scalars.dev(s.step, fields)
        self.run.log(f"epoch {epoch} step {s.step}: train loss {train_loss:.4f}, {text}"
                     + (" [green](best)[/]" if improved else ""))

    def patience_exhausted(self, last: bool = False) -> bool:
        """Whether to stop early; ``last``: the run's final evaluation, after which it ends anyway
        (not an early stop, and not reported as one)."""
        if self.state.bad_evals >= self.config.patience and not last:
            self.run.log(f"early stop: no better dev score in {self.config.patience} evaluations")
            return True
        return False

    # ------------------------------------------------------------------ updates

    def _loss_weight(self, weight: float):
        """What the task multiplies the loss by: ``weight``, times the loss scale under fp16."""
        if self.task.scaler is None:
            return weight
        # a fill on the device: torch.tensor(weight, device=...) would copy from the host and wait
        return self.task.scaler.scale(torch.full((), weight, device=self.task.device))

    def _mean_over_ranks(self, running: RunningLoss) -> float:
        """The running train loss over every rank's share of the batches since the epoch began."""
        total, n = self.world.sum(running.total(), running.count)
        return total / max(n, 1)

    def _epoch_updates(self, batches: list, first: int):
        """``(b, global batch, (own share, real), collated own share)`` for batches ``first`` on; the
        loader collates ahead of the updates."""
        task = self.task
        shares = [self.world.share(batch) for batch in batches[first:]]
        on_host = not task.device_collate
        loader = batch_loader(task.collate, [own for own, _ in shares],
                              self.config.workers(task.device) if on_host else 0,
                              pin_memory=on_host and task.device.type == "cuda")
        return zip(range(first, len(batches)), batches[first:], shares, loader)

    def update(self, batch, whole: list[int], own: list[int], real: bool, running: RunningLoss, epoch: int) -> float:
        """One update on this rank's share ``own`` (collated: ``batch``) of the global batch
        ``whole``; its loss joins ``running``. ``real``: ``own`` holds items (a rank left without
        any trains on a stand-in at weight 0). Returns the learning rate."""
        s, w, task = self.state, self.world, self.task
        if w.active:
            seed_everything(step_seed(self.config.seed, w.rank, s.step + 1))
        n = task.count(own)
        weight = w.size * n / task.count(whole) if real else 0.0
        lr = task.lr(s.step + 1, epoch)
        loss = train_step(task, batch, n, self._loss_weight(weight), lr, self.config.clip, w, self.average)
        if real:
            running.add(loss, n)
        s.step += 1
        return lr

    def _show(self, meter: EpochMeter, b: int, lr: float, epoch: int, eval_due: bool) -> None:
        """The bar, the log line and the TensorBoard scalars after update ``b`` of the epoch."""
        t, s, running = self.config, self.state, meter.running
        log_due = bool(t.log_every and s.step % t.log_every == 0)
        if log_due or eval_due or loss_due(meter.bar, meter.shown_at):
            meter.loss_text, meter.shown_at = f"loss {running.mean():.3f}", time.perf_counter()
        rate = (f"{meter.loss_text} lr {lr:.2e} "
                f"{running.count / max(time.perf_counter() - meter.tick, 1e-9):,.0f} {self.task.unit}/s")
        meter.bar.update(meter.row, completed=b + 1, rate=rate)
        if log_due:
            self.run.log(f"epoch {epoch + 1} batch {b + 1}/{meter.batches} step {s.step}: {rate}")
        if log_due or eval_due:
            self.scalars.train(s.step, running.mean(), lr)

    # ------------------------------------------------------------------ epochs

    def _redo_evaluation(self, epoch: int, n_batches: int, bar) -> bool:
        """The evaluation a resumed run was interrupted in, done again; whether the run stops."""
        s = self.state
        self.evaluate(epoch + 1, s.eval_train_loss, bar)
        stopped = self.patience_exhausted(last=epoch + 1 == self.config.epochs and s.batch_in_epoch == n_batches)
        if stopped:
            self.save_latest()
        return stopped

    def _after_update(self, meter: EpochMeter, epoch: int, b: int, eval_due: bool, train_loss: float) -> bool:
        """Evaluation, ``max_steps`` and mid-epoch checkpoints after update ``b``; whether to stop."""
        t, s, n = self.config, self.state, meter.batches
        stopped = False
        if eval_due:  # an evaluation may be interrupted: eval_due makes a resumed run redo it
            self.evaluate(epoch + 1, train_loss, meter.bar)
            stopped = self.patience_exhausted(last=epoch + 1 == t.epochs and b + 1 == n)
        if t.max_steps and s.step >= t.max_steps and not stopped:
            stopped = True
            if not s.best_written:
                self.evaluate(epoch + 1, self._mean_over_ranks(meter.running), meter.bar, final=True)
            self.run.log(f"stopped at train.max_steps={t.max_steps} (epoch {epoch + 1}, batch {b + 1}/{n})")
        due = stopped or (t.checkpoint_every and s.step % t.checkpoint_every == 0)
        if due and b + 1 < n:  # the epoch's end writes latest.pt
            self.save_latest()
        return stopped

    def run_epoch(self, bar) -> bool:
        """Train the current epoch from where the state is (a resumed run mid-epoch included);
        returns whether the run stops (patience, ``max_steps``)."""
        t, s = self.config, self.state
        epoch = s.epoch
        batches = self.task.batches(epoch)  # global batches: each rank trains on its share
        eval_points = {round(len(batches) * (k + 1) / t.evals_per_epoch) for k in range(t.evals_per_epoch)}
        row = bar.add_task(f"epoch {epoch + 1}/{t.epochs}", total=len(batches), completed=s.batch_in_epoch, rate="")
        self.task.model.train()
        meter = EpochMeter(bar, row, len(batches), RunningLoss(self.task.device))
        stopped = self._redo_evaluation(epoch, len(batches), bar) if s.eval_due else False
        first = len(batches) if stopped else s.batch_in_epoch  # stopped: no update
        for b, whole, (own, real), batch in self._epoch_updates(batches, first):
            train_loss = 0.0
            with self.interrupts.held():  # a checkpoint holds whole updates only
                lr = self.update(batch, whole, own, real, meter.running, epoch)
                s.batch_in_epoch = b + 1
                eval_due = b + 1 in eval_points
                self._show(meter, b, lr, epoch, eval_due)
                if eval_due:
                    s.eval_due = True  # before any collective that a lost rank could break
                    s.eval_train_loss = train_loss = self._mean_over_ranks(meter.running)
            if stopped := self._after_update(meter, epoch, b, eval_due, train_loss):
                break
        bar.remove_task(row)
        if s.batch_in_epoch >= len(batches):  # the epoch is complete
            s.epoch += 1
            s.batch_in_epoch = 0
            self.save_latest()
        return stopped

    def fit(self) -> dict:
        """Train until ``epochs``, ``max_steps`` or ``patience`` ends it; returns :meth:`finish`'s results.

        Ctrl-C (or SIGTERM) writes ``latest.pt`` and re-raises ``KeyboardInterrupt``.

        Raises:
            RunError: training ended before the first evaluation (no ``best.pt``).
        """
        t = self.config
        self.scalars = Scalars(t, self.run, enabled=self.world.main)
        self._clock = time.perf_counter() - self.state.seconds
        stopped = bool(t.max_steps and self.state.step >= t.max_steps)  # resumed with nothing left to do
        self.interrupts = Interrupts()
        try:
            with progress(transient=False) as bar:
                while self.state.epoch < t.epochs and not stopped:
                    stopped = self.run_epoch(bar)
        except KeyboardInterrupt:
            if self.interrupts.torn:  # this state is not that of a whole update: latest.pt stays as it was
                self.run.log(f"interrupted twice during update {self.state.step + 1}: {self.run.latest} not rewritten")
                raise
            self.save_latest()
            self.run.log(f"interrupted at step {self.state.step}: saved {self.run.latest}; continue with --resume")
            raise
        finally:
            self.scalars.close()
            self.interrupts.restore()
        return self.finish()

    def finish(self) -> dict:
        """Score the best checkpoint (the task's :meth:`RunTask.final_results`), write
        ``results.json`` and the log's results line, print the table and draw ``curves.png``.
        Returns the results; ``{}`` on torchrun ranks other than 0.

        Raises:
            RunError: no evaluation wrote ``best.pt``.
        """
        if not self.state.best_written:
            raise RunError("training ended before the first evaluation: no best checkpoint")
        if not self.world.main:
            return {}
        results, table, notes = self.task.final_results(self.run, self.state)
        atomic_write_json(self.run.results, results)
        if table is not None:
            console.print(table)
        for note in notes:
            console.print(note)
        self.run.log_results(results)
        draw_curves(self.run)
        return results


def open_run(cfg, run_path: str | Path, resume: bool, device_name: str,
             resumable: set[tuple[str, str]]) -> tuple[torch.device, RunDir, dict, World]:
    """What a training run does first: the device, torch's thread count, the run directory, the
    config as a dict (checked against the run's own config when resuming) and, under torchrun,
    the process group (:mod:`cn3.train.distributed`; rank 0's run directory alone writes)."""
    device = resolve_device(device_name)
    if cfg.train.num_threads:
        torch.set_num_threads(cfg.train.num_threads)
    if cfg.train.precision == "fp16" and device.type not in runtime.FP16_DEVICE_TYPES:
        raise ConfigError(f"train.precision=fp16 needs a CUDA device (this run is on {device.type}); "
                          "use train.precision=bf16 on CPU")
    world, device = init_world(device)
    if world.main and (note := slow_precision_note(cfg.train.precision, device)):
        console.print(f"[yellow]warning[/]: {note}")
    run = RunDir(run_path, writes=world.main)
    config_dict = to_dict(cfg)
    if resume and run.config.exists():
        check_resume_config(read_saved_config(type(cfg), run.config), config_dict, resumable)
    return device, run, config_dict, world


def train_kind(kind: RunKind, cfg, run_path: str | Path, resume: bool = False, device_name: str = "auto",
               command: str | None = None) -> dict:
    """Train ``cfg``, a resolved config of ``kind``, into ``run_path``; returns the final results (also
    in ``results.json``; under torchrun, ``{}`` on ranks other than 0). :func:`cn3.kinds.train` finds
    the kind of a config and calls this.

    Args:
        kind: what builds the run's task (:class:`cn3.runs.kinds.RunKind`).
        resume: go on from ``run_path``'s ``latest.pt``; the config may differ only in the kind's
            resumable keys (:mod:`cn3.train.kinds`).
        device_name: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
        command: the command line that started the run, recorded in a sentence run's ``results.json``.

    Raises:
        ConfigError: a bad config, or one that differs from the resumed run's.
        RunError: the run directory is busy, or training ended before any evaluation.
    """
    check_tensorboard(cfg.train)
    device, run, config_dict, world = open_run(cfg, run_path, resume, device_name, kind.resumable_changes())
    try:
        with run.training():  # one trainer per run directory
            task, what = kind.build_task(cfg, run, config_dict, world, resume, device, command)
            trainer = Trainer(task, cfg.train, run, config_dict, world)
            trainer.start(resume, what)
            with deterministic_algorithms(cfg.train.deterministic):
                return trainer.fit()
    finally:
        shutdown(world)
