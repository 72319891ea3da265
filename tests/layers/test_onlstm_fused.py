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


def test_padding_start_reads_nothing_off_the_cpu_or_while_compiling():
    """Off the CPU (here the meta device, whose values cannot be read at all) and under ``torch.compile``
    (``fullgraph=True``: a host read of a data-dependent value would break the graph and fail) every step
    is masked; on the CPU in eager mode the first padded column is read."""
    mask = padding_mask(torch.tensor([5, 3, 4]), 5)
    keep, full = onlstm.padding_start(mask.to("meta"), 5, torch.device("meta"))
    assert full == 0 and keep.device.type == "meta" and keep.dtype == torch.bool
    assert onlstm.padding_start(mask, 5, torch.device("cpu"))[1] == 3
    assert onlstm.padding_start(None, 5, torch.device("cpu")) == (None, 5)
    torch._dynamo.reset()
    compiled = torch.compile(lambda m: onlstm.padding_start(m, 5, m.device), backend="eager", fullgraph=True)
    keep, full = compiled(mask)
    assert full == 0 and torch.equal(keep, mask)


@pytest.mark.parametrize("autocast", [False, True])
def test_every_step_masked_gives_the_same_layer(monkeypatch, autocast):
    """The layer with every step masked (``full = 0``, the CUDA and compiled path) against the CPU's
    ``full`` read from the mask: the same outputs, state and gradients (the scan; under CPU autocast the
    step loop)."""
    torch.manual_seed(5)
    layer = ONLSTM(8, 16, chunk_size=4)
    x = torch.randn(3, 6, 8)
    mask = padding_mask(torch.tensor([6, 2, 4]), 6)

    def run():
        xg = x.clone().requires_grad_()
        layer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out, (h, c) = layer(xg, mask)
        (out.float().square().sum() + h.float().sum() + c.float().sum()).backward()
        return [out.detach(), h.detach(), c.detach(), xg.grad, *(p.grad for p in layer.parameters())]

    read = run()
    original = onlstm.padding_start
    monkeypatch.setattr(onlstm, "padding_start", lambda m, n, d: (original(m, n, d)[0], 0))
    masked = run()
    for got, want in zip(masked, read, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
