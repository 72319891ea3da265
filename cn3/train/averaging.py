"""Exponential moving average of the weights (Polyak averaging), evaluated instead of the raw weights.

After update ``t`` (from 0), ``theta_avg <- d_t * theta_avg + (1 - d_t) * theta`` with
``d_t = min(decay, (1 + t) / (10 + t))``: the warm-up keeps the random initialisation from
dominating the first epochs (as ``tf.train.ExponentialMovingAverage`` with ``num_updates``).
"""

from __future__ import annotations

import copy
import itertools

import torch
from torch import nn


class WeightAverage:
    """The moving average of a model's parameters and buffers; ``module`` is the averaged copy to evaluate.

    The update count is kept on the host (``updates``), so an update never waits for the device.
    """

    def __init__(self, model: nn.Module, decay: float):
        self.module = copy.deepcopy(model)
        self.decay = decay
        self.updates = 0

    @torch.no_grad()
    def update_parameters(self, model: nn.Module) -> None:
        """Average in ``model``'s current weights (after every optimiser step); the first update
        copies them."""
        t = self.updates
        weight = 1.0 - min(self.decay, (1 + t) / (10 + t))  # 1 - d_t; lerp_ rounds it to the weights' dtype
        for avg, cur in zip(_tensors(self.module), _tensors(model), strict=True):
            if t == 0:
                avg.copy_(cur)
            else:
                avg.lerp_(cur, weight)
        self.updates += 1


def _tensors(model: nn.Module):
    return itertools.chain(model.parameters(), model.buffers())


def make_ema(model: nn.Module, decay: float) -> WeightAverage | None:
    """An averaged copy of ``model`` (``.module`` is the model to evaluate), or ``None`` if ``decay`` is 0.

    Call ``update_parameters(model)`` after every optimiser step; :func:`ema_state` and
    :func:`load_ema_state` checkpoint it.
    """
    return WeightAverage(model, decay) if decay else None


def ema_state(ema: WeightAverage | None, model: nn.Module) -> dict:
    """Checkpoint entries besides ``model`` (which holds ``ema.module``'s weights, the ones evaluated):
    the raw weights training continues from, and the number of updates averaged."""
    if ema is None:
        return {"raw_model": None, "ema_updates": None}
    return {"raw_model": model.state_dict(), "ema_updates": ema.updates}


def load_ema_state(ckpt: dict, ema: WeightAverage | None, model: nn.Module) -> None:
    """Restore ``model`` (the raw weights) and ``ema`` from a checkpoint written with :func:`ema_state`."""
    if ema is None:
        model.load_state_dict(ckpt["model"])
        return
    model.load_state_dict(ckpt["raw_model"])
    ema.module.load_state_dict(ckpt["model"])
    ema.updates = ckpt["ema_updates"]
