"""One training loop for every model: sentence tasks (``cn3 train``) and translation (``cn3 nmt train``).

A :class:`TaskAdapter` supplies what differs between tasks (the model, each epoch's batches, the
loss of a batch, evaluation, the learning rate, what a checkpoint carries besides the common keys,
the final report); :func:`run_loop` does the rest, identically for both:

* updates with gradient clipping, progress with throughput, a log line every ``log_every`` steps;
* ``evals_per_epoch`` evaluations per epoch, ``best.pt`` at each improvement, early stopping after
  ``patience`` evaluations without one, ``max_steps``;
* ``latest.pt`` every ``checkpoint_every`` steps, at every epoch end, at a stop and on Ctrl-C or
  SIGTERM, with everything resuming needs. ``best.pt`` leaves out the optimizer and RNG states,
  which only resuming reads;
* at the end, ``curves.png`` from ``metrics.jsonl`` (:mod:`cn3.curves`); under ``tensorboard``,
  the same scalars as they come, into ``RUN/tensorboard/``.

Exact resume: each epoch's batch order is a pure function of ``(seed, epoch)``; a checkpoint stores
the weights, optimizer, every RNG stream, the epoch, the batches done in it and whether an
evaluation was due, so ``--resume`` replays nothing and skips nothing, an interrupted evaluation
included.

The device is not waited for at every update: batches are collated by a ``DataLoader`` (in worker
processes and pinned memory on CUDA, ``train.loader_workers``) and copied without blocking, or
gathered on the device from the split padded there once (``train.device_batches``), the
running loss is summed on the device (:class:`RunningLoss`), and nothing reads a tensor's value
until a log line, an evaluation or the progress display needs the loss (``tests/test_host_sync.py``
counts these waits). One wait per update remains under ``fp16``: ``GradScaler.step`` reads its
inf/NaN check.
"""

from __future__ import annotations

import importlib
import math
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import torch

import cn3
from cn3.bucketing import batch_loader
from cn3.config import ConfigError
from cn3.distributed import SINGLE, World, check_world_size, step_seed
from cn3.run_dir import RunDir
from cn3.loop_config import LoopConfig
from cn3.runtime import plain_checkpoint, restore_checkpoint, rng_state, seed_everything
from cn3.util.atomic import atomic_torch_save
from cn3.util.console import progress



def make_optimizer(model: torch.nn.Module, name: str, lr: float, weight_decay: float = 0.0,
                   betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> torch.optim.Optimizer:
    """``adadelta`` (the CN3 paper: rho 0.95, eps 1e-6), ``adam`` or ``sgd`` over the trainable parameters."""
    params = [p for p in model.parameters() if p.requires_grad]
    if name == "adadelta":
        return torch.optim.Adadelta(params, lr=lr, rho=0.95, eps=1e-6, weight_decay=weight_decay)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=weight_decay)
    raise ConfigError(f"unknown optimizer {name!r} (adadelta, adam, sgd)")


class TaskAdapter(Protocol):
    """What a task gives the loop (see the module docstring).

    Attributes:
        model: the trained module; ``evaluated``: the weights evaluation scores and ``best.pt``
            keeps (the model itself, or its moving average).
        optimizer: built over ``model``'s parameters.
        ema: the weight average (:class:`cn3.averaging.WeightAverage`) or ``None``.
        scaler: the loss scaler of an ``fp16`` run (:func:`cn3.runtime.make_scaler`) or ``None``.
        device: where the model is.
        unit: what the throughput counts (``items``, ``tgt tok``).
        device_collate: :meth:`collate` builds batches on ``device`` itself
            (:class:`cn3.sentence.batching.DeviceBatches`): no loader workers, no pinned memory.
    """

    model: torch.nn.Module
    evaluated: torch.nn.Module
    optimizer: torch.optim.Optimizer
    ema: torch.nn.Module | None
    scaler: torch.amp.GradScaler | None
    device: torch.device
    unit: str
    device_collate: bool

    def batches(self, epoch: int) -> list:
        """The epoch's batches (lists of item indices), a pure function of ``(seed, epoch)``."""

    def collate(self, indices: list[int]):
        """The batch of the items ``indices``, with ``.to(device)`` and ``.pin_memory()``, built on
        the host (in the batch loader's workers: it must be picklable and draw no random numbers),
        or on the device under ``device_collate``."""

    def count(self, indices: list[int]) -> int:
        """What the batch's loss is a mean over (items, target tokens), from the indices alone:
        weighs the ranks' shares of a batch under torchrun."""

    def train_step(self, batch, count: int, weight: float | torch.Tensor = 1.0) -> torch.Tensor:
        """Forward and backward on a collated batch (of ``count`` items or tokens, its
        :meth:`count`), the loss multiplied by ``weight`` before the backward pass. Returns the
        loss summed over ``count``, detached, float64, on the device: the running mean reads it
        only when it is shown."""

    def lr(self, step: int, epoch: int) -> float:
        """The learning rate of update ``step`` (from 1) in ``epoch`` (from 0)."""

    def after_update(self) -> None:
        """After each optimizer step (the weight average's update)."""

    def evaluate(self, bar) -> tuple[float, dict, str]:
        """``(dev score, record fields, log text)``; higher scores are better."""

    def checkpoint_extra(self, full: bool) -> dict:
        """Task keys of a checkpoint (``full``: ``latest.pt``, which resuming reads)."""

    def report(self, run: RunDir, state: dict) -> dict:
        """The final scores of the best checkpoint: ``results.json`` and the table."""


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


def draw_curves(run: RunDir) -> None:
    """``RUN/curves.png`` from ``metrics.jsonl``. A figure is a convenience: a failure to draw it
    (a broken matplotlib, a full disk) is a warning in the log, never a failed training."""
    from cn3.curves import plot_runs

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
        """``loss``: summed over ``count`` items or tokens (:meth:`TaskAdapter.train_step`)."""
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


def new_state(world: World = SINGLE) -> dict:
    """``best_written``: ``best.pt`` exists (in the state, so that every torchrun rank knows it
    without a shared file system); ``world_size``: the processes that train the run."""
    return {"epoch": 0, "batch_in_epoch": 0, "step": 0, "best_score": -math.inf, "best_step": 0,
            "best_epoch": 0, "bad_evals": 0, "eval_due": False, "eval_train_loss": 0.0, "seconds": 0.0,
            "best_written": False, "world_size": world.size}


def start(adapter: TaskAdapter, run: RunDir, resume: bool, what: str, world: World = SINGLE) -> dict:
    """The loop state to start from: ``latest.pt``'s (weights, optimizer, average and RNG streams
    restored) when resuming, else a new one; says which in the log. ``what``: the run, for the log.
    A resumed run must have the number of processes it was started with."""
    if resume:
        state = new_state()
        saved = restore_checkpoint(run.latest, adapter.model, adapter.optimizer, adapter.ema, adapter.scaler)
        state.update(saved)
        check_world_size(state["world_size"], world, run.path)
        if "best_written" not in saved:  # written by 0.3.0
            state["best_written"] = run.best.is_file()
        run.log(f"resuming {run.path} at epoch {state['epoch'] + 1}, batch {state['batch_in_epoch']}, "
                f"step {state['step']} (best dev {state['best_score']:.2f})")
        return state
    run.log(f"cn3 {cn3.__version__}: training {what} into {run.path}")
    return new_state(world)


def run_loop(adapter: TaskAdapter, t: LoopConfig, run: RunDir, config_dict: dict, model_args: dict,
             state: dict, world: World = SINGLE) -> dict:
    """Train until ``epochs``, ``max_steps`` or ``patience`` ends it; returns the adapter's final report
    (after which ``curves.png`` is drawn).

    ``state`` is :func:`new_state` or a resumed one. Ctrl-C (or SIGTERM) writes ``latest.pt`` and
    re-raises ``KeyboardInterrupt``. Under torchrun (``world``, :mod:`cn3.distributed`) each rank
    trains on its share of every batch, rank 0 alone evaluates and writes, and the other ranks
    return ``{}``.
    """
    model, optimizer, scaler = adapter.model, adapter.optimizer, adapter.scaler
    scalars = Scalars(t, run, enabled=world.main)

    def checkpoint(path: Path) -> None:
        if not world.main:
            return
        full = path == run.latest
        atomic_torch_save(path, plain_checkpoint({
            "cn3_version": cn3.__version__, "config": config_dict, "model_args": model_args,
            "model": adapter.evaluated.state_dict(),
            "optimizer": optimizer.state_dict() if full else None,
            "scaler": scaler.state_dict() if full and scaler is not None else None,
            "rng": rng_state() if full else None, "state": dict(state), **adapter.checkpoint_extra(full)},
            path.name))

    def elapsed() -> float:
        state["seconds"] = time.perf_counter() - start_time
        return state["seconds"]

    def evaluate(epoch: int, train_loss: float, bar, final: bool = False) -> None:
        """A dev evaluation (by rank 0, whose state the other ranks then take). ``final``: a stop
        before any evaluation wrote ``best.pt``; it writes one without counting for patience (the
        state stays that of the uninterrupted run)."""
        if world.main:
            dev_evaluation(epoch, train_loss, bar, final)
        state.update(world.broadcast(state))

    def dev_evaluation(epoch: int, train_loss: float, bar, final: bool) -> None:
        score, fields, text = adapter.evaluate(bar)
        score = float(score)  # a numpy scalar (seqeval's F1) would make the checkpoint unloadable with weights_only
        model.train()
        record = {"epoch": epoch, "batch": state["batch_in_epoch"], "step": state["step"],
                  "train_loss": round(train_loss, 4), **fields,
                  "seconds": round(elapsed(), 1)}
        if final:
            record["stop"] = True
            improved = not state["best_written"]
        else:
            improved = score > state["best_score"]
            if improved:
                state.update(best_score=score, best_step=state["step"], best_epoch=epoch, bad_evals=0)
            else:
                state["bad_evals"] += 1
        state["eval_due"] = False
        if improved:
            state["best_written"] = True
            checkpoint(run.best)
        run.append_metrics(record)
        scalars.dev(state["step"], fields)
        run.log(f"epoch {epoch} step {state['step']}: train loss {train_loss:.4f}, {text}"
                + (" [green](best)[/]" if improved else ""))

    def patience_exhausted(last: bool = False) -> bool:
        """Whether to stop early; ``last``: the run's final evaluation, after which it ends anyway
        (not an early stop, and not reported as one)."""
        if state["bad_evals"] >= t.patience and not last:
            run.log(f"early stop: no better dev score in {t.patience} evaluations")
            return True
        return False

    def loss_weight(weight: float):
        """What the adapter multiplies the loss by: ``weight``, times the loss scale under fp16."""
        if scaler is None:
            return weight
        # a fill on the device: torch.tensor(weight, device=...) would copy from the host and wait
        return scaler.scale(torch.full((), weight, device=adapter.device))

    def mean_over_ranks(running: RunningLoss) -> float:
        """The running train loss over every rank's share of the batches since the epoch began."""
        total, n = world.sum(running.total(), running.count)
        return total / max(n, 1)

    def epoch_updates(batches: list, first: int):
        """``(b, global batch, (own share, real), collated own share)`` for batches ``first`` on;
        the loader collates ahead of the updates."""
        shares = [world.share(batch) for batch in batches[first:]]
        on_host = not adapter.device_collate
        loader = batch_loader(adapter.collate, [own for own, _ in shares], t.workers(adapter.device) if on_host else 0,
                              pin_memory=on_host and adapter.device.type == "cuda")
        return zip(range(first, len(batches)), batches[first:], shares, loader)

    def update(batch, whole: list[int], own: list[int], real: bool, running: RunningLoss, epoch: int) -> float:
        """One optimizer step on this rank's share ``own`` (collated: ``batch``) of the global batch
        ``whole``; its loss joins ``running``. Returns the learning rate."""
        optimizer.zero_grad(set_to_none=True)
        if world.active:
            seed_everything(step_seed(t.seed, world.rank, state["step"] + 1))
        n = adapter.count(own)
        weight = world.size * n / adapter.count(whole) if real else 0.0
        loss = adapter.train_step(batch, n, loss_weight(weight))
        world.average_gradients(model)
        if scaler is not None:
            scaler.unscale_(optimizer)  # clip the true gradients
        if t.clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), t.clip)
        lr = adapter.lr(state["step"] + 1, epoch)
        for group in optimizer.param_groups:
            group["lr"] = lr
        if scaler is None:
            optimizer.step()
        else:  # skipped when a gradient is inf/NaN; the scale then backs off
            scaler.step(optimizer)
            scaler.update()
        adapter.after_update()
        if real:  # a rank left without items trained on a stand-in at weight 0 (World.share)
            running.add(loss, n)
        return lr

    start_time = time.perf_counter() - state["seconds"]
    stopped = bool(t.max_steps and state["step"] >= t.max_steps)  # resumed with nothing left to do
    interrupts = Interrupts()
    try:
        with progress(transient=False) as bar:
            while state["epoch"] < t.epochs and not stopped:
                epoch = state["epoch"]
                batches = adapter.batches(epoch)  # global batches: each rank trains on its share
                eval_points = {round(len(batches) * (k + 1) / t.evals_per_epoch) for k in range(t.evals_per_epoch)}
                task = bar.add_task(f"epoch {epoch + 1}/{t.epochs}", total=len(batches),
                                    completed=state["batch_in_epoch"], rate="")
                model.train()
                running, tick = RunningLoss(adapter.device), time.perf_counter()
                loss_text, shown_at = "loss –", tick  # the running loss as last read
                if state["eval_due"]:  # interrupted during an evaluation: do it again
                    evaluate(epoch + 1, state["eval_train_loss"], bar)
                    stopped = patience_exhausted(last=epoch + 1 == t.epochs
                                                 and state["batch_in_epoch"] == len(batches))
                    if stopped:
                        elapsed()
                        checkpoint(run.latest)
                first = len(batches) if stopped else state["batch_in_epoch"]  # stopped: no update
                for b, whole, (own, real), batch in epoch_updates(batches, first):
                    with interrupts.held():  # a checkpoint holds whole updates only
                        lr = update(batch, whole, own, real, running, epoch)
                        state["step"] += 1
                        state["batch_in_epoch"] = b + 1
                        log_due = bool(t.log_every and state["step"] % t.log_every == 0)
                        eval_due = b + 1 in eval_points
                        if log_due or eval_due or loss_due(bar, shown_at):
                            loss_text, shown_at = f"loss {running.mean():.3f}", time.perf_counter()
                        rate = (f"{loss_text} lr {lr:.2e} "
                                f"{running.count / max(time.perf_counter() - tick, 1e-9):,.0f} {adapter.unit}/s")
                        bar.update(task, completed=b + 1, rate=rate)
                        if log_due:
                            run.log(f"epoch {epoch + 1} batch {b + 1}/{len(batches)} step {state['step']}: {rate}")
                        if log_due or eval_due:
                            scalars.train(state["step"], running.mean(), lr)
                        if eval_due:
                            state["eval_due"] = True  # before any collective that a lost rank could break
                            state["eval_train_loss"] = train_loss = mean_over_ranks(running)
                    if eval_due:  # an evaluation may be interrupted: eval_due makes a resumed run redo it
                        evaluate(epoch + 1, train_loss, bar)
                        stopped = patience_exhausted(last=epoch + 1 == t.epochs and b + 1 == len(batches))
                    if t.max_steps and state["step"] >= t.max_steps and not stopped:
                        stopped = True
                        if not state["best_written"]:
                            evaluate(epoch + 1, mean_over_ranks(running), bar, final=True)
                        run.log(f"stopped at train.max_steps={t.max_steps} (epoch {epoch + 1}, batch "
                                f"{b + 1}/{len(batches)})")
                    due = stopped or (t.checkpoint_every and state["step"] % t.checkpoint_every == 0)
                    if due and b + 1 < len(batches):  # the epoch's end writes latest.pt just below
                        elapsed()
                        checkpoint(run.latest)
                    if stopped:
                        break
                bar.remove_task(task)
                if state["batch_in_epoch"] >= len(batches):  # the epoch is complete
                    state["epoch"] += 1
                    state["batch_in_epoch"] = 0
                    elapsed()
                    checkpoint(run.latest)
    except KeyboardInterrupt:
        if interrupts.torn:  # latest.pt as last written stays: this state is not that of a whole update
            run.log(f"interrupted twice during update {state['step'] + 1}: {run.latest} not rewritten")
            raise
        elapsed()
        checkpoint(run.latest)
        run.log(f"interrupted at step {state['step']}: saved {run.latest}; continue with --resume")
        raise
    finally:
        scalars.close()
        interrupts.restore()
    if not state["best_written"]:
        raise ConfigError("training ended before the first evaluation: no best checkpoint")
    if not world.main:
        return {}
    report = adapter.report(run, state)
    draw_curves(run)
    return report
