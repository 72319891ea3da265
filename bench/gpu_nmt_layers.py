"""NMT encoder layers on a GPU: hybrid against Transformer, ON-LSTM against
cuDNN's LSTM, in fp32 and under bf16 autocast, forward + backward, in one process.

    python3 bench/gpu_nmt_layers.py --json OUT/gpu_nmt_layers.json    # on a CUDA machine, < 90 s on an H100
    .venv/bin/python bench/gpu_nmt_layers.py --quick                    # tiny sizes on the CPU (a smoke test)

1. The hybrid encoder layer (:class:`cn3.layers.transformer.EncoderLayer` around
   :class:`cn3.layers.hybrid_attention.HybridSelfAttention`, gate mode, window 1) against the
   Transformer encoder layer (the same layer around :class:`cn3.layers.transformer.MultiHeadAttention`),
   pre-norm, feed-forward 4d, dropout and attention dropout 0.1, training mode, a padding mask with
   lengths in ``[N/2, N]``, at ``B x N x d`` = 64x25x256 (4 heads), 32x50x512, 8x200x512, 128x30x512
   (8 heads). Target: hybrid / Transformer <= 1.10. The hybrid layer runs its default
   (on CUDA the SDPA path) and, as ``hybrid-weights``, the weights path (``sdpa="never"``), the one
   the CPU runs, so that the gain of the SDPA path is measured beside it.
2. The ON-LSTM layer (:class:`cn3.layers.onlstm.ONLSTM`, chunk 8, input = hidden = d) against
   ``torch.nn.LSTM`` of the same width (cuDNN on CUDA), full rows, at 64x25x256 and 32x50x512. Target:
   ON-LSTM / LSTM <= 3. ``onlstm`` is the default (``kernel="auto"``: the Triton kernels on CUDA up to
   hidden 1024 and the plain scan above, :func:`cn3.layers.onlstm._use_triton`), ``onlstm-plain`` the
   plain scan (``kernel="scan"``) and, on CUDA with Triton, ``onlstm-triton`` the Triton
   kernels (:mod:`cn3.layers.onlstm_triton`, ``kernel="triton"``) on the same weights, with the
   largest difference of its output and input gradient from the plain scan's (``triton_max_diff``, one
   fp32 call: a check on the kernels' barriers at real sizes). The first calls of the default and of
   the Triton kernels compile them; those times are reported as ``compile_s`` and
   ``triton_compile_s`` and are not in the medians.

Floor: each ON-LSTM row also gives the special-function floor of the layer on the card (named, as
``bench/gpu_layers.py``'s :data:`CARDS`): ``2 B N (8 hidden + 2 n_chunks)`` special-function results
(per unit and step 2 tanh and 3 sigmoids of two each, per chunk 2 exp; once forward, once more in
the backward's recomputation) at the card's rate, and ``x floor``, the default's time over it.

Every module runs in fp32 and under ``torch.autocast(device, bfloat16)`` (the forward inside, the
backward following, as ``train.precision=bf16`` does). Timing: ``--warmup`` calls, then the modules of
one comparison alternate for ``--repeats`` rounds; each call (zero grads, forward, ``sum().backward()``)
is timed by CUDA events on the GPU (``time.perf_counter`` after a synchronisation on the CPU); the
medians and their ratio are printed, with ``bf16/fp32`` per module (< 1: bf16 is faster). ``--json``
writes every row, the device's name and the targets' verdicts.

A column this CPU cannot run is left out rather than crashing the run: on the CPU, a module whose
first call fails because oneDNN has no primitive for it here (``nn.LSTM`` under bf16 autocast on a
CPU without AVX-512, e.g. an AVX2-only AMD EPYC) is not timed; its row says so under
``not_supported`` (column -> ``"not supported on this CPU: <oneDNN's error>"``), the ratios that
need it are absent, the printed table shows the reason in its place, and the summary lists every
such column under ``not_supported``. Any other error, and every error on a GPU, is raised.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cn3.layers.onlstm as onlstm  # noqa: E402
from cn3.layers.attention import padding_mask  # noqa: E402
from cn3.layers.hybrid_attention import HybridSelfAttention  # noqa: E402
from cn3.layers.onlstm import ONLSTM  # noqa: E402
from cn3.layers.transformer import EncoderLayer, MultiHeadAttention  # noqa: E402

ATTENTION_SHAPES = [(64, 25, 256, 4), (32, 50, 512, 8), (8, 200, 512, 8), (128, 30, 512, 8)]
RNN_SHAPES = [(64, 25, 256), (32, 50, 512)]
QUICK_ATTENTION_SHAPES = [(4, 7, 32, 4), (2, 12, 32, 4)]
QUICK_RNN_SHAPES = [(4, 6, 32)]
HYBRID_TARGET, ONLSTM_TARGET = 1.10, 3.0


def _gpu_layers():
    """``bench/gpu_layers.py`` as a module (its card table and floor)."""
    spec = importlib.util.spec_from_file_location("gpu_layers", Path(__file__).with_name("gpu_layers.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def onlstm_floor_ms(batch: int, n: int, hidden: int, chunk_size: int, rate: float) -> float:
    """Milliseconds of one ON-LSTM forward + backward's special-function work at ``rate`` a second."""
    return 2 * batch * n * (8 * hidden + 2 * (hidden // chunk_size)) / rate * 1e3


class Timer:
    """Seconds of one call: CUDA events on a GPU (the GPU's time of the queued work, waited for),
    ``perf_counter`` on the CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def __call__(self, fn) -> float:
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3
        begin = time.perf_counter()
        fn()
        return time.perf_counter() - begin


def train_step(module: nn.Module, inputs: tuple, bf16: bool, device: torch.device):
    """Zero grads, forward (under bf16 autocast when asked), ``sum().backward()``."""
    def run():
        module.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            out = module(*inputs)
        out = out[0] if isinstance(out, tuple) else out
        out.float().sum().backward()
    return run


ONEDNN_UNSUPPORTED = "could not create a primitive descriptor"
"""The start of the RuntimeError oneDNN raises where this CPU has no primitive for a call (its bf16
LSTM needs AVX-512)."""


def cpu_unsupported(fn, device: torch.device) -> str | None:
    """Calls ``fn()`` once (a warm-up call). Returns None when it runs, or, on the CPU when it raises
    oneDNN's :data:`ONEDNN_UNSUPPORTED` RuntimeError, ``"not supported on this CPU: <the error's first
    sentence>"``. Raises any other error, and every error on another device."""
    try:
        fn()
    except RuntimeError as error:
        if device.type != "cpu" or ONEDNN_UNSUPPORTED not in str(error):
            raise
        return f"not supported on this CPU: {str(error).split('. ')[0]}"
    return None


def race(fns: dict, warmup: int, repeats: int, timer: Timer,
         device: torch.device) -> tuple[dict[str, float], dict[str, str]]:
    """Median seconds of each function, the functions alternating round by round after ``warmup``
    calls each; and the functions this CPU cannot run (:func:`cpu_unsupported`, their first warm-up
    call), name -> reason, which are left out of the medians."""
    skipped = {}
    for name, fn in list(fns.items()):
        if (reason := cpu_unsupported(fn, device)) is not None:
            skipped[name] = reason
            continue
        for _ in range(warmup - 1):
            fn()
    fns = {name: fn for name, fn in fns.items() if name not in skipped}
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(timer(fn))
    return {name: statistics.median(t) for name, t in times.items()}, skipped


def ratios(t: dict[str, float], pairs: list[tuple[str, str]]) -> dict[str, float]:
    """``"a/b": t[a] / t[b]`` for each pair whose both columns ran."""
    return {f"{a}/{b}": t[a] / t[b] for a, b in pairs if a in t and b in t}


def bf16_over_fp32(ms: dict[str, dict[str, float]]) -> dict[str, float]:
    """``"bf16/fp32 <column>"`` for each column that ran in both precisions."""
    return {f"bf16/fp32 {k}": ms["bf16"][k] / ms["fp32"][k] for k in ms["bf16"] if k in ms["fp32"]}


class Pinned(nn.Module):
    """Runs ``module`` (an :class:`~cn3.layers.onlstm.ONLSTM`, shared with the ``onlstm`` column, so the
    same weights) with its ``kernel`` set to ``kernel`` for the call: ``scan`` for ``onlstm-plain``,
    ``triton`` for ``onlstm-triton``."""

    def __init__(self, module: nn.Module, kernel: str = "scan"):
        super().__init__()
        self.module, self.kernel = module, kernel

    def forward(self, *args):
        saved, self.module.kernel = self.module.kernel, self.kernel
        try:
            return self.module(*args)
        finally:
            self.module.kernel = saved


def triton_available(device: torch.device) -> bool:
    """ON-LSTM's Triton kernels run here: CUDA, with Triton installed."""
    if device.type != "cuda":
        return False
    try:
        import cn3.layers.onlstm_triton  # noqa: F401, PLC0415 - triton is optional
    except ImportError:
        return False
    return True


def max_difference(a: nn.Module, b: nn.Module, x: torch.Tensor, mask: torch.Tensor) -> float:
    """The largest absolute difference of two modules' outputs and input gradients, one fp32 call."""
    results = []
    for module in (a, b):
        x.grad = None
        out = module(x, mask)[0]
        out.sum().backward()
        results.append((out.detach(), x.grad.clone()))
    x.grad = None
    return max(float((p - q).abs().max()) for p, q in zip(*results))


def encoder_layer(attn: nn.Module, d: int) -> EncoderLayer:
    return EncoderLayer(attn, d, 4 * d, 0.1, norm="pre")


def bench_attention(shapes, device, args, timer) -> list[dict]:
    rows = []
    for b, n, d, h in shapes:
        torch.manual_seed(0)
        x = torch.randn(b, n, d, device=device)
        lengths = torch.randint(max(1, n // 2), n + 1, (b,), device=device)
        lengths[0] = n
        mask = padding_mask(lengths, n)
        weights_path = HybridSelfAttention(d, h, 0.1, window=1, mode="hybrid")
        weights_path.sdpa = "never"
        layers = {"transformer": encoder_layer(MultiHeadAttention(d, h, 0.1), d),
                  "hybrid": encoder_layer(HybridSelfAttention(d, h, 0.1, window=1, mode="hybrid"), d),
                  "hybrid-weights": encoder_layer(weights_path, d)}
        layers = {k: m.to(device).train() for k, m in layers.items()}
        ms, skipped = {}, {}
        for precision in ("fp32", "bf16"):
            times, skipped[precision] = race({k: train_step(m, (x, mask), precision == "bf16", device)
                                              for k, m in layers.items()}, args.warmup, args.repeats, timer, device)
            ms[precision] = {k: t * 1e3 for k, t in times.items()}
        for precision in ("fp32", "bf16"):
            t = ms[precision]
            rows.append({"part": "attention", "shape": f"{b}x{n}x{d}", "heads": h, "precision": precision,
                         **{f"{k}_ms": v for k, v in t.items()},
                         **ratios(t, [("hybrid", "transformer"), ("hybrid-weights", "transformer")]),
                         **(bf16_over_fp32(ms) if precision == "bf16" else {}),
                         **({"not_supported": skipped[precision]} if skipped[precision] else {})})
    return rows


def bench_rnn(shapes, device, args, timer) -> list[dict]:
    rows = []
    for b, n, d in shapes:
        torch.manual_seed(0)
        x = torch.randn(b, n, d, device=device, requires_grad=True)
        mask = torch.ones(b, n, dtype=torch.bool, device=device)
        modules = {"lstm": nn.LSTM(d, d, batch_first=True), "onlstm": ONLSTM(d, d, chunk_size=8)}
        modules["onlstm-plain"] = Pinned(modules["onlstm"])
        if triton_available(device):
            modules["onlstm-triton"] = Pinned(modules["onlstm"], kernel="triton")
        modules = {k: m.to(device).train() for k, m in modules.items()}
        inputs = {k: (x,) if k == "lstm" else (x, mask) for k in modules}
        # the first calls of the Triton kernels (the default's, where auto picks them, and the Triton
        # column's) compile them (once per process): timed apart
        first_calls = {}
        for name in ("onlstm", "onlstm-triton"):
            begin = time.perf_counter()
            for bf16 in (False, True) if name in modules else ():
                train_step(modules[name], inputs[name], bf16, device)()
            if device.type == "cuda":
                torch.cuda.synchronize()
            first_calls[name] = time.perf_counter() - begin
        triton_diff = ({"triton_max_diff": max_difference(modules["onlstm-triton"], modules["onlstm-plain"], x, mask),
                        "triton_compile_s": first_calls["onlstm-triton"]} if "onlstm-triton" in modules else {})
        ms, skipped = {}, {}
        for precision in ("fp32", "bf16"):
            times, skipped[precision] = race({k: train_step(m, inputs[k], precision == "bf16", device)
                                              for k, m in modules.items()}, args.warmup, args.repeats, timer, device)
            ms[precision] = {k: t * 1e3 for k, t in times.items()}
        rate = _gpu_layers().tanh_rate(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
        floor = onlstm_floor_ms(b, n, d, 8, rate[0]) if rate else None
        for precision in ("fp32", "bf16"):
            t = ms[precision]
            rows.append({"part": "rnn", "shape": f"{b}x{n}x{d}", "precision": precision,
                         "floor_ms": floor, "x_floor": t["onlstm"] / floor if floor and "onlstm" in t else None,
                         "floor_card": rate[1] if rate else None,
                         **{f"{k}_ms": v for k, v in t.items()},
                         **ratios(t, [("onlstm", "lstm"), ("onlstm-plain", "lstm"), ("onlstm-triton", "lstm"),
                                      ("onlstm-triton", "onlstm-plain")]),
                         **(triton_diff if "onlstm-triton" in t else {}),
                         "default_kernel": "triton" if onlstm._use_triton("auto", device, torch.float32, d) else "scan",
                         "compile_s": first_calls["onlstm"],
                         **(bf16_over_fp32(ms) if precision == "bf16" else {}),
                         **({"not_supported": skipped[precision]} if skipped[precision] else {})})
    return rows


def shown_ms(row: dict, column: str) -> str:
    """A column's printed median ms, or the reason it did not run (``row["not_supported"]``)."""
    reason = row.get("not_supported", {}).get(column)
    return reason if reason is not None else f"{row[f'{column}_ms']:7.3f}"


def shown_ratio(row: dict, key: str, suffix: str = "x") -> str:
    """A printed ratio, ``-`` where a column it needs did not run."""
    return f"{row[key]:.2f}{suffix}" if key in row else "-"


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"CPU: {name}, {torch.get_num_threads()} thread(s)"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes on the CPU, few repeats (a smoke test)")
    parser.add_argument("--device", default=None, help="default: cuda when available (cpu with --quick)")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write the summary here")
    args = parser.parse_args(argv)
    device = torch.device(args.device or ("cpu" if args.quick or not torch.cuda.is_available() else "cuda"))
    args.repeats = args.repeats or (3 if args.quick else 25)
    args.warmup = args.warmup or (1 if args.quick else 5)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 (torch's default), stated here
    timer = Timer(device)
    began = time.perf_counter()
    name = device_name(device)
    print(f"{name}; torch {torch.__version__}; {args.repeats} rounds after {args.warmup} warm-up calls; "
          f"forward + backward, median ms")
    attention = bench_attention(QUICK_ATTENTION_SHAPES if args.quick else ATTENTION_SHAPES, device, args, timer)
    print(f"\nencoder layer (pre-norm, ff 4d, dropout 0.1, training): hybrid / Transformer, target <= {HYBRID_TARGET}")
    for r in attention:
        print(f"  {r['shape']:<11} {r['precision']}  Transformer {shown_ms(r, 'transformer')}  hybrid "
              f"{shown_ms(r, 'hybrid')} ({shown_ratio(r, 'hybrid/transformer')})  weights path "
              f"{shown_ms(r, 'hybrid-weights')} ({shown_ratio(r, 'hybrid-weights/transformer')})"
              + (f"  bf16/fp32: T {shown_ratio(r, 'bf16/fp32 transformer', '')} "
                 f"H {shown_ratio(r, 'bf16/fp32 hybrid', '')}" if r["precision"] == "bf16" else ""))
    rnn = bench_rnn(QUICK_RNN_SHAPES if args.quick else RNN_SHAPES, device, args, timer)
    print(f"\nrecurrent layer (full rows): ON-LSTM / nn.LSTM, target <= {ONLSTM_TARGET}")
    for r in rnn:
        print(f"  {r['shape']:<11} {r['precision']}  LSTM {shown_ms(r, 'lstm')}  ON-LSTM {shown_ms(r, 'onlstm')} "
              f"({shown_ratio(r, 'onlstm/lstm')}, kernel: {r['default_kernel']}, first calls "
              f"{r['compile_s']:.1f} s)  plain scan {shown_ms(r, 'onlstm-plain')} "
              f"({shown_ratio(r, 'onlstm-plain/lstm')})"
              + (f"  floor {r['floor_ms']:.4f} ms ({r['floor_card']}), ON-LSTM {r['x_floor']:.0f}x"
                 if r["x_floor"] is not None else "  floor: -")
              + (f"  Triton {r['onlstm-triton_ms']:7.3f} ({shown_ratio(r, 'onlstm-triton/lstm')}, max |diff| "
                 f"{r['triton_max_diff']:.1e}, first calls {r['triton_compile_s']:.1f} s)" if "onlstm-triton_ms" in r
                 else "  (no Triton column: needs CUDA and triton)")
              + (f"  bf16/fp32: LSTM {shown_ratio(r, 'bf16/fp32 lstm', '')} "
                 f"ON-LSTM {shown_ratio(r, 'bf16/fp32 onlstm', '')}" if r["precision"] == "bf16" else ""))
    fp32 = [r for r in attention + rnn if r["precision"] == "fp32"]
    summary = {
        "device": name, "torch": torch.__version__, "quick": args.quick, "repeats": args.repeats,
        "warmup": args.warmup, "rows": attention + rnn,
        "targets": {
            "hybrid/transformer <= 1.10 (fp32)": all(r["hybrid/transformer"] <= HYBRID_TARGET
                                                     for r in fp32 if "hybrid/transformer" in r),
            "onlstm/lstm <= 3 (fp32)": all(r["onlstm/lstm"] <= ONLSTM_TARGET for r in fp32 if "onlstm/lstm" in r),
        },
        "not_supported": [{"part": r["part"], "shape": r["shape"], "precision": r["precision"], "column": column,
                           "reason": reason}
                          for r in attention + rnn for column, reason in r.get("not_supported", {}).items()],
    }
    triton_rows = [r for r in fp32 if "onlstm-triton/lstm" in r]
    if triton_rows:
        summary["targets"]["onlstm-triton/lstm <= 3 (fp32)"] = all(r["onlstm-triton/lstm"] <= ONLSTM_TARGET
                                                                   for r in triton_rows)
    summary["wall_s"] = time.perf_counter() - began
    for skip in summary["not_supported"]:
        print(f"skipped: {skip['part']} {skip['shape']} {skip['precision']} {skip['column']}: {skip['reason']}")
    print(f"\ntargets: {summary['targets']}; {summary['wall_s']:.1f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
        print(f"wrote {args.json}")
    return summary


if __name__ == "__main__":
    main()
