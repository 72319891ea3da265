"""ON-LSTM's Triton kernels (:mod:`cn3.layers.onlstm_triton`) in Triton's interpreter, on CPU tensors,
against the plain scan: outputs, last state, master forget gates and every gradient.

Not collected by a plain ``pytest`` run (the name has no ``test_`` prefix): ``TRITON_INTERPRET=1``
must be in the environment before ``triton`` is first imported, which holds per process, so
``tests/layers/test_onlstm_triton.py::test_interpreter_cases`` runs this file in a subprocess. Directly::

    TRITON_INTERPRET=1 .venv/bin/python -m pytest -q tests/onlstm_interpreter_cases.py

The interpreter runs the kernels with :data:`~cn3.layers.onlstm_triton.INTERPRETER_TILES` (2 rows x
4 neurons x 8 columns of the products) and hidden units split over up to
:data:`~cn3.layers.onlstm_triton.INTERPRETER_COLUMNS` column programs (one launch per step: the
launches are the step barriers), so 3 rows, hidden width 8-12 and 1-6 chunks (the chunk axis is
padded to 16) leave partial tiles on every axis and split the units 2 or 3 ways. The kernels run in
float32; the references are the plain scan in float64 on the same weights and inputs, and the
kernel file's own :func:`~cn3.layers.onlstm_triton.reference_scan`.
"""

from __future__ import annotations

import copy
import os
import warnings

import pytest
import torch

if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("needs TRITON_INTERPRET=1 before triton is imported (run by tests/layers/test_onlstm_triton.py)",
                allow_module_level=True)
pytest.importorskip("triton")

from cn3.layers import onlstm_triton  # noqa: E402
from cn3.layers.attention import padding_mask  # noqa: E402
from cn3.layers.onlstm import ONLSTM, RecurrentStack  # noqa: E402

TOL = {"atol": 2e-5, "rtol": 1e-4}  # float32 kernels against the float64 scan


def test_kernels_are_interpreted():
    assert onlstm_triton.INTERPRETING


@pytest.fixture
def launches(monkeypatch):
    """Counts the kernels' launches (so that a case cannot pass on the plain scan)."""
    counts = {"forward": 0, "backward": 0}
    for name, key in (("scan_forward", "forward"), ("scan_backward", "backward")):
        real = getattr(onlstm_triton, name)

        def counted(*args, real=real, key=key):
            counts[key] += 1
            return real(*args)
        monkeypatch.setattr(onlstm_triton, name, counted)
    return counts


def outputs_and_grads(layer: ONLSTM, x, mask, state, return_master: bool, triton: bool):
    """Outputs (and the master gates) of the layer, then the gradients of a random weighting of
    them with respect to ``x``, the initial state and every parameter."""
    layer.kernel = "triton" if triton else "scan"
    x = x.clone().requires_grad_()
    state = None if state is None else tuple(s.clone().requires_grad_() for s in state)
    res = layer(x, mask, state, return_master=return_master)
    tensors = [res[0], *res[1]] + ([res[2]] if return_master else [])
    gen = torch.Generator().manual_seed(7)  # drawn in float64 so both dtypes weigh the same
    probes = [torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.dtype) for t in tensors]
    leaves = [x] + ([] if state is None else list(state)) + list(layer.parameters())
    grads = torch.autograd.grad(sum((t * p).sum() for t, p in zip(tensors, probes)), leaves)
    return [t.detach() for t in tensors] + list(grads)


CASES = {  # (batch, steps, input, hidden, chunk size, lengths or a mask name, initial state, return_master)
    "padding, state, master": (3, 6, 5, 12, 3, (6, 2, 4), True, True),
    "no mask, 3 chunks": (3, 5, 4, 12, 4, None, False, False),
    "left padding": (3, 5, 4, 8, 2, "left", True, True),
    "an empty row, one chunk": (3, 4, 3, 8, 8, (4, 0, 3), False, True),
    "one row, one step": (1, 1, 3, 8, 2, None, True, True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_layer_matches_the_plain_scan(case, launches):
    b, n, d_in, hidden, chunk, lengths, with_state, return_master = CASES[case]
    torch.manual_seed(sum(map(ord, case)))
    layer = ONLSTM(d_in, hidden, chunk_size=chunk)
    wide = copy.deepcopy(layer).double()
    x = torch.randn(b, n, d_in)
    if lengths == "left":
        mask = padding_mask(torch.tensor([5, 2, 4]), n).flip(1)
    else:
        mask = None if lengths is None else padding_mask(torch.tensor(lengths), n)
    state = (torch.randn(b, hidden), torch.randn(b, hidden)) if with_state else None
    got = outputs_and_grads(layer, x, mask, state, return_master, triton=True)
    assert launches == {"forward": 1, "backward": 1}
    want = outputs_and_grads(wide, x.double(), mask, None if state is None else tuple(s.double() for s in state),
                             return_master, triton=False)
    assert launches == {"forward": 1, "backward": 1}  # float64 runs the plain scan
    names = ["out", "h", "c"] + (["master"] if return_master else []) + ["x"] + (["h0", "c0"] if with_state else [])
    names += [name for name, _ in layer.named_parameters()]
    assert len(got) == len(want) == len(names)
    for name, a, w in zip(names, got, want):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a.double(), w, **TOL, msg=lambda m, name=name: f"{name}: {m}")
    if mask is not None:
        assert (got[0][~mask] == 0).all()  # padded steps' outputs


def test_bidirectional_stack_matches_the_plain_scan(launches):
    """A bidirectional layer: the backward half runs on rows reversed within their lengths."""
    torch.manual_seed(3)
    stack = RecurrentStack(8, 1, "onlstm", chunk_size=2, bidirectional=True, kernel="triton")
    wide = copy.deepcopy(stack).double()
    x = torch.randn(3, 5, 8)
    mask = padding_mask(torch.tensor([5, 3, 1]), 5)
    out = stack(x, mask)
    grads = torch.autograd.grad((out * torch.linspace(-1, 1, out.numel()).view(out.shape)).sum(),
                                list(stack.parameters()))
    assert launches == {"forward": 2, "backward": 2}
    ref = wide(x.double(), mask)
    ref_grads = torch.autograd.grad((ref * torch.linspace(-1, 1, ref.numel(), dtype=torch.float64)
                                     .view(ref.shape)).sum(), list(wide.parameters()))
    torch.testing.assert_close(out.double(), ref, **TOL)
    for a, w in zip(grads, ref_grads):
        torch.testing.assert_close(a.double(), w, **TOL)


def _scan_inputs(seed: int, n: int = 5, b: int = 3, hidden: int = 12, n_chunks: int = 4):
    gen = torch.Generator().manual_seed(seed)
    width = 2 * n_chunks + 4 * hidden
    pre = torch.randn(n, b, width, generator=gen)
    wt = torch.randn(hidden, width, generator=gen) * 0.3
    h0, c0 = torch.randn(b, hidden, generator=gen), torch.randn(b, hidden, generator=gen)
    return pre, wt, h0, c0, padding_mask(torch.tensor([n, 2, 4]), n)


@pytest.mark.parametrize("columns", [1, 2, 3])
def test_scan_forward_matches_its_reference_for_any_split(columns):
    """The forward kernel with the 12 hidden units on 1, 2 (8 + 4) or 3 column programs against
    :func:`~cn3.layers.onlstm_triton.reference_scan` (float64): states, cells, master gates."""
    pre, wt, h0, c0, keep = _scan_inputs(columns)
    got = onlstm_triton.scan_forward(pre, wt, h0, c0, keep, 4, True, columns=columns)
    want = onlstm_triton.reference_scan(pre.double(), wt.double(), h0.double(), c0.double(), keep, 4)
    for name, a, w in zip(("hs", "cells", "master"), got, want):
        torch.testing.assert_close(a.double(), w, **TOL, msg=lambda m, name=name: f"{name}: {m}")


def test_scan_backward_is_the_same_for_any_split():
    """The backward kernel on 1, 2 and 3 column programs: the same gradients (the chunk sums and the
    recurrent product read every unit's share, written by the other programs)."""
    gen = torch.Generator().manual_seed(5)
    n, b, hidden, n_chunks = 4, 3, 12, 4
    keep = padding_mask(torch.tensor([4, 1, 3]), n)
    rand = lambda *shape: torch.randn(*shape, generator=gen)  # noqa: E731
    probs = torch.softmax(rand(n, b, 2, n_chunks), -1)
    args = (rand(b, n, hidden), rand(b, hidden), rand(b, n, n_chunks), keep, rand(n, b, 7, hidden),
            rand(n, b, hidden), rand(n, b, hidden), probs, rand(2 * n_chunks + 4 * hidden, hidden) * 0.3)
    results = [onlstm_triton.scan_backward(*args, columns=columns) for columns in (1, 2, 3)]
    for other in results[1:]:
        for a, w in zip(other, results[0]):
            torch.testing.assert_close(a, w, atol=1e-6, rtol=1e-6)
    assert results[0][0].abs().sum() > 0 and results[0][1].abs().sum() > 0


@pytest.fixture
def forced_barrier(monkeypatch):
    """The global step barrier in the interpreter (one launch for all steps, programs run one after
    another, so a program waits at a barrier for programs that have not started), with a fresh record
    of failed devices; the list gets each attempt's column count."""
    monkeypatch.setattr(onlstm_triton, "FORCE_BARRIER", True)
    monkeypatch.setattr(onlstm_triton, "_SINGLE_COLUMN", set())
    monkeypatch.setattr(onlstm_triton, "_CHECKED", set())
    asked: list[int] = []
    real = onlstm_triton.plan

    def plan(*args, **kwargs):
        found = real(*args, **kwargs)
        asked.append(found[0][1])
        return found
    monkeypatch.setattr(onlstm_triton, "plan", plan)
    return asked


@pytest.mark.parametrize("spins", [0, 3])
def test_a_barrier_that_times_out_sets_the_flag_and_falls_back(monkeypatch, forced_barrier, spins):
    """A bounded spin: the first program gives up after ``spins`` reads of the counter and sets the
    flag (no hang); the host reads it, warns and runs one column program, whose results equal the
    reference. The flag is what tells: the barrier's own results are wrong."""
    monkeypatch.setattr(onlstm_triton, "BARRIER_SPINS", spins)
    pre, wt, h0, c0, keep = _scan_inputs(11)
    want = onlstm_triton.reference_scan(pre.double(), wt.double(), h0.double(), c0.double(), keep, 4)
    with pytest.warns(RuntimeWarning, match=rf"forward: the column programs' step barrier failed \(a program "
                                            rf"waited {spins} spins .*one column program per row block on cpu"):
        got = onlstm_triton.scan_forward(pre, wt, h0, c0, keep, 4, True, columns=3)
    assert forced_barrier == [3, 1]  # the barrier's attempt, then one column program
    for name, a, w in zip(("hs", "cells", "master"), got, want):
        torch.testing.assert_close(a.double(), w, **TOL, msg=lambda m, name=name: f"{name}: {m}")
    flag = torch.zeros(1, dtype=torch.int32)  # the kernel alone: its flag set, its states not the reference's
    hs = torch.empty(3, 5, 12)
    cells = torch.empty(6, 3, 12)
    cells[0] = c0
    grid, options, units, sync = onlstm_triton.plan(3, 12, onlstm_triton.FWD_TILE, pre.device, 3)
    assert sync and grid == (2, 3)
    onlstm_triton._onlstm_fwd[grid](pre, wt, h0, onlstm_triton.mask_bytes(keep, pre.device), hs, cells,
                                    torch.empty(1), torch.zeros(2, 5, dtype=torch.int32), flag, 3, 5, 0, 5, units, 3,
                                    spins, **onlstm_triton._chunks(12, 4), HAS_KEEP=True, NEED_MASTER=False,
                                    TANH=onlstm_triton.TANH_FORMS["sigmoid"], DOT_PREC="ieee", SYNC=True, **options)
    assert int(flag) == 1
    assert hs.isnan().all()  # every program saw the flag at its end: its units are NaN


def test_a_configuration_checked_once_is_not_read_again_and_a_failure_there_is_nan(monkeypatch, forced_barrier):
    """After a configuration's first launch was read clear, later launches are not read (no wait for the
    device); should their barrier give up all the same, the states come out NaN, not silently wrong."""
    monkeypatch.setattr(onlstm_triton, "BARRIER_SPINS", 0)
    pre, wt, h0, c0, keep = _scan_inputs(12)
    grid = onlstm_triton.plan(3, 12, onlstm_triton.FWD_TILE, pre.device, 3)[0]
    onlstm_triton._CHECKED.add(("cpu", "forward", grid, 12, 4))
    forced_barrier.clear()
    with warnings.catch_warnings(record=True) as caught:  # numpy's, of the barrier's stale reads, aside
        warnings.simplefilter("always")
        hs, cells, master = onlstm_triton.scan_forward(pre, wt, h0, c0, keep, 4, True, columns=3)
    assert not [w for w in caught if "ON-LSTM" in str(w.message)]
    assert forced_barrier == [3] and hs.isnan().any()


def test_a_refused_cooperative_launch_falls_back_once_per_device(monkeypatch, forced_barrier):
    """The driver refusing the cooperative launch (a ``RuntimeError`` from the launch, as a grid too large
    to be resident raises) is caught: a warning naming the grid, then one column program; the backward
    and later calls on the device take one column program at once, without a warning."""
    for name in ("_onlstm_fwd", "_onlstm_bwd"):
        monkeypatch.setattr(onlstm_triton, name, _Refusing(getattr(onlstm_triton, name)))
    torch.manual_seed(4)
    layer = ONLSTM(5, 12, chunk_size=3)
    wide = copy.deepcopy(layer).double()
    x = torch.randn(3, 6, 5)
    mask = padding_mask(torch.tensor([6, 2, 4]), 6)
    with pytest.warns(RuntimeWarning, match=r"forward: .*cooperative launch of 2 x 3 programs failed: Triton Error "
                                            r"\[CUDA\]: too many blocks"):
        got = outputs_and_grads(layer, x, mask, None, True, triton=True)
    want = outputs_and_grads(wide, x.double(), mask, None, True, triton=False)
    for a, w in zip(got, want):
        torch.testing.assert_close(a.double(), w, **TOL)
    assert forced_barrier == [3, 1, 1]  # the forward refused, then one column program; the backward so at once
    assert "cpu" in onlstm_triton._SINGLE_COLUMN
    with warnings.catch_warnings(record=True) as caught:  # told once per device
        warnings.simplefilter("always")
        again = outputs_and_grads(layer, x, mask, None, True, triton=True)
    assert not caught and forced_barrier[3:] == [1, 1]  # one column program at once
    for a, w in zip(again, got):
        torch.testing.assert_close(a, w)


class _Refusing:
    """A kernel whose launches with the barrier (``SYNC``) the "driver" refuses, as CUDA refuses a
    cooperative grid too large to be resident; the others run."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __getitem__(self, grid):
        def launch(*args, **flags):
            if flags["SYNC"]:
                raise RuntimeError("Triton Error [CUDA]: too many blocks in cooperative launch")
            return self.kernel[grid](*args, **flags)
        return launch


def test_the_backward_barrier_times_out_and_falls_back(monkeypatch, forced_barrier):
    """The backward's barrier (between its two phases) bounded as the forward's: the flag, a warning,
    then the gradients of one column program (equal to the plain per-step launches)."""
    monkeypatch.setattr(onlstm_triton, "BARRIER_SPINS", 0)
    gen = torch.Generator().manual_seed(8)
    n, b, hidden, n_chunks = 4, 3, 12, 4
    rand = lambda *shape: torch.randn(*shape, generator=gen)  # noqa: E731
    args = (rand(b, n, hidden), rand(b, hidden), None, padding_mask(torch.tensor([4, 1, 3]), n),
            rand(n, b, 7, hidden), rand(n, b, hidden), rand(n, b, hidden),
            torch.softmax(rand(n, b, 2, n_chunks), -1), rand(2 * n_chunks + 4 * hidden, hidden) * 0.3)
    with pytest.warns(RuntimeWarning, match="backward: the column programs' step barrier failed"):
        got = onlstm_triton.scan_backward(*args, columns=3)
    assert forced_barrier == [3, 1]
    monkeypatch.setattr(onlstm_triton, "FORCE_BARRIER", False)
    want = onlstm_triton.scan_backward(*args, columns=3)  # per-step launches, the launches the barriers
    for a, w in zip(got, want):
        torch.testing.assert_close(a, w, atol=1e-6, rtol=1e-6)
