"""Multi-process training under ``torchrun``: one process per core group or GPU, one training run.

    torchrun --standalone --nproc_per_node 2 -m cli train --task trec
    torchrun --standalone --nproc_per_node 4 -m cli nmt train --config cn3/configs/nmt/small.yaml

:func:`init_world` reads torchrun's ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and joins the process
group (``gloo`` on CPU, ``nccl`` on CUDA, each rank on ``cuda:LOCAL_RANK``); without them
:data:`SINGLE` is a world of one.

* **Every global batch is the single-process batch**: each rank builds the same epoch order and
  takes ``batch[rank::world]``, its loss weighted by its share of the batch's items (sentence tasks)
  or target tokens (translation). So batch sizes mean what they mean in one process and a run's
  updates do not depend on the number of processes (up to rounding and dropout draws).
* **Gradients are averaged by one flat all-reduce after backward**, not by
  ``DistributedDataParallel``: the models return structured outputs, the adversarial trainer runs
  two backward passes per update, and some encoders leave parameters unused on some batches. What
  is given up (overlapping communication with backward) matters only for far larger models.
* **Dropout streams are reseeded per update** from ``(seed, rank, step)`` (:func:`step_seed`), so a
  checkpoint needs no per-rank RNG state.
* **Rank 0 alone writes and evaluates**, and broadcasts the loop state after each evaluation so
  every rank takes the same early-stopping decision; the other ranks print only errors.
* **Resume needs the same number of processes** (:func:`check_world_size`): the dropout draws
  depend on it, and ``--resume`` promises the uninterrupted run.

Multi-node is torchrun's own rendezvous; the run directory and prepared data must then be on a
file system every node sees.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from cn3.config import ConfigError


@dataclass(frozen=True)
class World:
    """This process's place in the training job: ``rank`` of ``size`` processes."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        """Rank 0: the process that evaluates and writes."""
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.size > 1

    def barrier(self) -> None:
        if self.active:
            dist.barrier()

    def share(self, batch: list[int]) -> tuple[list[int], bool]:
        """This rank's strided slice of a global batch: ``(indices, real)``. A batch with fewer items
        than processes leaves some ranks without one: they run its first item with ``real=False``
        (weight 0), because every rank must take part in the gradient all-reduce."""
        own = batch[self.rank :: self.size]
        return (own, True) if own else (batch[:1], False)

    def average_gradients(self, model: torch.nn.Module) -> None:
        """Sum every trainable parameter's gradient over the ranks, divided by the world size
        (a missing gradient counts as zeros, and comes back as a tensor)."""
        if not self.active:
            return
        params = [p for p in model.parameters() if p.requires_grad]
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = _flatten_dense_tensors(grads)
        dist.all_reduce(flat)
        flat.div_(self.size)
        for p, g in zip(params, _unflatten_dense_tensors(flat, grads)):
            p.grad = g

    def sum(self, *values: float) -> tuple[float, ...]:
        """Each value summed over the ranks (float64, on the process group's device)."""
        if not self.active:
            return values
        t = torch.tensor(values, dtype=torch.float64, device=self._device())
        dist.all_reduce(t)
        return tuple(t.tolist())

    def broadcast(self, obj):
        """Rank 0's ``obj`` on every rank (picklable objects)."""
        if not self.active:
            return obj
        box = [obj if self.main else None]
        dist.broadcast_object_list(box, src=0, device=self._device())
        return box[0]

    def _device(self) -> torch.device:
        return torch.device("cuda", self.local_rank) if dist.get_backend() == "nccl" else torch.device("cpu")


SINGLE = World()


def step_seed(seed: int, rank: int, step: int) -> int:
    """The seed of update ``step`` (from 1) on ``rank``: distinct per rank and step, stable across resumes."""
    return (seed * 1_000_003 + rank * 7_919 + step) % (2**63 - 1)


def world_from_env() -> World:
    """The torchrun world from the environment; :data:`SINGLE` outside torchrun."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size <= 1:
        return SINGLE
    return World(rank=int(os.environ["RANK"]), size=size, local_rank=int(os.environ.get("LOCAL_RANK", "0")))


def init_world(device: torch.device) -> tuple[World, torch.device]:
    """Join torchrun's process group when launched by it: ``(world, device)``, the device being
    ``cuda:LOCAL_RANK`` for a CUDA run. A no-op (``SINGLE``, ``device``) otherwise."""
    world = world_from_env()
    if not world.active:
        return world, device
    if device.type == "cuda":
        device = torch.device("cuda", world.local_rank)
        torch.cuda.set_device(device)
    elif device.type != "cpu":
        raise ConfigError(f"multi-process training runs on cpu or cuda, not {device.type}")
    if not dist.is_initialized():
        # evaluation runs on rank 0 while the others wait in a broadcast: allow a long one
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=timedelta(hours=2))
    if not world.main:
        from cn3.util.console import console

        console.quiet = True  # one log, rank 0's (cli.errors still prints a rank's own error)
    return world, device


def check_world_size(saved: int, world: World, path) -> None:
    """``--resume`` with another number of processes than the run was started with: a ConfigError."""
    if saved != world.size:
        launch = ("cn3 train ... --resume (one process)" if saved == 1
                  else f"torchrun --nproc_per_node {saved} -m cli ... --resume")
        raise ConfigError(f"cannot resume {path}: it was trained by {saved} process(es), this is {world.size}; "
                          f"resume it as it was started: {launch}")


def shutdown(world: World) -> None:
    if world.active and dist.is_initialized():
        dist.destroy_process_group()
