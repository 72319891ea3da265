"""ON-LSTM under mixed precision: on CUDA autocast the recurrence runs in the fp32 scan (the input
projection in the autocast dtype); under CPU autocast the layer keeps the step loop under autograd.

(The file's name is older than its content: it held the tests of the ``torch.compile``-d steps, a
path removed because it never ran by default and was measured slower than the plain scan.)"""

from __future__ import annotations

import pytest
import torch

import cn3.layers.onlstm as onlstm
from cn3.layers.attention import padding_mask
from cn3.layers.onlstm import ONLSTM

pytestmark = pytest.mark.usefixtures("one_thread")


def test_autocast_runs_the_scan_with_an_fp32_state(monkeypatch):
    """Under bf16 autocast on CUDA (here: the CPU taken off ``AUTOCAST_STEP_LOOP``) the input
    projection is a bf16 product and the recurrence the scan in fp32: close to the fp32 layer."""
    monkeypatch.setattr(onlstm, "AUTOCAST_STEP_LOOP", frozenset())
    torch.manual_seed(4)
    layer = ONLSTM(16, 16, chunk_size=4)
    x = torch.randn(3, 6, 16, requires_grad=True)
    mask = padding_mask(torch.tensor([6, 2, 4]), 6)
    reference, (_, c_ref) = layer(x, mask)
    calls = []
    original = onlstm._ONLSTMScan.apply
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(onlstm._ONLSTMScan, "apply", lambda *a: calls.append(a[0].dtype) or original(*a))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, (h, c) = layer(x, mask)
    assert calls == [torch.float32]
    assert out.dtype == c.dtype == torch.float32
    out.sum().backward()
    torch.testing.assert_close(out, reference.detach(), rtol=0.02, atol=0.02)
    assert (out[1, 2:] == 0).all()
    assert x.grad.dtype == torch.float32 and torch.isfinite(x.grad).all()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in layer.parameters())


def test_cpu_autocast_keeps_the_step_loop(monkeypatch):
    calls = []
    monkeypatch.setattr(onlstm._ONLSTMScan, "apply", lambda *a: calls.append(a))
    layer = ONLSTM(8, 8, chunk_size=4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = layer(torch.randn(2, 3, 8))
    assert not calls and out.shape == (2, 3, 8)
