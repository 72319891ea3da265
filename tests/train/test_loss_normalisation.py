"""One normalisation of the loss for every kind of run: a batch's loss per item or token, times the
rank's weight, whether the task's loss is a mean (sentences) or a sum (translation)."""

import pytest
import torch

from cn3.nmt.task import TranslationTask
from cn3.sentence.task import SentenceTask
from cn3.train.trainer import loss_for_backward, summed_loss


@pytest.mark.parametrize("weight", [1.0, 0.25, torch.tensor(512.0)])
def test_a_mean_and_a_sum_of_the_same_losses_give_the_same_gradient(weight):
    per_item = torch.tensor([0.5, 2.0, 1.25, 3.0], dtype=torch.float64)
    grads, sums = [], []
    for reduction, reduce in (("mean", torch.mean), ("sum", torch.sum)):
        x = per_item.clone().requires_grad_()
        loss = reduce(x)
        loss_for_backward(loss, reduction, len(per_item), weight).backward()
        grads.append(x.grad)
        sums.append(summed_loss(loss, reduction, len(per_item)))
    torch.testing.assert_close(grads[0], grads[1])
    torch.testing.assert_close(grads[0], torch.full((4,), float(weight) / 4, dtype=torch.float64))
    assert sums[0].item() == sums[1].item() == per_item.sum().item() and not sums[0].requires_grad


def test_each_kind_declares_what_its_loss_is_over():
    assert SentenceTask.loss_reduction == "mean" and TranslationTask.loss_reduction == "sum"
