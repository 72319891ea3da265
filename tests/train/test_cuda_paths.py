"""The ``--device cuda`` paths: every zoo encoder at every level it serves, the translation model's
forward, loss and backward, and beam search.

Two kinds of test, because this machine (and CI) has no GPU:

* ``test_*_on_cuda``, ``test_*_under_cuda_autocast``, ``test_*_deterministic_on_cuda`` run only
  where ``torch.cuda.is_available()``: forward and backward on ``cuda`` against the same weights on
  the CPU, the same under CUDA autocast (bf16 where supported, else fp16: CUDA's autocast op lists
  differ from the CPU's that tests/encoders/test_enc_autocast.py covers), and under
  ``torch.use_deterministic_algorithms(True, warn_only=True)`` no operation may report that it has
  no deterministic implementation (``index_add_`` and ``scatter_add_``, used by the Tree-LSTM, the
  syntactic GCN, CN3's edge types and hybrid attention, have one in that mode; nothing in cn3 turns
  the mode on by itself). Elsewhere they are SKIPPED with a reason that ``pytest -rs`` lists.

* ``test_*_device_tracking`` run everywhere, so that something real guards those paths here. They
  run the same forward and backward on the CPU under :class:`DeviceTracker`, which simulates
  CUDA's one rule that CPU-only testing never exercises: an operation may not mix tensors of two
  devices. Tensors created by a factory (``torch.arange``, ``zeros``, ``ones``, ``full``, ``empty``,
  ``tensor``, ...) without ``device=``, or moved by ``.cpu()``, are "host" tensors; anything derived
  from the inputs and parameters is a "device" tensor; an operation that takes both (a host tensor
  of at least one dimension: CUDA accepts CPU scalars) is reported with its ``file:line`` in cn3.
  It also follows the backward of cn3's own autograd Functions (the ON-LSTM scan, blockwise
  attention, hybrid weights). ``test_device_tracker_catches_*`` show that it is not vacuous.

Why this and not the alternatives: the ``meta`` device cannot run data-dependent code (``nonzero``,
``.item()``, packed sequences) and so skips half of the zoo; a fake CUDA device (``FakeTensorMode``)
fails on a CPU-only build ("not linked with support for cuda devices"); a grep for factory calls
without ``device=`` flags legitimate host tensors (packed-sequence lengths, CRF paths built on the
host) and misses tensors made on the host elsewhere and combined later. The tracker checks what
CUDA checks, on the paths the tests run. What it cannot see: dtype rules of CUDA autocast, CUDA
kernels' numerics and non-determinism; those are what the CUDA tests are for.
"""

from __future__ import annotations

import copy
import os
import traceback
import warnings
from pathlib import Path

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

from cn3.config import from_dict
from cn3.encoders import ENCODERS, EncoderArgs, build_encoder
from cn3.encoders.options import CN3Options
from cn3.layers.attention import padding_mask
from cn3.nmt.config import NMTModelConfig
from cn3.nmt.data import EOS, PAD
from cn3.nmt.search import beam_search, greedy_search
from cn3.nmt.transformer import ModelArgs, Seq2Seq
from cn3.sentence.crf_marginals import crf_marginals
from cn3.sentence.heads import CRFHead
from cn3.util.encoder_names import encoders_serving
from tests.references import chain_tree

pytestmark = pytest.mark.usefixtures("one_thread")

CN3_PACKAGE = str(Path(__file__).resolve().parents[2] / "cn3")
HAS_CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(
    not HAS_CUDA, reason="no CUDA device: torch.cuda.is_available() is False (the --device cuda paths are "
                         "simulated on CPU by the *_device_tracking tests of this file)")


# --------------------------------------------------------------------------- the device tracker

FACTORIES = {torch.arange, torch.zeros, torch.ones, torch.full, torch.empty, torch.tensor, torch.as_tensor,
             torch.eye, torch.rand, torch.randn, torch.randint, torch.linspace, torch.logspace, torch.randperm,
             torch.empty_strided, torch.scalar_tensor, torch.from_numpy}
# Cross-device by design: transfers and copies, indexing with host index tensors (CUDA accepts
# them), and pack_padded_sequence, whose lengths must be on the host.
MAY_MIX = {"to", "cpu", "cuda", "copy_", "__getitem__", "__setitem__", "_pack_padded_sequence", "__get__", "__set__"}


class DeviceTracker(TorchFunctionMode):
    """Runs on the CPU and tags every tensor as "host" or "device" (see the module docstring);
    ``violations`` lists ``(operation, file:line)`` of the operations that mixed the two."""

    def __init__(self):
        super().__init__()
        self.host = WeakIdKeyDictionary()
        self.violations: list[tuple[str, str]] = []

    def _on_host(self, t: torch.Tensor) -> bool:
        return t in self.host

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", str(func))
        tensors = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        host = [t for t in tensors if self._on_host(t)]
        device = [t for t in tensors if not self._on_host(t)]
        if name not in MAY_MIX and device and any(t.dim() > 0 for t in host):
            frames = [f for f in traceback.extract_stack() if f.filename.startswith(CN3_PACKAGE)]
            self.violations.append((name, f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"))
        if func in FACTORIES:
            on_host = "device" not in kwargs
        elif name == "cpu":
            on_host = True
        elif name == "to":
            targets = [a for a in args[1:] if isinstance(a, (torch.Tensor, torch.device, str))]
            if "device" in kwargs:
                targets.append(kwargs["device"])
            if targets:  # .to(x), .to(x.device): the device (a CPU test cannot tell x.device from "cpu")
                on_host = any(t == "cpu" if isinstance(t, str) else isinstance(t, torch.Tensor) and self._on_host(t)
                              for t in targets)
            else:  # .to(dtype)
                on_host = bool(host)
        else:
            on_host = bool(host) and not device
        for o in tree_flatten(out)[0]:
            if isinstance(o, torch.Tensor):
                if on_host:
                    self.host[o] = True
                elif self._on_host(o) and (name == "to" or not (args and o is args[0])):
                    del self.host[o]  # moved (an in-place op on a host tensor stays on the host)
        return out

    def __enter__(self):
        # Autograd runs the backward of custom Functions without the mode: enter it there too
        # (patched on the outermost entry only; the backward's own entries nest inside it).
        self._depth = getattr(self, "_depth", 0) + 1
        if self._depth == 1:
            tracker = self
            self._apply = original = torch.autograd.function.BackwardCFunction.apply

            def apply(ctx, *args):
                with tracker:
                    return original(ctx, *args)

            torch.autograd.function.BackwardCFunction.apply = apply
        return super().__enter__()

    def __exit__(self, *exc):
        self._depth -= 1
        if self._depth == 0:
            torch.autograd.function.BackwardCFunction.apply = self._apply
        return super().__exit__(*exc)


def track(fn) -> list[tuple[str, str]]:
    tracker = DeviceTracker()
    with tracker:
        fn()
    return sorted(set(tracker.violations))


def test_device_tracker_catches_host_tensors_in_forward_and_custom_backward():
    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return 2 * x

        @staticmethod
        def backward(ctx, grad):
            return grad * torch.full(grad.shape, 2.0)  # no device=: a bug on CUDA

    x = torch.randn(4, requires_grad=True)
    backward_apply = torch.autograd.function.BackwardCFunction.apply
    assert [v[0] for v in track(lambda: x + torch.arange(4))] == ["add"]
    assert [v[0] for v in track(lambda: torch.where(torch.ones(4, dtype=torch.bool), x, 0.0))] == ["where"]
    assert [v[0] for v in track(lambda: x.index_select(0, torch.tensor([1, 0])))] == ["index_select"]
    assert [v[0] for v in track(lambda: Twice.apply(x).sum().backward())] == ["mul"]
    # what CUDA accepts is not reported
    assert track(lambda: x + torch.arange(4, device=x.device)) == []
    assert track(lambda: x + torch.arange(4).to(x)) == []
    assert track(lambda: x * torch.tensor(2.0)) == []  # a CPU scalar
    assert track(lambda: x[torch.tensor([1, 0])]) == []  # a host index
    assert torch.autograd.function.BackwardCFunction.apply is backward_apply  # restored on exit


# --------------------------------------------------------------------------- encoders

# every encoder at every level it serves, plus CN3 with all its inputs (attributes, edge types,
# relative positions, energy heads), which the defaults leave out
CASES = [(name, level, None) for name, spec in ENCODERS.items() for level in spec.levels]
CASES.append(("cn3", "graph", CN3Options(edge_attrs=True, energy_heads=2, relative_positions=2, energy_dim=20)))
IDS = [f"{name}-{level}" + ("-all_inputs" if extra else "") for name, level, extra in CASES]
BATCH, N, DIM, ATTR = 3, 7, 16, 6


def build(name: str, level: str, cn3: CN3Options | None, seed: int = 0) -> tuple[torch.nn.Module, dict]:
    """The encoder (dropout on, to cover its paths) and its inputs: padded, a row of one token."""
    spec = ENCODERS[name]
    uses_edges = spec.needs_trees or (cn3 is not None and cn3.edge_attrs)
    args = EncoderArgs(in_dim=DIM, d=DIM, layers=2, heads=2, ff=32, dropout=0.1, attention_dropout=0.1, level=level,
                       attr_dim=ATTR if spec.uses_attrs else 0, n_edge_types=5 if uses_edges else 0,
                       **({"cn3": cn3} if cn3 is not None else {}))
    torch.manual_seed(seed)
    encoder = build_encoder(name, args)
    g = torch.Generator().manual_seed(seed)
    inputs = {"x": torch.randn(BATCH, N, DIM, generator=g),
              "mask": padding_mask(torch.tensor([N, 4, 1]), N)}
    if spec.uses_attrs:
        inputs["v"] = torch.randn(BATCH, N, ATTR, generator=g)
    if uses_edges:
        inputs["edge_type"] = chain_tree(BATCH, N)
    return encoder, inputs


def run(encoder: torch.nn.Module, inputs: dict, device: str | None = None, seed: int = 1) -> dict:
    """Forward (training mode, dropout drawn from ``seed``) and backward, then an eval forward:
    outputs and gradients. ``device``: where to move the inputs first (None: where they are).

    The inputs are copied first, so ``x`` is a fresh leaf on every call: marking the caller's
    tensor would make the next call's ``.to(device)`` copy of it a non-leaf, whose ``.grad`` stays None."""
    inputs = {k: v.detach().clone().to(device or v.device) for k, v in inputs.items()}
    x = inputs.pop("x").requires_grad_()
    mask = inputs.pop("mask")
    encoder.train()
    torch.manual_seed(seed)
    h, info = encoder(x, mask, **inputs)
    pooled = encoder.pool(h, mask, info) if hasattr(encoder, "pool") else h
    (pooled.float().sum() + info.get("loss", 0.0)).backward()
    encoder.eval()
    with torch.no_grad():
        h_eval, _ = encoder(x, mask, **inputs)
    grads = {name: p.grad for name, p in encoder.named_parameters() if p.grad is not None}
    return {"h": h.detach(), "h_eval": h_eval, "x.grad": x.grad, **grads}


@pytest.mark.parametrize("name, level, cn3", CASES, ids=IDS)
def test_encoder_device_tracking(name, level, cn3):
    encoder, inputs = build(name, level, cn3)
    assert track(lambda: run(encoder, inputs)) == []


@needs_cuda
@pytest.mark.parametrize("name, level, cn3", CASES, ids=IDS)
def test_encoder_on_cuda_matches_cpu(name, level, cn3, exact_fp32):
    """Same weights, same inputs: the CUDA forward and backward give the CPU's results (dropout
    off: the two devices draw different masks)."""
    encoder, inputs = build(name, level, cn3)
    for module in encoder.modules():  # dropout off, through every path that reads a rate
        for attr in ("dropout", "p", "attention_dropout"):
            if isinstance(getattr(module, attr, None), float):
                setattr(module, attr, 0.0)
    gpu_encoder = on_cuda(encoder)
    on_cpu = run(encoder, inputs)
    on_gpu = run(gpu_encoder, inputs, "cuda")
    assert on_cpu.keys() == on_gpu.keys()
    for key, expected in on_cpu.items():
        got = on_gpu[key]
        assert got.device.type == "cuda", key
        torch.testing.assert_close(got.cpu(), expected, rtol=1e-3, atol=1e-4, msg=lambda m: f"{key}: {m}")


def on_cuda(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``module`` on CUDA, made before the CPU run: ``module.to("cuda")`` after it would
    move the gradients that run left in the parameters, which its results hold, to CUDA too."""
    return copy.deepcopy(module).to("cuda")


def cuda_autocast_dtype() -> torch.dtype:
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


@needs_cuda
@pytest.mark.parametrize("name, level, cn3", CASES, ids=IDS)
def test_encoder_under_cuda_autocast(name, level, cn3):
    encoder, inputs = build(name, level, cn3)
    encoder.to("cuda")
    inputs = {k: v.to("cuda") for k, v in inputs.items()}
    x = inputs.pop("x").requires_grad_()
    mask = inputs.pop("mask")
    with torch.autocast("cuda", dtype=cuda_autocast_dtype()):
        h, info = encoder(x, mask, **inputs)
        pooled = encoder.pool(h, mask, info) if hasattr(encoder, "pool") else h
    (pooled.float().sum() + info.get("loss", 0.0)).backward()
    assert torch.isfinite(h.float()).all() and (h[~mask] == 0).all()
    grads = [p.grad for p in encoder.parameters() if p.requires_grad]
    assert all(g is not None and g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)
    assert torch.isfinite(x.grad).all()


@pytest.fixture
def exact_fp32():
    """No TF32 in matrix products and convolutions (cuDNN allows it by default): compare fp32 with fp32."""
    if not HAS_CUDA:
        yield
        return
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.fixture
def deterministic():
    saved = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    yield
    torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])


@needs_cuda
@pytest.mark.parametrize("name, level, cn3", CASES, ids=IDS)
def test_encoder_deterministic_on_cuda(name, level, cn3, deterministic):
    """Under ``torch.use_deterministic_algorithms`` no operation lacks a deterministic kernel, and
    with ``CUBLAS_WORKSPACE_CONFIG`` set (cuBLAS needs it for that) two runs agree bit for bit."""
    encoder, inputs = build(name, level, cn3)
    encoder.to("cuda")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = run(encoder, inputs, "cuda")
    missing = [str(w.message) for w in caught if "does not have a deterministic implementation" in str(w.message)]
    assert not missing, missing
    if os.environ.get("CUBLAS_WORKSPACE_CONFIG") in (":4096:8", ":16:8"):
        encoder.zero_grad(set_to_none=True)
        second = run(encoder, inputs, "cuda")
        for key in first:
            assert torch.equal(first[key], second[key]), key


def crf_head_paths(head: CRFHead, h: torch.Tensor, mask: torch.Tensor, tags: torch.Tensor) -> dict:
    head.zero_grad(set_to_none=True)
    head.loss(h, mask, tags).backward()
    with torch.no_grad():
        decoded = head.decode(h, mask)
        marginals = crf_marginals(head.crf, head.emissions(h), mask)
    return {"decoded": decoded, "marginals": marginals, **{n: p.grad for n, p in head.named_parameters()}}


def crf_head_case() -> tuple[CRFHead, torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    head = CRFHead(DIM, 5)
    mask = padding_mask(torch.tensor([N, 4, 1]), N)
    return head, torch.randn(BATCH, N, DIM), mask, torch.randint(0, 5, (BATCH, N))


def test_crf_head_device_tracking():
    """The tagging head (loss, Viterbi paths built on the host, marginals) on top of every node-level encoder."""
    head, h, mask, tags = crf_head_case()
    assert track(lambda: crf_head_paths(head, h, mask, tags)) == []


@needs_cuda
def test_crf_head_on_cuda_matches_cpu(exact_fp32):
    head, h, mask, tags = crf_head_case()
    gpu_head = on_cuda(head)
    on_cpu = crf_head_paths(head, h, mask, tags)
    on_gpu = crf_head_paths(gpu_head, h.cuda(), mask.cuda(), tags.cuda())
    for key, expected in on_cpu.items():
        assert on_gpu[key].device.type == "cuda", key
        torch.testing.assert_close(on_gpu[key].cpu(), expected, rtol=1e-3, atol=1e-4, msg=lambda m: f"{key}: {m}")


# --------------------------------------------------------------------------- translation model

V = 30
TRANSLATION_ENCODERS = encoders_serving("translation")


def translation_model(encoder: str) -> Seq2Seq:
    torch.manual_seed(0)
    cfg = from_dict(NMTModelConfig, {"encoder": encoder, "d_model": 16, "heads": 2, "ff": 32, "encoder_layers": 3,
                                     "decoder_layers": 2, "dropout": 0.1, "rnn": {"layers": 1, "chunk_size": 4},
                                     "hybrid": {"layers": 2, "window": 1}})
    return Seq2Seq(cfg, ModelArgs(V, V))


def sentences(lengths: list[int], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    out = torch.full((len(lengths), max(lengths)), PAD)
    for i, n in enumerate(lengths):
        out[i, : n - 1] = torch.randint(4, V, (n - 1,), generator=g)
        out[i, n - 1] = EOS
    return out


def translate(model: Seq2Seq, src: torch.Tensor, tgt: torch.Tensor) -> dict:
    """Training forward, loss and backward; then one beam search step and greedy decoding."""
    model.train()
    torch.manual_seed(1)
    logits = model(src, tgt[:, :-1])
    loss, nll = model.loss(logits, tgt[:, 1:])
    loss.backward()
    model.eval()
    with torch.no_grad():
        memory, mask, _ = model.encode(src)
        state = model.start(memory, mask)
        step = model.step(torch.full((3,), model.args.bos, device=src.device), state)
    beam = beam_search(model, src, beam=3, max_len_a=0.0, max_len_b=1)  # the first step, then </s>
    greedy = greedy_search(model, src, max_len_a=0.0, max_len_b=3)
    grads = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    return {"logits": logits.detach(), "loss": loss.detach(), "step": step, "beam": beam, "greedy": greedy, **grads}


@pytest.mark.parametrize("encoder", TRANSLATION_ENCODERS)
def test_translation_device_tracking(encoder):
    model = translation_model(encoder)
    src, tgt = sentences([6, 3, 5], 0), sentences([5, 4, 2], 1)  # made outside: the batch, moved to the device
    assert track(lambda: translate(model, src, tgt)) == []


@needs_cuda
@pytest.mark.parametrize("encoder", TRANSLATION_ENCODERS)
def test_translation_on_cuda_matches_cpu(encoder, exact_fp32):
    model = translation_model(encoder)
    model.cfg.dropout = model.cfg.attention_dropout = 0.0
    for module in model.modules():
        for attr in ("dropout", "p", "attention_dropout"):
            if isinstance(getattr(module, attr, None), float):
                setattr(module, attr, 0.0)
    src, tgt = sentences([6, 3, 5], 0), sentences([5, 4, 2], 1)
    gpu_model = on_cuda(model)
    on_cpu = translate(model, src, tgt)
    on_gpu = translate(gpu_model, src.cuda(), tgt.cuda())
    for key, expected in on_cpu.items():
        got = on_gpu[key]
        if isinstance(expected, torch.Tensor):
            assert got.device.type == "cuda", key
            torch.testing.assert_close(got.cpu(), expected, rtol=1e-3, atol=1e-4, msg=lambda m: f"{key}: {m}")
        else:  # decoded token lists
            assert got == expected, key


@needs_cuda
@pytest.mark.parametrize("encoder", TRANSLATION_ENCODERS)
def test_translation_under_cuda_autocast(encoder):
    model = translation_model(encoder).to("cuda")
    src, tgt = sentences([6, 3, 5], 0).cuda(), sentences([5, 4, 2], 1).cuda()
    with torch.autocast("cuda", dtype=cuda_autocast_dtype()):
        loss, _ = model.loss(model(src, tgt[:, :-1]), tgt[:, 1:])
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is None or (p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all())
               for p in model.parameters())
    with torch.autocast("cuda", dtype=cuda_autocast_dtype()):
        assert len(beam_search(model, src, beam=3, max_len_a=0.0, max_len_b=2)) == 3
