"""Adversarial training on word embeddings: the perturbation's size and direction, and the gradients
it adds, against a hand-written reference."""

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from cn3.config import ConfigError
from cn3.sentence.config import TrainConfig
from cn3.train.adversarial import EmbeddingAdversary


class Tiny(nn.Module):
    """Mean of the word vectors of each side -> linear -> cross-entropy; ``sides`` embeddings per item."""

    def __init__(self, sides: int = 1):
        super().__init__()
        torch.manual_seed(0)
        self.word = nn.Embedding(12, 5, padding_idx=0)
        self.out = nn.Linear(5 * sides, 3)

    def loss_from(self, vectors: list[torch.Tensor], ids: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        real = (ids != 0).unsqueeze(-1).float()
        pooled = [(v * real).sum(1) / real.sum(1) for v in vectors]
        return nn.functional.cross_entropy(self.out(torch.cat(pooled, -1)), y)

    def forward(self, ids, y, sides: int = 1):
        return SimpleNamespace(loss=self.loss_from([self.word(ids) for _ in range(sides)], ids, y))


IDS = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0], [8, 9, 10, 11]])  # (B, N), 0 = padding
Y = torch.tensor([0, 2, 1])


def grads(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def reference_grads(model: Tiny, eps: float, sides: int) -> dict[str, torch.Tensor]:
    """``L(e) + L(e + r)`` with ``r = eps * ||e|| * g / ||g||`` per sentence, by hand."""
    vectors = [model.word(IDS) for _ in range(sides)]
    loss = model.loss_from(vectors, IDS, Y)
    gs = torch.autograd.grad(loss, vectors, retain_graph=True)
    real = (IDS != 0).unsqueeze(-1).float()
    shifted = []
    for v, g in zip(vectors, gs):
        v, g = v.detach(), g * real  # r is a constant of the second loss
        r = eps * (v * real).flatten(1).norm(dim=1) / g.flatten(1).norm(dim=1)
        shifted.append(model.word(IDS) + r.view(-1, 1, 1) * g)
    total = loss + model.loss_from(shifted, IDS, Y)
    model.zero_grad()
    total.backward()
    return grads(model)


@pytest.mark.parametrize("sides", [1, 2])  # 2: a sentence pair calls the embedding twice per forward
def test_gradients_equal_the_clean_plus_adversarial_loss(sides):
    model = Tiny(sides)
    expected = reference_grads(model, 0.1, sides)
    model.zero_grad()
    adversary = EmbeddingAdversary(model.word, 0.1)
    adversary.backward(lambda: model(IDS, Y, sides))
    got = grads(model)
    for name in expected:
        assert torch.allclose(got[name], expected[name], atol=1e-6), name
    model.zero_grad()
    model(IDS, Y, sides).loss.backward()  # the hook is inert outside backward(): plain gradients differ
    assert not torch.allclose(grads(model)["out.weight"], expected["out.weight"])


def test_perturbation_is_relative_per_sentence_and_spares_padding():
    model = Tiny()
    adversary = EmbeddingAdversary(model.word, 0.05)
    with adversary._as("record"):
        out = model(IDS, Y)
    out.loss.backward()
    (e, ids), = adversary._recorded
    r = adversary._delta(e, ids)  # (B, N, d)
    assert torch.all(r[IDS == 0] == 0)
    real = (IDS != 0).unsqueeze(-1)
    assert torch.allclose(r.flatten(1).norm(dim=1), 0.05 * (e * real).flatten(1).norm(dim=1))
    assert torch.all((r * e.grad).sum((1, 2)) > 0)  # along the gradient: it raises the loss


def test_frozen_embeddings_are_still_perturbed():
    model = Tiny()
    model.word.weight.requires_grad_(False)
    adversary = EmbeddingAdversary(model.word, 0.1)
    adversary.backward(lambda: model(IDS, Y))
    assert model.word.weight.grad is None and model.out.weight.grad is not None
    assert adversary._deltas == []  # every perturbation was used


def test_negative_strength_is_a_named_error():
    with pytest.raises(ConfigError, match="train.adversarial"):
        TrainConfig(adversarial=-0.1).validate()
