"""Exponential moving average of the weights (Polyak averaging), evaluated instead of the raw weights.

After update ``t`` (from 0), ``theta_avg <- d_t * theta_avg + (1 - d_t) * theta`` with
``d_t = min(decay, (1 + t) / (10 + t))``: the warm-up keeps the random initialisation from
dominating the first epochs (as ``tf.train.ExponentialMovingAverage`` with ``num_updates``).
"""

from __future__ import annotations

import copy
import itertools
from collections import OrderedDict

import torch
from torch import nn


class WeightAverage:
    """The moving average of a model's parameters and buffers; ``module`` is the averaged copy to evaluate.

    The copy has the model's modules and weights but none of the hooks registered on them (the
    adversary's, a probe's): those belong to the model trained. The update count is kept on the host
    (``updates``), so an update never waits for the device.
    """

    def __init__(self, model: nn.Module, decay: float):
        no_hooks = {id(hooks): OrderedDict() for module in model.modules()
                    for hooks in (module._forward_hooks, module._forward_pre_hooks)}
        self.module = copy.deepcopy(model, memo=no_hooks)
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

    def load(self, weights: dict, updates: int) -> None:
        """Take a checkpoint's averaged ``weights`` (its ``model``) and its count of ``updates``."""
        self.module.load_state_dict(weights)
        self.updates = updates


def _tensors(model: nn.Module):
    return itertools.chain(model.parameters(), model.buffers())


def make_ema(model: nn.Module, decay: float) -> WeightAverage | None:
    """An averaged copy of ``model`` (``.module`` is the model to evaluate), or ``None`` if ``decay`` is 0.

    Call ``update_parameters(model)`` after every optimiser step. The Trainer owns it
    (:class:`cn3.train.trainer.Trainer`) and keeps it in ``latest.pt`` (``model``: the average;
    ``raw_model``, ``ema_updates``: :class:`cn3.train.checkpoint.Checkpoint`).
    """
    return WeightAverage(model, decay) if decay else None
