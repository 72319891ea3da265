"""The CN3 layer's three attention paths: which one the layer picks, the dense path, the
fused Triton kernel in Triton's interpreter (a subprocess: see ``tests/fused_interpreter_cases.py``)
and, where there is a GPU, the fused kernel on CUDA against the dense path."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cn3.layers import DynamicGraphLayer, dynamic_graph
from cn3.layers.attention import padding_mask
from cn3.layers.blockwise_energy import BLOCK_ELEMENTS, DENSE_ELEMENTS, default_block_rows
from cn3.layers.dynamic_graph import choose_impl
from tests.triton_interpreter import run_interpreter_cases

REPO = Path(__file__).resolve().parents[2]
HAS_TRITON = importlib.util.find_spec("triton") is not None
CUDA = torch.device("cuda")


@pytest.mark.parametrize("triton, deterministic, expected", [
    (True, False, "fused"), (False, False, "dense"), (True, True, "dense")])
def test_auto_picks_by_device_and_availability(monkeypatch, triton, deterministic, expected):
    monkeypatch.setattr(dynamic_graph, "fused_available", lambda: triton)
    monkeypatch.setattr(torch, "are_deterministic_algorithms_enabled", lambda: deterministic)
    assert choose_impl("auto", CUDA) == expected
    assert choose_impl("auto", torch.device("cpu")) == "blockwise"  # the CPU's fastest, Triton or not


def test_auto_keeps_wide_heads_off_the_fused_kernel(monkeypatch):
    monkeypatch.setattr(dynamic_graph, "fused_available", lambda: True)
    assert choose_impl("auto", CUDA, width=dynamic_graph.FUSED_MAX_WIDTH) == "fused"
    assert choose_impl("auto", CUDA, width=dynamic_graph.FUSED_MAX_WIDTH + 1) == "dense"


def test_auto_gives_long_sentences_the_dense_path(monkeypatch):
    """Measured faster from about 1,000 words (dynamic_graph.FUSED_MAX_LENGTH)."""
    monkeypatch.setattr(dynamic_graph, "fused_available", lambda: True)
    assert choose_impl("auto", CUDA, length=dynamic_graph.FUSED_MAX_LENGTH) == "fused"
    assert choose_impl("auto", CUDA, length=dynamic_graph.FUSED_MAX_LENGTH + 1) == "dense"
    assert choose_impl("auto", torch.device("cpu"), length=5000) == "blockwise"


def test_the_environment_picks_nothing(monkeypatch):
    """The path is the layer's ``impl`` (a run's ``model.attention_impl``), which its config records:
    the environment variable that once overrode ``auto`` is not read."""
    monkeypatch.setenv("CN3_ATTENTION_IMPL", "dense")
    assert choose_impl("auto", torch.device("cpu")) == "blockwise"


def test_explicit_impl_overrides_and_unknown_is_refused(monkeypatch):
    monkeypatch.setattr(dynamic_graph, "fused_available", lambda: True)
    for impl in ("blockwise", "dense", "fused"):
        assert choose_impl(impl, CUDA) == impl
        assert choose_impl(impl, torch.device("cpu")) == impl
    with pytest.raises(ValueError, match="impl must be one of"):
        choose_impl("flash", torch.device("cpu"))
    with pytest.raises(ValueError, match="impl must be one of"):
        DynamicGraphLayer(4, impl="flash")
    assert "impl=dense" in repr(DynamicGraphLayer(4, impl="dense"))


@pytest.mark.parametrize("impl, budget", [("auto", None), ("blockwise", None), ("dense", DENSE_ELEMENTS)])
def test_layer_runs_the_chosen_path_on_cpu(monkeypatch, impl, budget):
    """On the CPU ``auto`` is the blockwise path (blocks of about BLOCK_ELEMENTS, chosen inside
    ``additive_attention``); ``dense`` passes blocks of the dense budget."""
    calls = []
    real = dynamic_graph.additive_attention

    def spy(*args, block_rows=None, **kwargs):
        calls.append(block_rows)
        return real(*args, block_rows=block_rows, **kwargs)

    monkeypatch.setattr(dynamic_graph, "additive_attention", spy)
    layer = DynamicGraphLayer(8, energy_dim=4, impl=impl)
    layer(torch.randn(2, 5, 8), torch.ones(2, 5, dtype=torch.bool))
    assert calls == [None if budget is None else default_block_rows(2, 5, 4, budget=budget)]


def test_dense_blocks_are_whole_batches_up_to_the_budget():
    assert default_block_rows(8, 200, 100, budget=DENSE_ELEMENTS) >= 200  # one block: no Python loop
    assert default_block_rows(64, 20, 100, budget=DENSE_ELEMENTS) >= 20
    rows = default_block_rows(1, 5000, 100, budget=DENSE_ELEMENTS)
    assert rows * 5000 * 100 <= DENSE_ELEMENTS < (rows + 1) * 5000 * 100
    assert default_block_rows(8, 200, 100) < 200  # the CPU's blocks stay small
    assert BLOCK_ELEMENTS < DENSE_ELEMENTS


def test_need_alpha_false_gives_the_same_states_and_no_weights():
    torch.manual_seed(0)
    layer = DynamicGraphLayer(6, n_edge_types=3, edge_dim=4, energy_dim=4, energy_heads=2)
    h, mask = torch.randn(2, 5, 6), padding_mask(torch.tensor([5, 3]), 5)
    edges = torch.randint(0, 3, (2, 5, 5))
    out, alpha, gate = layer(h, mask, edge_type=edges)
    out2, none, gate2 = layer(h, mask, edge_type=edges, need_alpha=False)
    assert none is None and alpha.shape == (2, 5, 5)
    torch.testing.assert_close(out2, out)
    torch.testing.assert_close(gate2, gate)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed (pip install -e '.[gpu]', or "
                                           "scripts/setup.sh): the fused kernel's interpreter tests need it")
@pytest.mark.slow  # 29 cases in Triton's interpreter, one program at a time: 30-60 s
def test_interpreter_cases():
    """``tests/fused_interpreter_cases.py`` in Triton's interpreter
    (:func:`tests.triton_interpreter.run_interpreter_cases`)."""
    run_interpreter_cases("tests/fused_interpreter_cases.py")


def test_gpu_bench_runs_quick_on_cpu(tmp_path):
    """``bench/gpu_layers.py --quick`` (tiny shapes, no fused column without CUDA or the
    interpreter) writes its JSON summary; without ``--quick`` and CUDA it stops with a message."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("TRITON_INTERPRET", None)
    out = tmp_path / "summary.json"
    subprocess.run([sys.executable, "bench/gpu_layers.py", "--quick", "--repeats", "1", "--json", str(out)],
                   cwd=REPO, env=env, check=True, capture_output=True, timeout=300)
    summary = json.loads(out.read_text())
    assert summary["quick"] and summary["device"].startswith("CPU")
    assert summary["tanh_floor_card"] is None and all(r["floor_ms"] is None for r in summary["results"])
    rows = {(r["B"], r["N"], r["dtype"], r["impl"]) for r in summary["results"]}
    assert {(4, 12, "fp32", "blockwise"), (1, 40, "bf16", "dense"), (4, 12, "bf16", "mha")} <= rows
    if not torch.cuda.is_available():
        result = subprocess.run([sys.executable, "bench/gpu_layers.py"], cwd=REPO, env=env, capture_output=True,
                                text=True, timeout=300)
        assert result.returncode != 0 and "no CUDA device" in result.stderr


needs_cuda_triton = pytest.mark.skipif(not (torch.cuda.is_available() and HAS_TRITON),
                                       reason="needs a CUDA device and triton")


@needs_cuda_triton
@pytest.mark.parametrize("heads", [1, 2])
@pytest.mark.parametrize("need_alpha", [False, True])
def test_fused_matches_dense_on_cuda(monkeypatch, heads, need_alpha):
    """The compiled kernels (libdevice tanh, IEEE fp32 products: torch's default) against the dense
    path on the same weights: states, weights and every gradient, with node attributes, edge types,
    padding, one node and an empty sentence."""
    from cn3.layers import fused_energy  # noqa: PLC0415
    monkeypatch.setattr(fused_energy, "default_tanh", lambda dtype, capability=None: "libdevice")
    torch.manual_seed(0)
    fused = DynamicGraphLayer(64, attr_dim=8, n_edge_types=7, edge_dim=16, energy_dim=40, energy_heads=heads,
                              impl="fused").to(CUDA)
    dense = copy.deepcopy(fused)
    dense.impl = "dense"
    lengths = torch.tensor([45, 130, 1, 0])
    n = 130
    mask = padding_mask(lengths, n).to(CUDA)
    h = torch.randn(4, n, 64, device=CUDA, requires_grad=True)
    v = torch.randn(4, n, 8, device=CUDA)
    edges = torch.randint(0, 7, (4, n, n), device=CUDA)
    out, alpha, _ = fused(h, mask, v, edges, need_alpha=need_alpha)
    ref, ref_alpha, _ = dense(h, mask, v, edges)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-4)
    if need_alpha:
        torch.testing.assert_close(alpha, ref_alpha, atol=1e-5, rtol=1e-4)
    else:
        assert alpha is None
    probe = torch.randn_like(out)
    got = torch.autograd.grad((out * probe).sum(), [h, *fused.parameters()])
    want = torch.autograd.grad((ref * probe).sum(), [h, *dense.parameters()])
    for name, g, w in zip(["h"] + [name for name, _ in fused.named_parameters()], got, want):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-3, msg=lambda m, name=name: f"{name}: {m}")


@needs_cuda_triton
def test_fused_under_bf16_autocast_is_close_to_fp32_on_cuda():
    """bf16 tiles and the approximate tanh: states within bf16's rounding of the fp32 kernel's, and
    gradients within 5% (relative norm), returned in the parameters' dtype."""
    torch.manual_seed(0)
    layer = DynamicGraphLayer(64, n_edge_types=5, edge_dim=8, energy_dim=32, impl="fused").to(CUDA)
    h = torch.randn(8, 50, 64, device=CUDA, requires_grad=True)
    mask = padding_mask(torch.tensor([50, 31, 7, 50, 2, 50, 40, 1]), 50).to(CUDA)
    edges = torch.randint(0, 5, (8, 50, 50), device=CUDA)

    def run(bf16: bool):
        layer.zero_grad()
        h.grad = None
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            out = layer(h, mask, edge_type=edges, need_alpha=False)[0]
        out.float().sum().backward()
        return out.float().detach(), [p.grad.clone() for p in layer.parameters()], h.grad.clone()

    out32, grads32, h32 = run(False)
    out16, grads16, h16 = run(True)
    assert (out16 - out32).abs().max() < 0.05
    for g16, g32 in zip(grads16, grads32):
        assert g16.dtype == torch.float32
        assert (g16 - g32).norm() / g32.norm() < 0.05
    assert (h16 - h32).norm() / h32.norm() < 0.05


class _ApproxTanh(torch.autograd.Function):
    """``tanh(x) (1 + eps sign)``: the documented worst relative error of ``tanh.approx.f32`` with the
    given signs, differentiated as the kernels do (``1 - t^2`` of the approximate ``t``)."""

    @staticmethod
    def forward(ctx, x, signs, eps):
        t = torch.tanh(x) * (1 + eps * signs)
        ctx.save_for_backward(t)
        return t

    @staticmethod
    def backward(ctx, grad):
        (t,) = ctx.saved_tensors
        return grad * (1 - t * t), None, None


#: Documented tolerance of the approximate tanh against the exact one, in units of its relative
#: error ``eps = 2^-10.987``: each gradient's relative difference (Frobenius norm) at most 4 eps.
#: The outputs are bounded by derivation: ``|ds_ik| <= eps sum_j |u_j|``, so each weight moves by a
#: factor within ``exp(+-2 eps |u|_1)`` and ``|d out| <= (exp(2 eps |u|_1) - 1) max |v|``.
APPROX_GRAD_EPS = 4


@pytest.mark.parametrize("pattern", ["plus", "minus", "random"])
def test_approx_tanh_error_bounds_the_layer(pattern):
    """The hardware tanh's error, emulated in float64 at the bench's widths (e 100, d 300, two heads),
    moves the outputs within the derived bound and every gradient within the documented tolerance."""
    pytest.importorskip("triton")
    from cn3.layers.fused_energy import reference_attention  # noqa: PLC0415
    from cn3.layers.triton_common import APPROX_TANH_REL_ERROR as eps  # noqa: PLC0415

    gen = torch.Generator().manual_seed(0)
    b, n, e, d = 2, 30, 100, 300
    q, k, v = (torch.randn(*shape, generator=gen, dtype=torch.float64, requires_grad=True)
               for shape in ((b, n, e), (b, n, e), (b, n, d)))
    u = (torch.randn(2, e // 2, generator=gen, dtype=torch.float64) / e ** 0.5).requires_grad_()
    mask = padding_mask(torch.tensor([n, 17]), n)
    signs = {"plus": torch.ones(b, n, n, e // 2, dtype=torch.float64),
             "minus": -torch.ones(b, n, n, e // 2, dtype=torch.float64),
             "random": torch.randint(0, 2, (b, n, n, e // 2), generator=gen).double() * 2 - 1}[pattern]
    exact, _ = reference_attention(q, k, u, v, mask, mask)
    approx, _ = reference_attention(q, k, u, v, mask, mask, tanh=lambda x: _ApproxTanh.apply(x, signs, eps))
    bound = (torch.exp(2 * eps * u.abs().sum(-1).max()) - 1) * v.abs().max()
    assert 0 < (approx - exact).abs().max() <= bound
    probe = torch.randn(exact.shape, generator=gen, dtype=torch.float64)
    for got, want in zip(torch.autograd.grad((approx * probe).sum(), [q, k, u, v]),
                         torch.autograd.grad((exact * probe).sum(), [q, k, u, v])):
        assert (got - want).norm() / want.norm() <= APPROX_GRAD_EPS * eps


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
@pytest.mark.slow  # dynamo's and AOTAutograd's first trace in a process: 5-8 s
def test_the_op_traces_without_graph_breaks():
    """``torch.compile(fullgraph=True)`` of a function calling the op: one forward graph holding
    ``cn3::fused_additive_attention_fwd`` and one backward graph holding ``_bwd`` (meta tensors: the
    op's fake kernels, no Triton kernel runs)."""
    from functorch.compile import make_boxed_func  # noqa: PLC0415
    from torch._dynamo.backends.common import aot_autograd  # noqa: PLC0415

    from cn3.layers.fused_energy import fused_additive_attention  # noqa: PLC0415

    graphs = []

    def record(gm, _example_inputs):
        graphs.append([str(node.target) for node in gm.graph.nodes if node.op == "call_function"])
        return make_boxed_func(gm.forward)

    def loss(q, k, u, v, mask, edge_vecs, edge_type):
        out, _ = fused_additive_attention(q, k, u, v, mask, mask, edge_vecs, edge_type, need_alpha=False,
                                          tanh="approx")
        return out.float().pow(2).sum()

    meta = torch.device("meta")
    q, k, v = (torch.randn(*s, device=meta, requires_grad=True) for s in ((2, 5, 8), (2, 5, 8), (2, 5, 6)))
    u = torch.randn(2, 4, device=meta, requires_grad=True)
    edge_vecs = torch.randn(3, 8, device=meta, requires_grad=True)
    mask = torch.ones(2, 5, dtype=torch.bool, device=meta)
    edge_type = torch.zeros(2, 5, 5, dtype=torch.long, device=meta)
    compiled = torch.compile(loss, fullgraph=True, backend=aot_autograd(fw_compiler=record, bw_compiler=record))
    compiled(q, k, u, v, mask, edge_vecs, edge_type).backward()
    assert len(graphs) == 2
    assert sum("cn3.fused_additive_attention_fwd" in target for target in graphs[0]) == 1
    assert sum("cn3.fused_additive_attention_bwd" in target for target in graphs[1]) == 1
    for x in (q, k, u, v, edge_vecs):
        assert x.grad is not None and x.grad.shape == x.shape


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_edge_types_reach_the_kernels_with_contiguous_rows():
    """The kernels read each sentence's ``(Nq, Nk)`` edge types with contiguous rows and take only the
    batch stride: an expanded view (one table for every sentence, as relative positions) is passed as
    it is, with batch stride 0; a view whose rows are not contiguous is copied."""
    from cn3.layers.fused_energy import _edge_args  # noqa: PLC0415
    like, vecs = torch.zeros(1), torch.randn(5, 8)
    shared = torch.randint(0, 5, (6, 7)).expand(3, 6, 7)
    _, et, stride = _edge_args(vecs, shared, like)
    assert et.data_ptr() == shared.data_ptr() and stride == 0
    transposed = torch.randint(0, 5, (3, 7, 6)).transpose(1, 2)
    _, et, stride = _edge_args(vecs, transposed, like)
    assert et.is_contiguous() and stride == 42 and torch.equal(et, transposed)
    _, et, stride = _edge_args(None, None, like)
    assert stride == 0 and et.shape == (1, 1, 1)


def _sm90_script():
    """``scripts/sm90_spills.py`` as a module (what it compiles and how it reads a spill)."""
    spec = importlib.util.spec_from_file_location("sm90_spills", REPO / "scripts" / "sm90_spills.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sm90_rows(script, name: str, precision: str, monkeypatch) -> list[dict]:
    """The rows of ``script.usage`` for kernel ``name``: every config in IEEE fp32; in TF32 and bf16 only
    the configs the checks below read (the key-side backward's tiles up to 512 pairs; the other kernels'
    configs in order up to the first spill-free one), one config at a time."""
    if precision == "ieee":
        return script.usage(name, precision)
    kernel, _ = script.kernels()[name]
    rows: list[dict] = []
    for config in list(kernel.configs):
        if name == "_attn_bwd_kv" and config.kwargs["BM"] * config.kwargs["BN"] > 512:
            continue
        if name != "_attn_bwd_kv" and any(not row["spills"] for row in rows):
            break
        with monkeypatch.context() as patch:
            patch.setattr(kernel, "configs", [config])
            rows += script.usage(name, precision)
    return rows


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
@pytest.mark.slow  # IEEE's 21 configs through Triton's compiler and ptxas: 30-40 s, TF32's and bf16's few 10-15 s
@pytest.mark.parametrize("precision", ["ieee", "tf32", "bf16"])
def test_configs_compile_for_sm90(precision, monkeypatch):
    """The candidate tiles of the three kernels through Triton's whole compiler for sm_90 at the
    bench's widths (e 100, d 300, one head, edge types), in IEEE fp32 (torch's default), TF32 and bf16
    products, no GPU needed. The autotuner times only the configs that spill nothing, all of them
    when every one spills: so each kernel must have a spill-free config (at most 255 registers, no
    stack, no local memory), and the key-side backward every tile up to 512 pairs (the spill the
    IEEE products had in all seven). IEEE compiles every tile and prints the table docs/gpu.md
    records; TF32 and bf16 compile only the tiles that decide those two checks (:func:`_sm90_rows`:
    all 21 took 50 s a precision with a cold Triton cache; ``scripts/sm90_spills.py`` prints their
    tables)."""
    pytest.importorskip("triton.backends.nvidia", reason="Triton without its NVIDIA backend")
    from cn3.layers.triton_common import INTERPRETING  # noqa: PLC0415
    if INTERPRETING:
        pytest.skip("this process runs Triton's interpreter")
    script = _sm90_script()
    for name in ("_attn_fwd", "_attn_bwd_kv", "_attn_bwd_q"):
        rows = _sm90_rows(script, name, precision, monkeypatch)
        print(name, precision, *rows, sep="\n  ")
        timed = [row for row in rows if not row["spills"]] or rows  # what the runtime prune keeps
        for row in timed:
            assert row["registers"] <= 255 and row["stack"] == 0 and row["local"] == 0, (name, row)
        if name == "_attn_bwd_kv":
            small = [row for row in rows if row["BM"] * row["BN"] <= 512]
            assert small and not any(row["spills"] for row in small), small


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
@pytest.mark.slow  # two kernels through Triton's compiler: 5-20 s (seconds when cached)
@pytest.mark.parametrize("name", ["_attn_bwd_kv", "_attn_bwd_q"])
def test_backward_passes_end_each_outer_iteration_with_a_barrier(name):
    """Each backward pass adds into its outputs (dv, dk, du; dq) one outer block at a time, loading
    them in another thread layout than it stored them: the outer loop's body must end with a barrier
    after its last store (Triton's IR for sm_90, before layouts are assigned, holds only the explicit
    one), so no thread reads an element before the thread that stored it has."""
    pytest.importorskip("triton.backends.nvidia", reason="Triton without its NVIDIA backend")
    import triton  # noqa: PLC0415
    from triton.backends.compiler import GPUTarget  # noqa: PLC0415
    from triton.compiler import ASTSource  # noqa: PLC0415

    from cn3.layers import fused_energy as fe  # noqa: PLC0415
    if fe.INTERPRETING:
        pytest.skip("this process runs Triton's interpreter")
    script = _sm90_script()
    kernel, flags = script.kernels()[name]
    constexprs = dict(EH=100, DH=300, **fe.value_parts(300), HAS_EDGE=True, TANH=2, DOT_PREC="tf32", **flags,
                      BM=16, BN=16, BE=4)
    params = {p.name for p in kernel.fn.params}
    source = ASTSource(kernel.fn, script.signature(kernel.fn, "fp32"),
                       constexprs={k: v for k, v in constexprs.items() if k in params})
    lines = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": 4, "num_stages": 1}).asm["ttir"].splitlines()
    start = next(i for i, line in enumerate(lines) if "scf.for" in line)  # the outer loop (queries or keys)
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(" " * indent + "}"))
    body = [line.strip() for line in lines[start + 1:end] if len(line) - len(line.lstrip()) == indent + 2]
    assert "barrier" in body[-1], body[-3:]
    assert sum("barrier" in line for line in lines) == 1
    assert any("tt.store" in line for line in lines[start:end])


@needs_cuda_triton
def test_fused_with_the_hardware_tanh_on_cuda():
    """The default on CUDA, ``tanh.approx.f32``, against the dense path (exact tanh, IEEE fp32): the
    outputs within the derived bound ``(exp(2 eps |u|_1) - 1) max |v|`` and every gradient within
    the documented ``APPROX_GRAD_EPS`` eps relative norm (plus fp32's own rounding)."""
    from cn3.layers.triton_common import APPROX_TANH_REL_ERROR as eps  # noqa: PLC0415
    torch.manual_seed(0)
    fused = DynamicGraphLayer(64, n_edge_types=5, edge_dim=8, energy_dim=32, impl="fused").to(CUDA)
    dense = copy.deepcopy(fused)
    dense.impl = "dense"
    h = torch.randn(6, 40, 64, device=CUDA, requires_grad=True)
    mask = padding_mask(torch.tensor([40, 31, 7, 1, 0, 22]), 40).to(CUDA)
    edges = torch.randint(0, 5, (6, 40, 40), device=CUDA)
    out, _, _ = fused(h, mask, edge_type=edges, need_alpha=False)
    ref, _, _ = dense(h, mask, edge_type=edges)
    bound = (torch.exp(2 * eps * fused.u.abs().sum()) - 1) * h.abs().max()
    assert (out - ref).abs().max() <= bound + 1e-5
    probe = torch.randn_like(out)
    got = torch.autograd.grad((out * probe).sum(), [h, *fused.parameters()])
    want = torch.autograd.grad((ref * probe).sum(), [h, *dense.parameters()])
    for g, w in zip(got, want):
        assert (g - w).norm() / w.norm() <= APPROX_GRAD_EPS * eps + 1e-4


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_default_tanh_is_the_special_function_unit_where_the_gpu_has_it():
    """Outside the interpreter: ``tanh.approx.bf16x2`` for bf16 tiles from sm_90 only (ptxas rejects it
    below), the exact libdevice form for bf16 below; ``tanh.approx.f32`` for fp32 and fp16 from sm_75;
    libdevice's for fp64 and an unknown GPU; forcing a form the GPU lacks is refused, naming it."""
    from cn3.layers.triton_common import INTERPRETING, check_tanh, default_tanh  # noqa: PLC0415
    if INTERPRETING:
        pytest.skip("this process runs Triton's interpreter")
    dtypes = (torch.bfloat16, torch.float32, torch.float16, torch.float64)
    assert [default_tanh(d, (9, 0)) for d in dtypes] == ["approx_bf16", "approx", "approx", "libdevice"]
    assert [default_tanh(d, (10, 0)) for d in dtypes] == ["approx_bf16", "approx", "approx", "libdevice"]
    assert [default_tanh(d, (8, 9)) for d in dtypes] == ["libdevice", "approx", "approx", "libdevice"]
    assert [default_tanh(d, (8, 0)) for d in dtypes] == ["libdevice", "approx", "approx", "libdevice"]
    assert [default_tanh(d, (7, 0)) for d in dtypes] == ["libdevice"] * 4
    assert [default_tanh(d, None) for d in dtypes] == ["libdevice"] * 4
    for form in ("sigmoid", "libdevice", "approx", "approx_bf16"):
        check_tanh(form)
        check_tanh(form, (9, 0))
    for form in ("sigmoid", "libdevice", "approx"):
        check_tanh(form, (8, 0))
    with pytest.raises(ValueError, match="'approx_bf16' needs .* sm_90 .* this one is sm_80"):
        check_tanh("approx_bf16", (8, 0))
    with pytest.raises(ValueError, match="'approx' needs .* sm_75 .* this one is sm_70"):
        check_tanh("approx", (7, 0))
    with pytest.raises(ValueError, match="tanh must be one of"):
        check_tanh("fast")


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_fused_attention_picks_and_checks_tanh_by_the_device_capability(monkeypatch):
    """The op asks its tensors' GPU: on a forced sm_80 a bf16 call defaults to the exact form and a
    forced ``approx_bf16`` is refused before any kernel compiles; on a forced sm_90 bf16 gets the
    hardware form (the choice seen where the op is entered, no GPU needed)."""
    from cn3.layers import fused_energy  # noqa: PLC0415
    if fused_energy.INTERPRETING:
        pytest.skip("this process runs Triton's interpreter")
    seen = []

    def fake_op(*args):
        seen.append(args[-1])  # the tanh form, the op's last argument
        raise RuntimeError("stop")

    monkeypatch.setattr(torch.ops.cn3, "fused_additive_attention_fwd", fake_op, raising=False)
    q = torch.zeros(1, 2, 4, dtype=torch.bfloat16)
    args = (q, q, torch.zeros(4, dtype=torch.bfloat16), torch.zeros(1, 2, 3, dtype=torch.bfloat16))
    for capability, form in (((8, 0), "libdevice"), ((8, 6), "libdevice"), ((9, 0), "approx_bf16")):
        monkeypatch.setattr(fused_energy, "device_capability", lambda device, c=capability: c)
        with pytest.raises(RuntimeError, match="stop"):
            fused_energy.fused_additive_attention(*args)
        assert seen[-1] == form
    monkeypatch.setattr(fused_energy, "device_capability", lambda device: (8, 0))
    with pytest.raises(ValueError, match="sm_90"):
        fused_energy.fused_additive_attention(*args, tanh="approx_bf16")
    assert len(seen) == 3


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_autotune_is_keyed_by_every_constexpr_and_cached_on_disk():
    """Each kernel's tuning key holds every constexpr its configs do not set (masks present,
    ``NEED_ALPHA``, widths, ``TANH``...), so a pick for one variant never serves another; the tiles are
    not in it; outside the interpreter the picks are cached on disk for later processes."""
    from cn3.layers import fused_energy as fe  # noqa: PLC0415
    if fe.INTERPRETING:
        pytest.skip("this process runs Triton's interpreter (one config, nothing tuned)")
    for kernel, configs in ((fe._attn_fwd, fe.FWD_CONFIGS), (fe._attn_bwd_kv, fe.BWD_CONFIGS),
                            (fe._attn_bwd_q, fe.BWD_CONFIGS)):
        tiles = {name for config in configs for name in config.kwargs}
        constexprs = {p.name for p in kernel.fn.params if p.is_constexpr}
        assert constexprs - tiles <= set(kernel.keys) and not tiles & set(kernel.keys), kernel.keys
        assert set(fe.TUNE_KEY) <= set(kernel.keys)
        assert kernel.cache_results
    assert "NEED_ALPHA" in fe._attn_fwd.keys and {"HAS_KMASK", "HAS_QMASK"} <= set(fe._attn_fwd.keys)
