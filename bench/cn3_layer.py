"""CN3 dynamic-graph layer vs ``torch.nn.MultiheadAttention``: time and memory, forward + backward.

    .venv/bin/python bench/cn3_layer.py            # full run (a few minutes on 2 cores)
    .venv/bin/python bench/cn3_layer.py --quick    # fewer repeats

Time: both layers run in the same process on the same input ``(B, N, d)``, alternating, and the
median of ``--repeats`` runs after ``--warmup`` runs is reported; ratio = median over the
back-to-back (CN3, MHA) pairs of CN3 / MHA. The CN3 layer gets an all-True padding mask (it
always masks); MHA gets none, which can only favour MHA. MHA runs with ``need_weights=False``,
its fast fused path.

Memory, two honest numbers per layer (tracemalloc does not see torch's allocations):

* ``saved``: bytes of the tensors autograd keeps for backward after the forward pass, collected
  with ``torch.autograd.graph.saved_tensors_hooks`` and counted once per storage, parameters
  excluded (the input is included). This is what each extra layer of a stack adds, so it is the
  number held against the 64 MB per-layer target.
* ``peak``: high-water resident memory of a fresh subprocess during one forward + backward,
  minus its resident memory just before (model, input and one tiny warm-up pass already there),
  read from ``VmHWM`` after resetting it through ``/proc/self/clear_refs``. It also counts what
  lives only inside one forward or backward (for CN3 the returned (N, N) weights and one block).
  The child runs with ``MALLOC_MMAP_THRESHOLD_=65536`` so that glibc serves every tensor from
  mmap and unmaps it when freed; otherwise freed heap chunks stay resident and the peak tracks
  allocator history rather than live tensors.

The ``dense`` column is what plain broadcasting would save for the energy alone: the
``(B, N, N, e)`` pre-activation and its ``tanh``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cn3.layers import DynamicGraphLayer  # noqa: E402

SHAPES = [(64, 20), (8, 200), (1, 1000), (1, 2500)]
MB = 1024 * 1024


def build(model: str, hidden: int, energy_dim: int, heads: int) -> nn.Module:
    if model == "cn3":
        return DynamicGraphLayer(hidden, energy_dim=energy_dim)
    return nn.MultiheadAttention(hidden, heads, batch_first=True)


def step(module: nn.Module, x: torch.Tensor, mask: torch.Tensor) -> None:
    """One forward + backward."""
    if isinstance(module, DynamicGraphLayer):
        out = module(x, mask)[0]
    else:
        out = module(x, x, x, need_weights=False)[0]
    out.sum().backward()


def timed(module: nn.Module, x: torch.Tensor, mask: torch.Tensor) -> float:
    module.zero_grad(set_to_none=True)
    x.grad = None
    start = time.perf_counter()
    step(module, x, mask)
    return time.perf_counter() - start


def saved_bytes(module: nn.Module, x: torch.Tensor, mask: torch.Tensor) -> int:
    """Bytes autograd saves for backward in one forward, once per storage, parameters excluded."""
    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        if isinstance(module, DynamicGraphLayer):
            out = module(x, mask)[0]
        else:
            out = module(x, x, x, need_weights=False)[0]
    del out
    return sum(storages.values())


def rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def peak_child(model: str, batch: int, n: int, hidden: int, energy_dim: int, heads: int) -> None:
    """Run in a fresh process: print the peak resident-memory increase of one fwd + bwd."""
    torch.manual_seed(0)
    module = build(model, hidden, energy_dim, heads)
    step(module, torch.randn(1, 4, hidden, requires_grad=True), torch.ones(1, 4, dtype=torch.bool))
    module.zero_grad(set_to_none=True)
    x = torch.randn(batch, n, hidden, requires_grad=True)
    mask = torch.ones(batch, n, dtype=torch.bool)
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := current RSS
    before = rss_kb("VmRSS")
    step(module, x, mask)
    print(json.dumps({"peak_bytes": (rss_kb("VmHWM") - before) * 1024}))


def measure_peak(model: str, batch: int, n: int, args: argparse.Namespace) -> int:
    cmd = [sys.executable, __file__, "--peak-child", model, str(batch), str(n),
           "--hidden", str(args.hidden), "--energy-dim", str(args.energy_dim),
           "--heads", str(args.heads)]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    result = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    return json.loads(result.stdout.strip().splitlines()[-1])["peak_bytes"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per layer")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=300, help="d: the paper's 2 x 150 BiLSTM")
    parser.add_argument("--energy-dim", type=int, default=100)
    parser.add_argument("--heads", type=int, default=1, help="MHA heads (cost barely depends)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--peak-child", nargs=3, metavar=("MODEL", "B", "N"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.peak_child:
        model, batch, n = args.peak_child
        peak_child(model, int(batch), int(n), args.hidden, args.energy_dim, args.heads)
        return
    repeats = args.repeats or (3 if args.quick else 7)

    print(f"d={args.hidden} energy_dim={args.energy_dim} MHA heads={args.heads} "
          f"threads={args.threads} repeats={repeats} (median after {args.warmup} warm-up)")
    print(f"load average before: {os.getloadavg()[0]:.2f} (other processes on these cores slow "
          f"CN3's many per-block ops far more than MHA's few large ones)")
    header = (f"{'B x N':>10} {'CN3 ms':>8} {'MHA ms':>8} {'ratio':>6} | {'CN3 saved':>9} "
              f"{'CN3 peak':>9} {'MHA saved':>9} {'MHA peak':>9} {'dense':>9}")
    print(header)
    print("-" * len(header))
    for batch, n in SHAPES:
        torch.manual_seed(0)
        modules = {m: build(m, args.hidden, args.energy_dim, args.heads) for m in ("cn3", "mha")}
        x = torch.randn(batch, n, args.hidden, requires_grad=True)
        mask = torch.ones(batch, n, dtype=torch.bool)
        times: dict[str, list[float]] = {"cn3": [], "mha": []}
        for i in range(args.warmup + repeats):
            for name, module in modules.items():
                elapsed = timed(module, x, mask)
                if i >= args.warmup:
                    times[name].append(elapsed)
        cn3_ms, mha_ms = (statistics.median(times[m]) * 1e3 for m in ("cn3", "mha"))
        # back-to-back pairs see the same machine load, so the median pair ratio is steadier
        # on a shared machine than the ratio of the medians
        ratio = statistics.median(c / m for c, m in zip(times["cn3"], times["mha"]))
        saved = {m: saved_bytes(modules[m], x, mask) / MB for m in modules}
        peak = {m: measure_peak(m, batch, n, args) / MB for m in modules}
        dense = 2 * batch * n * n * args.energy_dim * 4 / MB
        print(f"{batch:>4} x {n:<4} {cn3_ms:8.1f} {mha_ms:8.1f} {ratio:5.2f}x | "
              f"{saved['cn3']:6.1f} MB {peak['cn3']:6.1f} MB {saved['mha']:6.1f} MB "
              f"{peak['mha']:6.1f} MB {dense:6.0f} MB", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
