"""Adversarial training on the word embeddings (Miyato et al., 2017), ``train.adversarial``.

Every update adds a second loss on the same batch, each sentence's word vectors ``e`` moved in the
direction that raises the loss most (to first order):

    g     = d L(e) / d e                                  (from the clean loss's backward pass)
    r_adv = eps * ||e|| * g / ||g||                       (norms per sentence, over its real words)
    loss  = L(e) + L(e + r_adv)

Scaling by ``||e||`` replaces Miyato et al.'s embedding normalisation (a fixed-size perturbation
could be outgrown by longer vectors) without changing the model: ``eps`` is relative (0.05 = 5%).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from data_prep.vocab import PAD_ID


class EmbeddingAdversary:
    """Perturbs the outputs of ``embedding`` along the gradient of the clean loss.

    Args:
        embedding: the word embedding (called once per side: twice for a sentence pair).
        epsilon: the perturbation's size relative to each sentence's embedding norm.
    """

    def __init__(self, embedding: nn.Embedding, epsilon: float):
        self.epsilon = epsilon
        self._mode: str | None = None
        self._recorded: list[tuple[Tensor, Tensor]] = []  # (output (B, N, d), ids (B, N)) per call
        self._deltas: list[Tensor] = []
        embedding.register_forward_hook(self._hook)

    def _hook(self, module: nn.Module, inputs: tuple[Tensor], output: Tensor) -> Tensor | None:
        if self._mode == "record":
            if not output.requires_grad:  # frozen embeddings: the gradient is still wanted
                output = output.detach().requires_grad_()
            output.retain_grad()
            self._recorded.append((output, inputs[0]))
            return output
        if self._mode == "perturb":
            return output + self._deltas.pop(0)
        return None

    @contextmanager
    def _as(self, mode: str) -> Iterator[None]:
        self._mode = mode
        try:
            yield
        finally:
            self._mode = None

    @torch.no_grad()
    def _delta(self, e: Tensor, ids: Tensor) -> Tensor:
        """``r_adv`` for one call's output: ``eps * ||e|| * g / ||g||`` per sentence."""
        real = (ids != PAD_ID).unsqueeze(-1)  # (B, N, 1)
        g = (e.grad if e.grad is not None else torch.zeros_like(e)) * real  # (B, N, d)
        e_norm = (e * real).flatten(1).norm(dim=1)  # (B,)
        g_norm = g.flatten(1).norm(dim=1).clamp_min(1e-12)  # (B,)
        return (self.epsilon * e_norm / g_norm).view(-1, 1, 1) * g  # (B, N, d)

    def backward(self, forward: Callable[[], object]) -> object:
        """Run ``forward()`` (returns an object with ``.loss``), then backward the clean and the
        adversarial loss; gradients accumulate in the parameters. Returns the clean output."""
        self._recorded = []
        with self._as("record"):
            out = forward()
        out.loss.backward()
        self._deltas = [self._delta(e, ids) for e, ids in self._recorded]
        self._recorded = []
        with self._as("perturb"):
            forward().loss.backward()
        return out
