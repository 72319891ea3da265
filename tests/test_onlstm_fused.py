"""ON-LSTM's fused steps (issue 31): the step functions that ``torch.compile`` fuses on CUDA equal
the plain scan, compile to a bounded number of graphs, and fall back cleanly; the scan under
autocast. Here the steps run uncompiled or through dynamo's ``eager`` backend (no C compiler, no
GPU needed); ``bench/gpu_nmt_layers.py`` times the compiled path on a GPU."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.testing import CompileCounter

import cn3.layers.onlstm as onlstm
from cn3.attention import padding_mask
from cn3.layers.onlstm import ONLSTM

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def steps(monkeypatch):
    """``install(forward, backward)``: the step functions the scan calls when ``COMPILE_STEPS`` is
    ``always``; restored afterwards (the module caches its compiled functions)."""
    monkeypatch.setattr(onlstm, "_compiled", {})
    monkeypatch.setattr(onlstm, "COMPILE_STEPS", "always")

    def install(forward, backward):
        onlstm._compiled.update(forward=forward, backward=backward)
    return install


def outputs_and_grads(layer, x, mask, state=None):
    x.grad = None
    layer.zero_grad(set_to_none=True)
    out, (h, c), masters = layer(x, mask, state=state, return_master=True)
    g = torch.Generator().manual_seed(5)
    weights = [torch.randn(t.shape, generator=g, dtype=t.dtype) for t in (out, h, c, masters)]
    sum(((t * w).sum() for t, w in zip((out, h, c, masters), weights)), torch.zeros((), dtype=x.dtype)).backward()
    return [out, h, c, masters, x.grad] + [p.grad for p in layer.parameters()]


@pytest.mark.parametrize("lengths", [None, (7, 3, 5), (2, 7, 7)])
@pytest.mark.parametrize("with_state", [False, True])
def test_fused_steps_equal_the_plain_scan(steps, lengths, with_state):
    torch.manual_seed(1)
    layer = ONLSTM(12, 16, chunk_size=4).double()
    x = torch.randn(3, 7, 12, dtype=torch.float64, requires_grad=True)
    mask = None if lengths is None else padding_mask(torch.tensor(lengths), 7)
    state = (torch.randn(3, 16, dtype=torch.float64), torch.randn(3, 16, dtype=torch.float64)) if with_state else None
    onlstm.COMPILE_STEPS = "never"
    want = outputs_and_grads(layer, x, mask, state)
    onlstm.COMPILE_STEPS = "always"
    steps(onlstm._step_forward, onlstm._step_backward)
    got = outputs_and_grads(layer, x, mask, state)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-13, rtol=1e-12)


@pytest.mark.slow  # dynamo traces the steps
def test_steps_trace_into_few_graphs(steps):
    """dynamo traces both step functions whole (no graph break) and, with ``dynamic=True``, into a
    handful of graphs for every step, shape, padding and width: no recompilation per step."""
    counter = CompileCounter()
    steps(torch.compile(onlstm._step_forward, dynamic=True, fullgraph=True, backend=counter),
          torch.compile(onlstm._step_backward, dynamic=True, fullgraph=True, backend=counter))
    torch.manual_seed(2)
    for b, n, hidden, padded in [(3, 7, 16, True), (5, 9, 32, False), (2, 30, 32, True), (4, 12, 32, True)]:
        layer = ONLSTM(8, hidden, chunk_size=4)
        x = torch.randn(b, n, 8, requires_grad=True)
        mask = padding_mask(torch.randint(1, n + 1, (b,)), n) if padded else None
        layer(x, mask)[0].sum().backward()
    assert "failed" not in onlstm._compiled
    assert counter.frame_count <= 4, counter.frame_count


def test_a_failing_compile_falls_back_with_one_warning(steps):
    def broken(*args):
        raise RuntimeError("no working C compiler")
    steps(broken, broken)
    torch.manual_seed(3)
    layer = ONLSTM(8, 8, chunk_size=4)
    x, mask = torch.randn(2, 5, 8), padding_mask(torch.tensor([5, 2]), 5)
    with pytest.warns(RuntimeWarning, match="uncompiled"):
        out = layer(x, mask)[0]
    onlstm.COMPILE_STEPS = "never"
    torch.testing.assert_close(out, layer(x, mask)[0], atol=0, rtol=0)
    onlstm.COMPILE_STEPS = "always"
    assert not onlstm._use_compiled(x.device)  # and it stays off for the process


def test_compile_setting_is_checked(monkeypatch):
    monkeypatch.setattr(onlstm, "COMPILE_STEPS", "sometimes")
    with pytest.raises(ValueError, match="CN3_ONLSTM_COMPILE"):
        ONLSTM(8, 8, chunk_size=4)(torch.randn(2, 3, 8))


def test_auto_does_not_compile_the_steps(monkeypatch):
    """Measured slower than the plain scan on an H200 (onlstm._use_compiled): auto runs the scan."""
    monkeypatch.setattr(onlstm, "COMPILE_STEPS", "auto")
    monkeypatch.setattr(onlstm, "_compiled", {})
    assert not onlstm._use_compiled(torch.device("cuda"))
    assert not onlstm._use_compiled(torch.device("cpu"))
    monkeypatch.setattr(onlstm, "COMPILE_STEPS", "always")
    assert onlstm._use_compiled(torch.device("cpu"))


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
