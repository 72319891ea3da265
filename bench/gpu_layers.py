"""CN3 layer on a GPU: its three attention paths against ``torch.nn.MultiheadAttention``.

    python3 bench/gpu_layers.py --json gpu_layers.json     # on a CUDA machine: the whole table, < 3 min on an H100
    .venv/bin/python bench/gpu_layers.py --quick           # CPU smoke run at tiny sizes (no fused column
                                                           # unless TRITON_INTERPRET=1 is set)

What is measured, per shape ``B x N`` (64x20, 8x200, 1x1000, 1x2500, 1x5000) and per precision (fp32,
and bf16 under ``torch.autocast``): one forward + backward of

* ``blockwise``, ``dense``, ``fused``: :class:`cn3.layers.DynamicGraphLayer` (``d = 300``,
  ``energy_dim = 100``, no attributes or edge types, an all-True padding mask) with ``impl`` forced,
  called with ``need_alpha=False``;
* ``mha``: ``nn.MultiheadAttention(d, heads, batch_first=True)`` with ``need_weights=False`` (its
  fused SDPA path), ``--heads`` 1 by default as in ``bench/cn3_layer.py``.

Time: CUDA events around each step, the median of ``--repeats`` steps after ``--warmup`` (the
first warm-up step of ``fused`` also autotunes and compiles its kernels). The layers alternate step
by step in one process, so the ratio ``layer / mha`` compares medians taken under the same
conditions. Memory: ``torch.cuda.max_memory_allocated`` during one more step, minus what was
allocated before it (module, input): the step's own peak. On the CPU (``--quick``) time is
``time.perf_counter`` and memory is not measured.

``variants`` (at 1x2500 fp32, after the main table, skipped when the run is past ``--budget``
seconds): the fused kernel with each ``tanh`` form (``sigmoid``, ``libdevice``, ``approx``; see
:mod:`cn3.layers.fused_energy`), with ``alpha`` returned, with relative-position edge types
(``C = 4``, the gathered ``E[t_ik]``), and with TF32 products (``allow_tf32``; the main table keeps
torch's default, IEEE fp32, for the fused kernel as for MHA); the tiles are autotuned. Each
variant compiles (and autotunes) its kernels once (seconds).

Floor: beside each CN3 time, the special-function floor of that shape on the card (named): a
forward + backward needs at least ``2 B N^2 e`` tanh (each pair's ``e`` once forward, once more
backward), at the card's rate (:data:`CARDS`: SMs x 16 SFU results per clock x clock; bf16 rows at
twice that, ``tanh.approx.bf16x2``), and the ratio of the time to it (``x floor``). A card not in
:data:`CARDS`, and the CPU, show no floor.

``--json PATH`` writes every figure, the targets with their verdicts, the device, the
torch and triton versions and the wall time.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cn3.layers import DynamicGraphLayer  # noqa: E402
from cn3.layers.dynamic_graph import combined_edge_types, fused_available  # noqa: E402

SHAPES = [(64, 20), (8, 200), (1, 1000), (1, 2500), (1, 5000)]
#: Special-function units of the cards the floor knows: (SMs, SFU results per SM per clock, boost GHz).
#: H100 SXM: 132 SMs x 16 per clock x 1.98 GHz; the H200 has the same SMs and clock.
CARDS = {"H100": (132, 16, 1.98), "H200": (132, 16, 1.98)}
QUICK_SHAPES = [(4, 12), (1, 40)]
IMPLS = ["blockwise", "dense", "fused"]
MB = 1024 * 1024
#: Steps of the blockwise path at or above this many pairs: it takes ~0.7 s a step at 1x5000 on an H100.
SLOW_PAIRS = 2500 * 2500


def tanh_rate(device_name: str) -> tuple[float, str] | None:
    """``(tanh per second, label)`` of the special-function units of the card named ``device_name``
    (``torch.cuda.get_device_name``), or None for a card not in :data:`CARDS`."""
    for key, (sms, per_clock, ghz) in CARDS.items():
        if key in device_name:
            return sms * per_clock * ghz * 1e9, f"{key}: {sms} SMs x {per_clock}/clk x {ghz} GHz"
    return None


def cn3_floor_ms(batch: int, n: int, energy_dim: int, rate: float, bf16: bool) -> float:
    """Milliseconds of the ``2 B N^2 e`` tanh of one CN3 forward + backward at ``rate`` a second
    (twice that in bf16: two per ``tanh.approx.bf16x2``)."""
    return 2 * batch * n * n * energy_dim / (rate * (2 if bf16 else 1)) * 1e3


class Timer:
    """Milliseconds of one call: CUDA events on a GPU, ``perf_counter`` on the CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def __call__(self, fn) -> float:
        if not self.cuda:
            start = time.perf_counter()
            fn()
            return (time.perf_counter() - start) * 1000
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        return begin.elapsed_time(end)


def build(name: str, hidden: int, energy_dim: int, heads: int, device: torch.device,
          edge_clip: int = 0) -> nn.Module:
    if name == "mha":
        return nn.MultiheadAttention(hidden, heads, batch_first=True).to(device)
    impl = "fused" if name.startswith("fused") else name
    types = 2 * edge_clip + 1 if edge_clip else 0
    return DynamicGraphLayer(hidden, energy_dim=energy_dim, n_edge_types=types, impl=impl).to(device)


def make_step(module: nn.Module, x: torch.Tensor, mask: torch.Tensor, dtype: torch.dtype,
              need_alpha: bool = False, edge_type: torch.Tensor | None = None):
    """One forward + backward, under autocast when ``dtype`` is 16-bit."""
    autocast = (torch.autocast(x.device.type, dtype=dtype) if dtype != torch.float32 else nullcontext())

    def step() -> None:
        module.zero_grad(set_to_none=True)
        x.grad = None
        with autocast:
            if isinstance(module, nn.MultiheadAttention):
                out = module(x, x, x, need_weights=False)[0]
            else:
                out = module(x, mask, edge_type=edge_type, need_alpha=need_alpha)[0]
        out.float().sum().backward()

    return step


def peak_mb(step, device: torch.device) -> float | None:
    """The step's own peak allocation in MB (CUDA only)."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / MB


def measure(steps: dict, timer: Timer, device: torch.device, warmup: int, repeats: int) -> dict:
    """Warm each step up, then time them round-robin; median ms and peak MB per name. A step that
    fails (a kernel that does not compile on this GPU, memory) is reported with its error instead,
    so that one failure does not cost the rest of the table."""
    failed = {}
    for name, step in list(steps.items()):
        try:
            for _ in range(warmup):
                step()
        except Exception as error:  # noqa: BLE001 (reported in the table and the JSON)
            failed[name] = {"ms": float("nan"), "peak_mb": None, "error": f"{type(error).__name__}: {error}"[:500]}
            print(f"  {name} failed: {failed[name]['error']}", file=sys.stderr)
            del steps[name]
            if device.type == "cuda":
                torch.cuda.empty_cache()
    times = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            times[name].append(timer(step))
    return {**{name: {"ms": statistics.median(values), "peak_mb": peak_mb(steps[name], device)}
               for name, values in times.items()}, **failed}


def targets(results: list[dict]) -> list[dict]:
    """Issue 30's targets with the measured figure and a verdict."""
    by = {(r["B"], r["N"], r["dtype"], r["impl"]): r for r in results}
    out = []
    for (batch, n), limit in zip(SHAPES, (1.5, 1.5, 1.5, 3.0, 3.0)):
        for dtype in ("fp32", "bf16"):
            row = by.get((batch, n, dtype, "fused"))
            if row is not None:
                out.append({"target": f"fused / mha <= {limit}x at {batch}x{n} {dtype}", "value": row["ratio"],
                            "met": row["ratio"] <= limit})
    fused, mha = by.get((1, 5000, "fp32", "fused")), by.get((1, 5000, "fp32", "mha"))
    if fused and mha and fused["peak_mb"] is not None:
        ratio = fused["peak_mb"] / max(mha["peak_mb"], 1e-9)
        out.append({"target": "fused peak memory <= 2x mha at 1x5000 fp32 (no alpha)", "value": ratio,
                    "met": ratio <= 2.0})
    for batch, n in SHAPES:
        f32, b16 = by.get((batch, n, "fp32", "fused")), by.get((batch, n, "bf16", "fused"))
        if f32 and b16:
            ratio = b16["ms"] / f32["ms"]
            out.append({"target": f"fused bf16 / fp32 <= 1 at {batch}x{n}", "value": ratio, "met": ratio <= 1.0})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny shapes, runs on the CPU (a smoke test)")
    parser.add_argument("--json", type=Path, help="write the summary here")
    parser.add_argument("--hidden", type=int, default=300, help="d: the paper's 2 x 150 BiLSTM")
    parser.add_argument("--energy-dim", type=int, default=100)
    parser.add_argument("--heads", type=int, default=1, help="MHA heads")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=None, help="timed steps per layer (default 10, quick 2)")
    parser.add_argument("--budget", type=float, default=150.0,
                        help="seconds after which the optional variants are skipped")
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    if not cuda and not args.quick:
        sys.exit("gpu_layers: no CUDA device here. Run it on a GPU machine, or pass --quick for a CPU smoke run "
                 "at tiny sizes.")
    device = torch.device("cuda" if cuda else "cpu")
    shapes = QUICK_SHAPES if args.quick else SHAPES
    hidden, energy_dim = (32, 16) if args.quick else (args.hidden, args.energy_dim)
    repeats = args.repeats or (2 if args.quick else 10)
    fused_ok, triton_version = False, None
    if fused_available():  # the fused kernel runs on CUDA, or on the CPU in Triton's interpreter
        import triton  # noqa: PLC0415

        from cn3.layers.fused_energy import INTERPRETING  # noqa: PLC0415

        fused_ok, triton_version = cuda or INTERPRETING, triton.__version__
    impls = [impl for impl in IMPLS if impl != "fused" or fused_ok]
    name = torch.cuda.get_device_name() if cuda else f"CPU ({platform.processor() or platform.machine()})"
    rate = tanh_rate(name) if cuda else None
    print(f"device: {name}; torch {torch.__version__}; triton {triton_version}; tanh floor: "
          + (rate[1] if rate else "none (no card of CARDS)"))
    print(f"d={hidden} energy_dim={energy_dim} MHA heads={args.heads}; median of {repeats} after {args.warmup} "
          f"warm-up; CN3 with need_alpha=False" + ("" if "fused" in impls else "; no fused column (needs CUDA "
                                                   "and triton, or TRITON_INTERPRET=1 on the CPU)"))
    start = time.time()
    timer = Timer(device)
    results = []
    print(f"{'B x N':>10} {'dtype':>5} " + " ".join(f"{n + ' ms':>14}" for n in impls + ["mha"])
          + " | " + " ".join(f"{n + ' /mha':>14}" for n in impls) + " | floor ms, " + "/".join(impls)
          + " x floor | peak MB " + "/".join(impls + ["mha"]))
    for batch, n in shapes:
        for dtype_name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            results += measure_shape(args, batch, n, dtype_name, dtype, impls, hidden, energy_dim, device, timer,
                                     repeats, rate)
            if cuda:
                torch.cuda.empty_cache()

    variants = []
    if "fused" in impls:
        variants = run_variants(args, shapes[-2] if not args.quick else shapes[-1], hidden, energy_dim, device,
                                timer, repeats, start)
    summary = {"device": name, "torch": torch.__version__, "triton": triton_version,
               "tanh_floor_card": rate[1] if rate else None,
               "hidden": hidden, "energy_dim": energy_dim, "mha_heads": args.heads, "repeats": repeats,
               "quick": args.quick, "results": results, "variants": variants,
               "targets": [] if args.quick else targets(results), "wall_s": round(time.time() - start, 1)}
    for target in summary["targets"]:
        print(f"target {target['target']}: {target['value']:.2f} {'met' if target['met'] else 'NOT met'}")
    print(f"wall time {summary['wall_s']} s")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
        print(f"wrote {args.json}")


def measure_shape(args, batch: int, n: int, dtype_name: str, dtype: torch.dtype, impls: list[str], hidden: int,
                  energy_dim: int, device: torch.device, timer: Timer, repeats: int, rate) -> list[dict]:
    """Every layer of ``impls`` and MHA at one ``batch x n`` and dtype: prints the table's row and returns
    the result records (ms, ratio to MHA, tanh floor and the multiple of it, peak memory)."""
    torch.manual_seed(0)
    x = torch.randn(batch, n, hidden, device=device, requires_grad=True)
    mask = torch.ones(batch, n, dtype=torch.bool, device=device)
    steps = {impl: make_step(build(impl, hidden, energy_dim, args.heads, device), x, mask, dtype)
             for impl in impls + ["mha"]}
    slow = batch * n * n >= SLOW_PAIRS and not args.quick
    measured = measure(steps, timer, device, 1 if slow else args.warmup, 3 if slow else repeats)
    mha = measured["mha"]["ms"]  # nan if MHA itself failed: then every ratio is nan
    floor = cn3_floor_ms(batch, n, energy_dim, rate[0], dtype_name == "bf16") if rate else None
    results = []
    for impl, figures in measured.items():
        cn3 = floor is not None and impl != "mha"
        results.append({"B": batch, "N": n, "dtype": dtype_name, "impl": impl, **figures,
                        "ratio": figures["ms"] / mha, "floor_ms": floor if cn3 else None,
                        "x_floor": figures["ms"] / floor if cn3 else None})
    floors = ("-" if floor is None else f"{floor:.3f}, "
              + "/".join(f"{measured[i]['ms'] / floor:.0f}x" for i in impls))
    peaks = "/".join("-" if measured[i]["peak_mb"] is None else f"{measured[i]['peak_mb']:.0f}"
                     for i in impls + ["mha"])
    print(f"{batch:>4} x {n:<4} {dtype_name:>5} "
          + " ".join(f"{measured[i]['ms']:14.2f}" for i in impls + ["mha"])
          + " | " + " ".join(f"{measured[i]['ms'] / mha:13.2f}x" for i in impls) + f" | {floors} | {peaks}",
          flush=True)
    return results


def run_variants(args, shape: tuple[int, int], hidden: int, energy_dim: int, device: torch.device,
                 timer: Timer, repeats: int, start: float) -> list[dict]:
    """The fused layer at one shape in fp32: each tanh form, with alpha, with relative-position edge types."""
    from cn3.layers import fused_energy  # noqa: PLC0415
    from cn3.layers.triton_common import TANH_FORMS  # noqa: PLC0415

    batch, n = shape
    forms = ["sigmoid"] if fused_energy.INTERPRETING else list(TANH_FORMS)
    plans = [(f"tanh={form}", {"tanh": form}) for form in forms]
    plans += [("need_alpha", {"need_alpha": True}), ("relative positions C=4", {"edge_clip": 4})]
    if not fused_energy.INTERPRETING:  # TF32 products with the values (torch's allow_tf32)
        plans += [("allow_tf32", {"tf32": True})]
    default_tanh = fused_energy.default_tanh
    allow_tf32 = torch.backends.cuda.matmul.allow_tf32
    out = []
    try:
        for label, plan in plans:
            if time.time() - start > args.budget:
                out.append({"variant": label, "skipped": f"past --budget {args.budget:.0f} s"})
                continue
            torch.manual_seed(0)
            x = torch.randn(batch, n, hidden, device=device, requires_grad=True)
            mask = torch.ones(batch, n, dtype=torch.bool, device=device)
            clip = plan.get("edge_clip", 0)
            edges = combined_edge_types(None, n, clip, batch, device) if clip else None
            fused_energy.default_tanh = (lambda dtype, form=plan["tanh"]: form) if "tanh" in plan else default_tanh
            torch.backends.cuda.matmul.allow_tf32 = plan.get("tf32", allow_tf32)
            steps = {"fused": make_step(build("fused", hidden, energy_dim, args.heads, device, clip), x, mask,
                                        torch.float32, plan.get("need_alpha", False), edges),
                     "mha": make_step(build("mha", hidden, energy_dim, args.heads, device), x, mask, torch.float32)}
            measured = measure(steps, timer, device, args.warmup, repeats)
            row = {"variant": label, "B": batch, "N": n, "dtype": "fp32", "ms": measured["fused"]["ms"],
                   "peak_mb": measured["fused"]["peak_mb"], "ratio": measured["fused"]["ms"] / measured["mha"]["ms"]}
            out.append(row)
            print(f"variant {label:<24} {batch} x {n}: {row['ms']:.2f} ms ({row['ratio']:.2f}x mha)"
                  + ("" if row["peak_mb"] is None else f", peak {row['peak_mb']:.0f} MB"), flush=True)
    finally:
        fused_energy.default_tanh = default_tanh
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    return out


if __name__ == "__main__":
    main()
