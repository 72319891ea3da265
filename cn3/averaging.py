"""Exponential moving average of the weights (Polyak averaging), evaluated instead of the raw weights.

On small, noisy tasks the raw weights after any one update swing with the last batches; their
average over the last few hundred updates scores more steadily on dev and test. After update ``t``
(counted from 0), ``theta_avg <- d_t * theta_avg + (1 - d_t) * theta`` with
``d_t = min(decay, (1 + t) / (10 + t))``: the warm-up keeps the random initialisation from
dominating the first epochs (as ``tf.train.ExponentialMovingAverage`` with ``num_updates``).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel


def make_ema(model: nn.Module, decay: float) -> AveragedModel | None:
    """An averaged copy of ``model`` (``.module`` is the model to evaluate), or ``None`` if ``decay`` is 0.

    Call ``update_parameters(model)`` after every optimiser step; :func:`ema_state` and
    :func:`load_ema_state` checkpoint it.
    """
    if decay == 0.0:
        return None

    @torch.no_grad()
    def update(averaged: list[torch.Tensor], current: list[torch.Tensor], n_averaged: torch.Tensor) -> None:
        # t = updates averaged so far (AveragedModel copies the weights at t = 0), kept a tensor:
        # reading it into Python would wait for the GPU once per step
        t = n_averaged.double()
        weight = (1.0 - torch.clamp((1 + t) / (10 + t), max=decay)).to(averaged[0].dtype)
        for avg, cur in zip(averaged, current):
            avg.lerp_(cur, weight)

    return AveragedModel(model, multi_avg_fn=update, use_buffers=True)


def ema_state(ema: AveragedModel | None, model: nn.Module) -> dict:
    """Checkpoint entries besides ``model`` (which holds ``ema.module``'s weights, the ones evaluated):
    the raw weights training continues from, and the number of updates averaged."""
    if ema is None:
        return {"raw_model": None, "ema_updates": None}
    return {"raw_model": model.state_dict(), "ema_updates": int(ema.n_averaged)}


def load_ema_state(ckpt: dict, ema: AveragedModel | None, model: nn.Module) -> None:
    """Restore ``model`` (the raw weights) and ``ema`` from a checkpoint written with :func:`ema_state`."""
    if ema is None:
        model.load_state_dict(ckpt["model"])
        return
    model.load_state_dict(ckpt["raw_model"])
    ema.module.load_state_dict(ckpt["model"])
    ema.n_averaged.fill_(ckpt["ema_updates"])
