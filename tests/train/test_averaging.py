"""The weight average: its update rule, and off when the decay is 0."""

import torch

from cn3.train.averaging import make_ema


def test_ema_follows_the_warmed_up_decay():
    model = torch.nn.Linear(2, 1, bias=False)
    ema = make_ema(model, decay=0.5)
    expected = None
    for t, value in enumerate([1.0, 3.0, 5.0, 7.0]):
        model.weight.data.fill_(value)
        ema.update_parameters(model)
        if t == 0:
            expected = value  # the first update copies
        else:
            d = min(0.5, (1 + t) / (10 + t))
            expected = d * expected + (1 - d) * value
        assert torch.allclose(ema.module.weight, torch.full((1, 2), expected))
    assert expected != 7.0


def test_no_average_when_the_decay_is_zero():
    assert make_ema(torch.nn.Linear(2, 1), 0.0) is None


def test_the_average_carries_the_weights_but_not_the_hooks_of_the_model():
    """A hook registered on the model (the adversary's, a probe's) stays with the model trained: the
    averaged copy, built after it, runs none."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    calls = []
    model[0].register_forward_hook(lambda module, args, out: calls.append(out))
    model[1].register_forward_pre_hook(lambda module, args: calls.append(args))
    ema = make_ema(model, decay=0.5)
    x = torch.ones(1, 2)
    assert torch.equal(ema.module(x), model(x)) and len(calls) == 2  # the model's two hooks only
    assert ema.module[0].weight is not model[0].weight
    ema.load({k: v + 1 for k, v in model.state_dict().items()}, updates=7)
    assert ema.updates == 7 and torch.equal(ema.module[0].weight, model[0].weight + 1)
