"""``cn3.nn.CN3Conv`` against PyG's ``GATv2Conv`` at the same widths: forward + backward on the CPU.

    OMP_NUM_THREADS=1 .venv/bin/python bench/nn_sparse.py            # every shape (minutes: the 8 x 200 graphs)
    OMP_NUM_THREADS=1 .venv/bin/python bench/nn_sparse.py --quick    # fewer repeats
    OMP_NUM_THREADS=1 .venv/bin/python bench/nn_sparse.py --profile  # torch.profiler rows, 10,000 nodes

Both layers run in one process, one thread, on the same graph and features, alternating; each
repeat times one forward and backward (loss ``out.square().mean()``) of each. Reported: the median
time of each and the median over the back-to-back pairs of CN3Conv / GATv2Conv. Shapes (``300 -> 100``):
batches of complete graphs (self-loops included, as each layer adds them) and one
random graph of 10,000 nodes and 50,000 edges. ``heads=1`` (100 channels) and ``heads=4`` (4 x 25).
The CN3 score is GATv2's family with a gate on top: ``u^T tanh(W_q x_i + W_k x_j)`` against
``a^T LeakyReLU(W_l x_j + W_r x_i)``: CN3Conv projects the nodes four times (``W_q``, ``W_k``, ``P``,
``W_g``) against GATv2's two, and its edges' work runs as embedding-bag sums over the edges grouped by
target and by source where GATv2 gathers and scatters ``(E, H*C)`` tensors. The header names the CPU
and the load average: on a shared machine read the ratios, not the milliseconds.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import torch
from torch_geometric.nn import GATv2Conv

from cn3.nn import CN3Conv


def complete_graphs(graphs: int, nodes: int) -> torch.Tensor:
    """``(2, graphs * nodes^2)``: disjoint complete graphs without self-loops (the layers add them)."""
    src, dst = torch.meshgrid(torch.arange(nodes), torch.arange(nodes), indexing="ij")
    keep = src != dst
    one = torch.stack([src[keep], dst[keep]])  # (2, n(n-1))
    return torch.cat([one + g * nodes for g in range(graphs)], dim=1)


def random_graph(nodes: int, edges: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, nodes, (2, edges), generator=gen)
    return edge_index[:, edge_index[0] != edge_index[1]]


def step(conv: torch.nn.Module, x: torch.Tensor, edge_index: torch.Tensor) -> float:
    """Seconds for one forward and backward."""
    start = time.perf_counter()
    conv(x, edge_index).square().mean().backward()
    return time.perf_counter() - start


def cpu_name() -> str:
    """The CPU's model name (``lscpu``'s), or the platform's processor string."""
    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.exists() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor() or "unknown CPU"


def profile(heads: int) -> None:
    """``torch.profiler`` rows (self CPU time, by input shape) of three steps of each layer on the
    10,000-node graph: where each spends its time."""
    from torch.profiler import profile as run_profiler

    x, edge_index = torch.randn(10_000, 300), random_graph(10_000, 50_000)
    for conv in (CN3Conv(300, 100 // heads, heads=heads), GATv2Conv(300, 100 // heads, heads=heads)):
        for _ in range(2):
            step(conv, x, edge_index)
        with run_profiler(record_shapes=True) as prof:
            for _ in range(3):
                step(conv, x, edge_index)
        print(f"{type(conv).__name__}, heads={heads}, 3 steps")
        print(prof.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total", row_limit=15,
                                                                 max_name_column_width=40))


def compare(name: str, nodes: int, edge_index: torch.Tensor, heads: int, repeats: int) -> dict:
    torch.manual_seed(0)
    x = torch.randn(nodes, 300)
    ours = CN3Conv(300, 100 // heads, heads=heads)
    theirs = GATv2Conv(300, 100 // heads, heads=heads)
    for _ in range(2):  # warm-up
        step(ours, x, edge_index), step(theirs, x, edge_index)
    pairs = [(step(ours, x, edge_index), step(theirs, x, edge_index)) for _ in range(repeats)]
    cn3 = statistics.median(p[0] for p in pairs)
    gat = statistics.median(p[1] for p in pairs)
    ratio = statistics.median(p[0] / p[1] for p in pairs)
    return {"shape": name, "heads": heads, "edges": edge_index.shape[1] + nodes, "cn3_ms": 1e3 * cn3,
            "gatv2_ms": 1e3 * gat, "ratio": ratio}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 repeats instead of 15")
    parser.add_argument("--repeats", type=int, default=None, help="back-to-back pairs per shape (default 15)")
    parser.add_argument("--profile", action="store_true", help="torch.profiler rows on the 10,000-node graph")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.profile:
        for heads in (1, 4):
            profile(heads)
        return
    repeats = args.repeats or (5 if args.quick else 15)
    shapes = [("8 x 50 complete", 400, complete_graphs(8, 50)), ("8 x 100 complete", 800, complete_graphs(8, 100)),
              ("8 x 200 complete", 1600, complete_graphs(8, 200)),
              ("10,000 nodes, 50,000 edges", 10_000, random_graph(10_000, 50_000))]
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    print(f"{cpu_name()} ({os.cpu_count()} CPUs, load average {load}); torch {torch.__version__}, "
          f"{torch.get_num_threads()} thread, forward + backward, 300 -> 100, median of {repeats} pairs")
    print("| graph | heads | edges (with loops) | CN3Conv ms | GATv2Conv ms | ratio |")
    print("|---|---|---|---|---|---|")
    for name, nodes, edge_index in shapes:
        for heads in (1, 4):
            r = compare(name, nodes, edge_index, heads, repeats)
            print(f"| {r['shape']} | {r['heads']} | {r['edges']:,} | {r['cn3_ms']:.1f} | {r['gatv2_ms']:.1f} | "
                  f"{r['ratio']:.2f}x |", flush=True)
    print(f"load average at the end: {', '.join(f'{v:.1f}' for v in os.getloadavg())}" if hasattr(os, "getloadavg")
          else "")


if __name__ == "__main__":
    main()
