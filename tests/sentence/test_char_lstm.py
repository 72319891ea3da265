"""The character BiLSTM (``model.char: lstm``): its packed and padded paths against the final states of a
packed ``nn.LSTM`` (Lample et al., 2016), outputs and gradients, and no host read on the padded path."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import cn3.layers.packed
from cn3.sentence.node_encoder import CharLSTM

pytestmark = pytest.mark.usefixtures("one_thread")


def reference(module: CharLSTM, chars: torch.Tensor) -> torch.Tensor:
    """The final states ``h_n`` of both directions of the module's LSTM, packed with the lengths on the host."""
    b, n, c = chars.shape
    flat = chars.view(b * n, c)
    lengths = (flat != 0).sum(1).clamp(min=1).cpu()
    packed = nn.utils.rnn.pack_padded_sequence(module.embed(flat), lengths, batch_first=True, enforce_sorted=False)
    _, (h, _) = nn.LSTM.forward(module.lstm, packed)  # (2, B*N, out/2)
    return torch.cat([h[0], h[1]], -1).view(b, n, -1)


def chars_batch() -> torch.Tensor:
    """``(2, 4, 6)``: words of 1 to 6 characters, right-padded, and words without characters (padding)."""
    gen = torch.Generator().manual_seed(3)
    lengths = torch.tensor([[3, 1, 6, 0], [2, 5, 0, 0]])
    chars = torch.randint(1, 20, (2, 4, 6), generator=gen)
    return chars.masked_fill(torch.arange(6) >= lengths[..., None], 0)


@pytest.mark.parametrize("padded", [False, True])
def test_char_lstm_is_the_final_states_of_both_directions(monkeypatch, padded):
    monkeypatch.setattr(cn3.layers.packed, "padded_by_default", lambda x: padded)
    torch.manual_seed(0)
    module = CharLSTM(20, 7, 10).double()
    chars = chars_batch()
    got = module(chars)
    want = reference(module, chars)
    assert got.shape == (2, 4, 10)
    torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-10)
    weights = torch.randn(got.shape, dtype=torch.float64)
    grads = torch.autograd.grad((got * weights).sum(), list(module.parameters()))
    ref_grads = torch.autograd.grad((want * weights).sum(), list(module.parameters()))
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)


def test_the_padded_path_reads_nothing_on_the_host(monkeypatch):
    """On the path a CUDA run takes nothing leaves the device: on meta tensors (which hold no values) any
    read or packing would raise."""
    monkeypatch.setattr(cn3.layers.packed, "padded_by_default", lambda x: True)
    module = CharLSTM(20, 7, 10).to("meta")
    out = module(chars_batch().to("meta"))
    assert out.shape == (2, 4, 10) and out.device.type == "meta"
