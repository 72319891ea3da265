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
