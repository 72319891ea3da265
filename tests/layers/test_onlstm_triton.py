"""ON-LSTM's Triton kernels (:mod:`cn3.layers.onlstm_triton`): when the layer's ``kernel`` uses them, the
host side of that path (the backward's recomputation) with the kernels stood in for by the plain
step loops, the kernels themselves in Triton's interpreter (a subprocess: see
``tests/onlstm_interpreter_cases.py``) and, where there is a GPU, on CUDA against the plain scan."""

from __future__ import annotations

import copy
import importlib.util
import re
import sys
import types
import warnings
from pathlib import Path

import pytest
import torch

from cn3.layers import onlstm
from cn3.layers.attention import padding_mask
from cn3.layers.onlstm import ONLSTM, RecurrentStack
from tests.triton_interpreter import run_interpreter_cases

REPO = Path(__file__).resolve().parents[2]
HAS_TRITON = importlib.util.find_spec("triton") is not None
CUDA, CPU = torch.device("cuda"), torch.device("cpu")

pytestmark = pytest.mark.usefixtures("one_thread")


def test_scan_runs_the_scan():
    assert not onlstm._use_triton("scan", CUDA, torch.float32, 128)
    assert not onlstm._use_triton("scan", CPU, torch.float32, 128)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_auto_uses_them_on_cuda_up_to_the_chosen_width():
    """Up to hidden 512, the widest a GPU may have timed (at 1024 the backward spills and nothing was
    timed); never on the CPU; ``triton`` forced still runs them wider."""
    assert onlstm.TRITON_AUTO_MAX_HIDDEN <= 512
    assert onlstm._use_triton("auto", CUDA, torch.float32, 128)
    assert onlstm._use_triton("auto", CUDA, torch.float32, 512)
    assert not onlstm._use_triton("auto", CUDA, torch.float32, 513)
    assert not onlstm._use_triton("auto", CUDA, torch.float32, 1024)
    assert onlstm._use_triton("triton", CUDA, torch.float32, 1024)
    assert onlstm._use_triton("auto", CUDA, torch.float32, onlstm.TRITON_AUTO_MAX_HIDDEN)
    assert not onlstm._use_triton("auto", CUDA, torch.float32, onlstm.TRITON_AUTO_MAX_HIDDEN + 1)
    assert not onlstm._use_triton("auto", CUDA, torch.bfloat16, 128)
    assert not onlstm._use_triton("auto", CPU, torch.float32, 128)


def test_auto_without_triton_runs_the_scan_silently(monkeypatch):
    monkeypatch.setitem(sys.modules, "cn3.layers.onlstm_triton", None)  # importing it raises ImportError
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not onlstm._use_triton("auto", CUDA, torch.float32, 128)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_triton_uses_them_where_they_run():
    """fp32 on CUDA at any width (on the CPU only under the interpreter, which this process does not run)."""
    from cn3.layers.onlstm_triton import INTERPRETING
    assert onlstm._use_triton("triton", CUDA, torch.float32, 1024)
    assert onlstm._use_triton("triton", CPU, torch.float32, 128) == INTERPRETING
    assert not onlstm._use_triton("triton", CUDA, torch.float64, 128)
    assert not onlstm._use_triton("triton", CUDA, torch.bfloat16, 128)


def test_the_kernel_is_checked_when_built_and_when_run(monkeypatch):
    with pytest.raises(ValueError, match="ON-LSTM kernel must be one of auto, scan, triton, got 'always'"):
        ONLSTM(8, 8, chunk_size=4, kernel="always")
    with pytest.raises(ValueError, match="an lstm stack takes only 'auto'"):
        RecurrentStack(8, 1, "lstm", kernel="scan")
    layer = ONLSTM(8, 8, chunk_size=4, kernel="scan")
    assert "kernel=scan" in repr(layer) and "kernel" not in repr(ONLSTM(8, 8, chunk_size=4))
    layer.kernel = "sometimes"  # an attribute: checked again at each call
    with pytest.raises(ValueError, match="got 'sometimes'"):
        layer(torch.randn(2, 3, 8))


def test_the_layer_passes_its_kernel_to_the_scan(monkeypatch):
    """What ``kernel`` a layer (or a stack's every ON-LSTM layer) was built with is what the scan is
    asked to run; the environment variables that once set it are not read."""
    monkeypatch.setenv("CN3_ONLSTM_TRITON", "always")
    asked = []
    monkeypatch.setattr(onlstm, "_use_triton", lambda kernel, device, dtype, hidden: asked.append(kernel) or False)
    x, mask = torch.randn(2, 3, 8), padding_mask(torch.tensor([3, 2]), 3)
    ONLSTM(8, 8, chunk_size=4)(x, mask)
    RecurrentStack(8, 2, "onlstm", chunk_size=2, bidirectional=True, kernel="triton")(x, mask)
    ONLSTM(8, 8, chunk_size=4, kernel="scan")(x)
    assert asked == ["auto"] + ["triton"] * 4 + ["scan"]


def test_without_triton_a_warning_once_and_the_scan(monkeypatch):
    monkeypatch.setitem(sys.modules, "cn3.layers.onlstm_triton", None)  # importing it raises ImportError
    monkeypatch.setattr(onlstm, "_triton_missing", [])
    with pytest.warns(RuntimeWarning, match="kernel 'triton' but Triton cannot be imported"):
        assert not onlstm._use_triton("triton", CUDA, torch.float32, 128)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not onlstm._use_triton("triton", CUDA, torch.float32, 128)


def _stand_ins(calls: list[str]) -> types.ModuleType:
    """A ``cn3.layers.onlstm_triton`` whose two functions run the plain scan's step loops: what the
    kernels compute, so that the path around them runs on a CPU without Triton, in float64."""
    def scan_forward(pre, wt, h0, c0, keep, n_chunks, need_master):
        calls.append("forward")
        n, b, _ = pre.shape
        hid = wt.shape[0]
        hs, cg = pre.new_empty(b, n, hid), pre.new_empty(n + 1, b, 2, hid)
        cg[0, :, 0] = c0
        master = pre.new_empty(n, b, 2, n_chunks)
        onlstm._forward_steps(pre, wt, h0, hs, cg, pre.new_empty(n, b, 3, hid), master,
                              pre.new_empty(n, b, 2, n_chunks, hid // n_chunks), pre.new_empty(n, b, hid), keep, 0,
                              n_chunks)
        return hs, cg[:, :, 0], master[:, :, 0].transpose(0, 1) if need_master else pre.new_empty(0)

    def scan_backward(d_hs, d_c, d_master, keep, table, d_o, d_tc, probs, weight):
        calls.append("backward")
        b, n, hid = d_hs.shape
        nc = probs.shape[-1]
        d_pre = d_hs.new_empty(n, b, weight.shape[0] + 3 * hid)
        signed = probs * probs.new_tensor([[1.0], [-1.0]])
        tri = torch.ones(nc, nc, dtype=d_hs.dtype).tril()
        dh, dc = onlstm._backward_steps(d_hs, d_c, d_master, d_pre, table, d_o, d_tc, probs, signed, tri, weight,
                                        keep, 0, nc)
        return d_pre[:, :, :weight.shape[0]], dh, dc

    return types.SimpleNamespace(scan_forward=scan_forward, scan_backward=scan_backward)


def outputs_and_grads(layer, x, mask, state):
    x = x.clone().requires_grad_()
    state = tuple(s.clone().requires_grad_() for s in state)
    out, (h, c), masters = layer(x, mask, state, return_master=True)
    gen = torch.Generator().manual_seed(5)
    # the weights drawn on the CPU (one generator for both devices), then moved to the output's device
    loss = sum((t * torch.randn(t.shape, generator=gen, dtype=t.dtype).to(t.device)).sum()
               for t in (out, h, c, masters))
    return [out, h, c, masters] + list(torch.autograd.grad(loss, [x, *state, *layer.parameters()]))


@pytest.mark.parametrize("lengths", [None, (6, 2, 5)])
def test_the_triton_path_around_the_kernels_equals_the_scan(monkeypatch, lengths):
    """With the kernels replaced by the plain step loops, the Triton path (the backward's gates
    recomputed for all steps at once, its factors, the weight's gradient) gives the plain scan's
    outputs and gradients."""
    torch.manual_seed(1)
    layer = ONLSTM(5, 12, chunk_size=3).double()
    x = torch.randn(3, 6, 5, dtype=torch.float64)
    mask = None if lengths is None else padding_mask(torch.tensor(lengths), 6)
    state = (torch.randn(3, 12, dtype=torch.float64), torch.randn(3, 12, dtype=torch.float64))
    want = outputs_and_grads(layer, x, mask, state)
    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "cn3.layers.onlstm_triton", _stand_ins(calls))
    monkeypatch.setattr(onlstm, "_use_triton", lambda kernel, device, dtype, hidden: kernel == "triton")
    layer.kernel = "triton"
    got = outputs_and_grads(layer, x, mask, state)
    assert calls == ["forward", "backward"]
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed (pip install -e '.[gpu]', or "
                                           "scripts/setup.sh): the kernels' interpreter tests need it")
@pytest.mark.slow  # the kernels in Triton's interpreter, one program at a time: 10-30 s
def test_interpreter_cases():
    """``tests/onlstm_interpreter_cases.py`` in Triton's interpreter
    (:func:`tests.triton_interpreter.run_interpreter_cases`)."""
    run_interpreter_cases("tests/onlstm_interpreter_cases.py")


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
@pytest.mark.slow  # Triton's compiler and its bundled ptxas: 10-30 s
@pytest.mark.parametrize("padded, sync", [(False, False), (True, True)])
def test_kernels_compile_for_a_gpu(padded, sync):
    """Both kernels through Triton's whole compiler for sm_90 (Hopper), no GPU needed: type and
    layout errors the interpreter cannot see, the step barrier (with ``sync``: atomics on the
    counter) and no register spill at hidden 512 (the tiles are chosen to fit)."""
    pytest.importorskip("triton.backends.nvidia", reason="Triton without its NVIDIA backend")
    from cn3.layers import onlstm_triton as kernels
    from cn3.layers.triton_common import sm90_usage
    if kernels.INTERPRETING:
        pytest.skip("this process runs Triton's interpreter")
    ints = {"B", "N", "T0", "T1", "S0", "S1", "COLS", "n_cols", "max_spins"}
    for fn, tile, flags in ((kernels._onlstm_fwd, kernels.FWD_TILE, {"NEED_MASTER": padded, "TANH": 1}),
                            (kernels._onlstm_bwd, kernels.BWD_TILE, {"HAS_DMASTER": padded, "PHASES": 3})):
        consts = {**kernels._chunks(512, 64), **flags, "HAS_KEEP": padded, "DOT_PREC": "ieee", "SYNC": sync,
                  "BB": tile[0], "BH": tile[1], "BK": tile[2]}
        signature = {p.name: "constexpr" if p.is_constexpr else "i32" if p.name in ints
                     else "*u8" if p.name == "KEEP" else "*i32" if p.name in ("COUNTER", "FLAG") else "*fp32"
                     for p in fn.params}
        usage = sm90_usage(fn, signature, consts, tile[3], tile[4])
        assert usage["stack"] == 0, f"{fn.__name__} spills registers: {usage}"
        if sync:  # the barrier's atomics survive compilation
            import triton
            from triton.backends.compiler import GPUTarget
            from triton.compiler import ASTSource
            ptx = triton.compile(ASTSource(fn, signature, constexprs=consts), target=GPUTarget("cuda", 90, 32),
                                 options={"num_warps": tile[3], "num_stages": tile[4]}).asm["ptx"]
            assert "atom.global" in ptx and "bar.sync" in ptx
            assert re.search(r"atom\.global\.\S*exch", ptx)  # the bounded spin's flag, set on giving up


@pytest.mark.skipif(not (torch.cuda.is_available() and HAS_TRITON), reason="needs a CUDA device and triton")
@pytest.mark.parametrize("padded", [False, True])
def test_kernels_match_the_plain_scan_on_cuda(monkeypatch, padded):
    """The compiled kernels (libdevice tanh, IEEE fp32 products) against the plain scan on CUDA:
    20 rows (partial row blocks), hidden 96 (a partial neuron tile), 12 chunks, an initial state,
    the master gates, and padding with an empty row."""
    torch.manual_seed(0)
    layer = ONLSTM(40, 96, chunk_size=8).to(CUDA)
    x = torch.randn(20, 13, 40, device=CUDA)
    lengths = torch.randint(1, 14, (20,))
    lengths[3] = 0
    mask = padding_mask(lengths, 13).to(CUDA) if padded else None
    state = (torch.randn(20, 96, device=CUDA), torch.randn(20, 96, device=CUDA))
    layer.kernel = "scan"
    want = outputs_and_grads(layer, x, mask, state)
    triton_layer = copy.deepcopy(layer)
    triton_layer.kernel = "triton"
    got = outputs_and_grads(triton_layer, x, mask, state)
    names = ["out", "h", "c", "master", "x", "h0", "c0"] + [name for name, _ in layer.named_parameters()]
    for name, a, b in zip(names, got, want):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4, msg=lambda m, name=name: f"{name}: {m}")
