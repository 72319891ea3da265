"""The convolutional baselines (Kim 2014; Collobert et al. 2011) and the neural bag of words."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from cn3.encoders import EncoderArgs, build_encoder, get_spec
from cn3.encoders.bag import NBOW
from cn3.encoders.cnn import KimCNN, WindowCNN
from cn3.encoders.options import CNNOptions
from cn3.encoders.registry import LEVELS

D = 3


def _kim(seed: int = 0, widths=(2, 3), filters: int = 2) -> KimCNN:
    torch.manual_seed(seed)
    enc = KimCNN(D, list(widths), filters).double()
    # Kim's init (+-0.01, zero bias) keeps every map tiny; a wider draw with non-zero biases makes the
    # reference comparison and the ReLU cut meaningful.
    for conv in enc.convs:
        torch.nn.init.uniform_(conv.weight, -1.0, 1.0)
        torch.nn.init.uniform_(conv.bias, -0.5, 0.5)
    return enc.eval()


def _window(seed: int = 0, hidden: int = 4, window: int = 3) -> WindowCNN:
    torch.manual_seed(seed)
    return WindowCNN(D, hidden, window).double().eval()


def _sentence(n: int = 4, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, n, D, generator=g, dtype=torch.float64)


def _word(x: torch.Tensor, j: int) -> list[float]:
    """Word ``j`` of the single sentence ``x``, a zero vector outside it."""
    return [0.0] * D if j < 0 or j >= x.shape[1] else [float(x[0, j, c]) for c in range(D)]


def test_kim_literal_reference():
    enc, x = _kim(), _sentence()
    n = x.shape[1]
    h, _ = enc(x, torch.ones(1, n, dtype=torch.bool))
    ref = []
    for i in range(n):
        row = []
        for w, conv in zip(enc.widths, enc.convs):
            left = (w - 1) // 2  # same padding: the window at token i starts at i - (w-1)//2
            for f in range(conv.out_channels):
                s = float(conv.bias[f].detach())
                for k in range(w):
                    word = _word(x, i - left + k)
                    s += sum(float(conv.weight[f, c, k].detach()) * word[c] for c in range(D))
                row.append(max(s, 0.0))  # c_i = ReLU(w . x_{i:i+w-1} + b)
        ref.append(row)
    assert_close(h[0], torch.tensor(ref, dtype=torch.float64))
    assert enc.out_dim == enc.pool_dim == 2 * 2 == h.shape[-1]


def test_window_literal_reference():
    enc, x = _window(window=3), _sentence() * 4  # large enough for HardTanh to clip some units
    n, conv = x.shape[1], enc.conv
    h, _ = enc(x, torch.ones(1, n, dtype=torch.bool))
    ref = []
    for i in range(n):
        # f^1: the concatenated window [x_{i-1}; x_i; x_{i+1}], zero vectors beyond the edges
        f1 = [v for k in (-1, 0, 1) for v in _word(x, i + k)]
        row = []
        for o in range(enc.out_dim):
            m2 = [float(conv.weight[o, c, k].detach()) for k in range(3) for c in range(D)]  # row o of M^2
            f2 = sum(a * b for a, b in zip(m2, f1)) + float(conv.bias[o].detach())
            row.append(min(max(f2, -1.0), 1.0))  # f^3 = HardTanh(f^2)
        ref.append(row)
    assert_close(h[0], torch.tensor(ref, dtype=torch.float64))


@pytest.mark.parametrize("make", [_kim, _window], ids=["kim", "window"])
def test_padding_invariance_and_zero_padding(make):
    enc = make()
    short, long_ = _sentence(3, seed=2), _sentence(6, seed=3)
    alone, _ = enc(short, torch.ones(1, 3, dtype=torch.bool))
    x = torch.zeros(2, 6, D, dtype=torch.float64)
    x[0, :3], x[1] = short[0], long_[0]
    x[0, 3:] = 7.0  # garbage under the padding must not leak into real positions
    mask = torch.tensor([[True] * 3 + [False] * 3, [True] * 6])
    h, _ = enc(x, mask)
    assert_close(h[0, :3], alone[0])
    assert h[0, 3:].abs().max() == 0
    if isinstance(enc, KimCNN):
        assert_close(enc.pool(h, mask, {})[0], enc.pool(alone, torch.ones(1, 3, dtype=torch.bool), {})[0])


def test_kim_pool_is_max_over_real_positions():
    enc = _kim()
    h = torch.tensor([[[-3.0, -1.0, 2.0, -5.0], [-2.0, -4.0, 1.0, -6.0], [0.0, 0.0, 0.0, 0.0]],
                      [[0.0] * 4] * 3], dtype=torch.float64)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    pooled = enc.pool(h, mask, {})
    # all-negative maps keep their negative maximum: the zero at padding is not taken
    assert_close(pooled[0], torch.tensor([-2.0, -1.0, 2.0, -5.0], dtype=torch.float64))
    assert_close(pooled[1], torch.zeros(4, dtype=torch.float64))  # no real tokens: zeros, not -inf


def test_nbow_returns_x_masked():
    enc = NBOW(D)
    assert enc.out_dim == D and not list(enc.parameters())
    x = _sentence(4) + 1.0
    mask = torch.tensor([[True, True, True, False]])
    h, info = enc(x, mask)
    assert_close(h[0, :3], x[0, :3])
    assert h[0, 3].abs().max() == 0 and info == {}


def test_gradients_reach_every_parameter():
    x, mask = _sentence(5), torch.tensor([[True] * 4 + [False]])
    torch.manual_seed(0)
    for enc in (KimCNN(D, [2, 3], 3).double(), WindowCNN(D, 4, 3).double()):  # their own inits
        h, _ = enc(x * 10, mask)
        (h ** 2).sum().backward()
        for name, p in enc.named_parameters():
            assert p.grad is not None and torch.isfinite(p.grad).all(), name
            assert p.grad.abs().sum() > 0, name


def test_init_as_documented():
    torch.manual_seed(0)
    kim = KimCNN(20, [3, 4, 5], 50)
    for conv in kim.convs:
        assert conv.weight.abs().max() <= 0.01 and conv.weight.abs().max() > 0.009  # U(-0.01, 0.01)
        assert conv.bias.abs().max() == 0
    win = WindowCNN(20, 50, 5)
    bound = 1 / math.sqrt(5 * 20)  # 1/sqrt(fan_in), fan_in = window * in_dim
    for p in (win.conv.weight, win.conv.bias):
        assert p.abs().max() <= bound and p.abs().max() > 0.9 * bound


def test_registry_builds_the_right_model():
    node = build_encoder("cnn", EncoderArgs(in_dim=D, d=6, level="node", cnn=CNNOptions(window=3)))
    assert isinstance(node, WindowCNN) and node.out_dim == 6 and node.conv.kernel_size == (3,)
    for level in ("graph", "pair", "translation"):
        enc = build_encoder("cnn", EncoderArgs(in_dim=D, d=6, level=level, dropout=0.5,
                                               cnn=CNNOptions(widths=[2, 3], filters=4)))
        assert isinstance(enc, KimCNN) and enc.out_dim == enc.pool_dim == 8
        assert [c.kernel_size for c in enc.convs] == [(2,), (3,)]
        # Kim's dropout is the sentence head's (on the pooled vector); only translation uses h itself
        assert enc.dropout.p == (0.5 if level == "translation" else 0.0)
    bag = build_encoder("nbow", EncoderArgs(in_dim=D, d=6))
    assert isinstance(bag, NBOW) and bag.out_dim == D
    for name in ("cnn", "nbow"):
        spec = get_spec(name)
        assert spec.levels == LEVELS and not spec.needs_trees and not spec.uses_attrs


def test_window_must_be_odd():
    with pytest.raises(ValueError):
        WindowCNN(D, 4, 4)
