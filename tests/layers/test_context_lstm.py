"""The padded recurrent path (no host reads) against packing: same outputs, same gradients."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from cn3.layers.context import BiLSTMContext
from cn3.layers.lstm import LSTM
from cn3.layers.packed import reverse_within_lengths, run_packed

LENGTHS = [7, 3, 0, 5, 1]


def _batch(d_in: int = 5, n: int = 7):
    x = torch.randn(len(LENGTHS), n, d_in, dtype=torch.double, requires_grad=True)
    mask = torch.arange(n)[None, :] < torch.tensor(LENGTHS)[:, None]
    return x, mask


def test_reverse_within_lengths_by_hand():
    x = torch.arange(8.0).view(2, 4, 1)
    out = reverse_within_lengths(x, torch.tensor([3, 0]))
    assert out.view(2, 4).tolist() == [[2.0, 1.0, 0.0, 3.0], [4.0, 5.0, 6.0, 7.0]]
    assert torch.equal(reverse_within_lengths(out, torch.tensor([3, 0])), x)  # its own inverse


@pytest.mark.parametrize("cls, extra", [(LSTM, {}), (nn.GRU, {}), (nn.RNN, {}), (LSTM, {"proj_size": 3})])
@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("layers", [1, 2])
def test_padded_equals_packed_outputs_and_gradients(cls, extra, bidirectional, layers):
    torch.manual_seed(0)
    rnn = cls(5, 4, num_layers=layers, batch_first=True, bidirectional=bidirectional, **extra).double()
    x, mask = _batch()
    results = []
    for padded in (False, True):
        out = run_packed(rnn, x, mask, padded=padded)
        grads = torch.autograd.grad((out * torch.linspace(-1, 1, out.shape[-1], dtype=out.dtype)).square().sum(),
                                    [x, *rnn.parameters()])
        results.append((out, grads))
    (ref, ref_grads), (out, grads) = results
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    for g, r in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, r, rtol=0, atol=1e-12)
    assert (out[~mask] == 0).all() and (out[2] == 0).all()  # padding and the empty row are zero


def test_padded_outputs_do_not_depend_on_the_padding():
    torch.manual_seed(1)
    rnn = LSTM(5, 4, num_layers=2, batch_first=True, bidirectional=True).double()
    x, mask = _batch()
    wider_x = torch.cat([x, torch.randn(len(LENGTHS), 4, 5, dtype=torch.double)], 1)  # 4 more positions of noise
    wider_mask = torch.cat([mask, torch.zeros(len(LENGTHS), 4, dtype=torch.bool)], 1)
    out = run_packed(rnn, x, mask, padded=True)
    torch.testing.assert_close(run_packed(rnn, wider_x, wider_mask, padded=True)[:, :7], out, rtol=0, atol=1e-12)


def test_bilstm_context_packs_on_the_cpu_and_pads_elsewhere(monkeypatch):
    """The default path: packing in CPU eager mode (the reference), the padded path where the device or
    the compiler would otherwise wait on the host (simulated here by the same predicate)."""
    torch.manual_seed(2)
    ctx = BiLSTMContext(5, 4).double()
    x, mask = _batch()
    calls = []
    real = torch.nn.utils.rnn.pack_padded_sequence
    monkeypatch.setattr("cn3.layers.packed.pack_padded_sequence", lambda *a, **k: calls.append(1) or real(*a, **k))
    packed = ctx(x, mask)
    assert calls == [1]
    monkeypatch.setattr("cn3.layers.packed.padded_by_default", lambda x: True)
    padded = ctx(x, mask)
    assert calls == [1]  # not packed again
    torch.testing.assert_close(padded, packed, rtol=0, atol=1e-12)
    assert set(ctx.state_dict()) == {f"lstm.{w}_l0{s}" for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
                                     for s in ("", "_reverse")}  # checkpoints keep their keys


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: the padded path's point is a step without syncs")
def test_padded_lstm_on_cuda_waits_for_nothing():
    ctx = BiLSTMContext(5, 4, layers=2).cuda()
    x = torch.randn(len(LENGTHS), 7, 5, device="cuda", requires_grad=True)
    mask = (torch.arange(7)[None, :] < torch.tensor(LENGTHS)[:, None]).cuda()
    ctx(x, mask).sum().backward()  # warm-up: cuDNN's first call may set itself up
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        ctx(x, mask).sum().backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
