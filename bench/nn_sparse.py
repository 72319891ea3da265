"""``cn3.nn.CN3Conv`` against PyG's ``GATv2Conv`` at the same widths: forward + backward on the CPU.

    OMP_NUM_THREADS=1 .venv/bin/python bench/nn_sparse.py            # every shape (about a minute)
    OMP_NUM_THREADS=1 .venv/bin/python bench/nn_sparse.py --quick    # fewer repeats

Both layers run in one process, one thread, on the same graph and features, alternating; each
repeat times one forward and backward (loss ``out.square().mean()``) of each. Reported: the median
time of each and the median over the back-to-back pairs of CN3Conv / GATv2Conv. Shapes (``300 -> 100``):
batches of complete graphs (self-loops included, as each layer adds them) and one
random graph of 10,000 nodes and 50,000 edges. ``heads=1`` (100 channels) and ``heads=4`` (4 x 25).
The CN3 score is GATv2's family with a gate on top: ``u^T tanh(W_q x_i + W_k x_j)`` against
``a^T LeakyReLU(W_l x_j + W_r x_i)``, so the extra work is the gate ``W_g x`` and ``sigmoid``/``tanh``.
"""

from __future__ import annotations

import argparse
import statistics
import time

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
    args = parser.parse_args()
    torch.set_num_threads(1)
    repeats = 5 if args.quick else 15
    shapes = [("8 x 50 complete", 400, complete_graphs(8, 50)), ("8 x 100 complete", 800, complete_graphs(8, 100)),
              ("8 x 200 complete", 1600, complete_graphs(8, 200)),
              ("10,000 nodes, 50,000 edges", 10_000, random_graph(10_000, 50_000))]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, forward + backward, 300 -> 100")
    print("| graph | heads | edges (with loops) | CN3Conv ms | GATv2Conv ms | ratio |")
    print("|---|---|---|---|---|---|")
    for name, nodes, edge_index in shapes:
        for heads in (1, 4):
            r = compare(name, nodes, edge_index, heads, repeats)
            print(f"| {r['shape']} | {r['heads']} | {r['edges']:,} | {r['cn3_ms']:.1f} | {r['gatv2_ms']:.1f} | "
                  f"{r['ratio']:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
