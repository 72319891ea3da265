"""The settings every training run shares (the ``train`` section of both kinds of config), apart from
the trainer that runs them (:mod:`cn3.train.trainer`), so that a config module reads them without
importing it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from cn3.config import ConfigError

#: ``train.device_batches: null`` pads the training split on a CUDA device up to this size
DEVICE_BATCHES_MIB = 1024


@dataclass
class LoopConfig:
    """The settings every training run shares (the ``train`` section of both configs).

    Args:
        seed: seeds the model's init, dropout and each epoch's batch order.
        epochs: at most this many passes over the training data.
        max_steps: stop after this many updates (0 = no limit); may change on ``--resume``.
        patience: stop after this many evaluations without a better dev score.
        clip: gradient-norm clipping (0 = off).
        evals_per_epoch: dev evaluations per epoch, evenly spaced (the last at the epoch's end).
        checkpoint_every: also write ``latest.pt`` every this many updates (0 = at evaluations,
            epoch ends, stops and Ctrl-C only).
        log_every: a log line with loss, learning rate and throughput every this many updates
            (0 = never; the progress bar shows them live in a terminal).
        num_threads: torch CPU threads (0 = torch's default).
        tensorboard: also write train loss and learning rate (at each log line and evaluation) and
            the dev scores (at each evaluation) as TensorBoard scalars into ``RUN/tensorboard/``;
            needs the ``tensorboard`` package (``pip install 'cn3[tensorboard]'``).
        precision: ``fp32``; ``bf16``: the training forward pass under ``torch.autocast`` in
            bfloat16 (weights, optimizer and gradients stay fp32; no loss scaling needed);
            ``fp16``: float16 autocast with a ``torch.amp.GradScaler`` (GPUs without fast bf16).
            Dev and test scoring stay fp32.
        loader_workers: ``DataLoader`` workers that collate the next batches while the model trains
            (pinned memory on CUDA). ``None`` = 2 on CUDA, 0 on CPU, where workers would take cores
            from torch's threads. Changes nothing that is computed.
        deterministic: run the loop with ``torch.use_deterministic_algorithms(True)`` (and
            ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` unless set), so that on CUDA two runs, or a run
            and its resume, agree bit for bit (CUDA's scatter-adds otherwise sum in a varying
            order). Slower on CUDA; CPU kernels are deterministic already.
        device_batches: sentence tasks: pad the training split once into tensors on the device and
            gather each batch there (:class:`cn3.sentence.batching.DeviceBatches`: the same batches,
            no host collation, no loader workers). ``None`` = on CUDA when the split takes at most
            ``DEVICE_BATCHES_MIB`` there; ``true`` asks for it on any device (on CPU it trades the
            padded split's memory for faster collation). Changes nothing that is computed;
            translation batches are always built on the host.
        compile: sentence tasks: the training forward, loss and backward compiled with
            ``torch.compile`` over batches padded to length buckets (:mod:`cn3.train.compiled`; CUDA
            graphs on CUDA). ``auto``: on CUDA, off on the CPU (where compiling costs more than it
            saves); ``on`` (YAML reads it as ``true``) or ``off`` (``false``) force it. The eager step
            is the reference: compiled training gives its losses and gradients to rounding.
            Translation runs, and runs with ``adversarial``, train eager (``on`` is an error there).
    """

    seed: int = 1
    epochs: int = 20
    max_steps: int = 0
    patience: int = 5
    clip: float = 5.0
    evals_per_epoch: int = 1
    checkpoint_every: int = 0
    log_every: int = 0
    num_threads: int = 0
    tensorboard: bool = False
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    loader_workers: int | None = None
    deterministic: bool = False
    device_batches: bool | None = None
    compile: bool | Literal["auto"] = "auto"

    def validate(self) -> None:
        if self.epochs < 1:
            raise ConfigError(f"train.epochs must be >= 1, got {self.epochs}")
        for name in ("max_steps", "patience", "checkpoint_every", "log_every", "num_threads"):
            if getattr(self, name) < 0:
                raise ConfigError(f"train.{name} must be >= 0, got {getattr(self, name)}")
        if self.evals_per_epoch < 1:
            raise ConfigError(f"train.evals_per_epoch must be >= 1, got {self.evals_per_epoch}")
        if self.clip < 0:
            raise ConfigError(f"train.clip must be >= 0, got {self.clip}")
        if self.loader_workers is not None and self.loader_workers < 0:
            raise ConfigError(f"train.loader_workers must be >= 0 (or null: 2 on CUDA, 0 on CPU), "
                              f"got {self.loader_workers}")

    def workers(self, device: torch.device) -> int:
        """``loader_workers``, or its default on ``device``."""
        if self.loader_workers is not None:
            return self.loader_workers
        return 2 if device.type == "cuda" else 0

    def use_device_batches(self, device: torch.device, nbytes: int) -> bool:
        """``device_batches`` for a training split of ``nbytes`` padded, or its default on ``device``."""
        if self.device_batches is not None:
            return self.device_batches
        return device.type == "cuda" and nbytes <= DEVICE_BATCHES_MIB * 2**20

