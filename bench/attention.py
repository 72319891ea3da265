"""NMT encoder pieces against their plain references, forward + backward, in one process.

    .venv/bin/python bench/attention.py            # full run
    .venv/bin/python bench/attention.py --quick    # fewer shapes and repeats (about a minute on 2 idle cores)
    .venv/bin/python bench/attention.py --attention-only --threads 1 --clock cpu   # on a loaded machine

1. Hybrid local/global self-attention (Xu et al., 2019; gate mode, window 1) against vanilla
   multi-head attention with the same projections (:class:`cn3.layers.transformer.MultiHeadAttention`,
   the same code path minus the local distribution, the gate and the mix) on the same input
   ``(B, N, d)`` with a padding mask, attention dropout ``--dropout`` in training mode. Target:
   ratio <= 1.05 (the local softmax runs on the ``2m + 1`` band entries of each row, the
   mix rides on the dropout passes; what remains is the ``d -> 1`` gate and work on the band).
   ``local`` and ``concat`` are shown too, and ``torch.nn.MultiheadAttention`` as an outside reference.
2. ON-LSTM layer (:class:`cn3.layers.onlstm.ONLSTM`, chunk size 8) tokens/s against ``torch.nn.LSTM``
   of the same width (input = hidden = d), forward + backward and forward only.

Each module runs ``--warmup`` times, then the modules alternate for ``--repeats`` rounds and the
median time is reported; ratio = module / reference (> 1 = slower). ``torch.set_num_threads``
defaults to 2. ``--clock wall`` (default) times wall-clock seconds; ``--clock cpu`` the CPU seconds
of this process (``time.process_time``), which other processes on the machine do not inflate while
they hold cores (they still share caches and memory bandwidth); with ``--threads 1`` it counts no
idle spinning of worker threads either.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cn3.layers.attention import padding_mask  # noqa: E402
from cn3.layers.hybrid_attention import HybridSelfAttention  # noqa: E402
from cn3.layers.onlstm import ONLSTM  # noqa: E402
from cn3.layers.transformer import MultiHeadAttention  # noqa: E402

ATTENTION_SHAPES = [(64, 25, 256, 4), (32, 50, 512, 8), (8, 200, 512, 8)]
RNN_SHAPES = [(64, 25, 256), (32, 50, 512)]


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]


def timed(fn) -> float:
    start = clock()
    fn()
    return clock() - start


def race(fns: dict, warmup: int, repeats: int) -> dict[str, float]:
    """Median seconds per call of each function, the functions alternating round by round."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(timed(fn))
    return {name: statistics.median(t) for name, t in times.items()}


def attention_step(module, x, mask):
    def run():
        x.grad = None
        module.zero_grad(set_to_none=True)
        if isinstance(module, nn.MultiheadAttention):
            out = module(x, x, x, key_padding_mask=~mask, need_weights=False)[0]
        else:
            out = module(x, mask)[0]
        out.sum().backward()
    return run


def bench_attention(args) -> list[dict]:
    rows = []
    for b, n, d, h in ATTENTION_SHAPES[: 2 if args.quick else None]:
        torch.manual_seed(0)
        x = torch.randn(b, n, d, requires_grad=True)
        lengths = torch.randint(max(1, n // 2), n + 1, (b,))
        lengths[0] = n
        mask = padding_mask(lengths, n)
        p = args.dropout
        modules = {
            "vanilla": MultiHeadAttention(d, h, p),
            "hybrid": HybridSelfAttention(d, h, p, window=1, mode="hybrid"),
            "local": HybridSelfAttention(d, h, p, window=1, mode="local"),
            "concat": HybridSelfAttention(d, h, p, window=1, mode="concat"),
            "torch.nn.MHA": nn.MultiheadAttention(d, h, dropout=p, batch_first=True),
        }
        times = race({k: attention_step(m.train(), x, mask) for k, m in modules.items()}, args.warmup, args.repeats)
        ref = times["vanilla"]
        rows.append({"shape": f"B={b} N={n} d={d} H={h}", "vanilla_ms": ref * 1e3,
                     **{f"{k}/vanilla": t / ref for k, t in times.items() if k != "vanilla"}})
    return rows


def rnn_step(module, x, backward: bool):
    mask = torch.ones(x.shape[:2], dtype=torch.bool)

    def run():
        module.zero_grad(set_to_none=True)
        with torch.set_grad_enabled(backward):
            out = module(x)[0] if isinstance(module, nn.LSTM) else module(x, mask)[0]
            if backward:
                out.sum().backward()
    return run


def bench_rnn(args) -> list[dict]:
    rows = []
    for b, n, d in RNN_SHAPES[: 1 if args.quick else None]:
        torch.manual_seed(0)
        x = torch.randn(b, n, d)
        onlstm, lstm = ONLSTM(d, d, chunk_size=8), nn.LSTM(d, d, batch_first=True)
        for backward in (True, False):
            times = race({"onlstm": rnn_step(onlstm, x, backward), "lstm": rnn_step(lstm, x, backward)},
                         args.warmup, args.repeats)
            tokens = b * n
            rows.append({"shape": f"B={b} N={n} d={d}", "pass": "fwd+bwd" if backward else "fwd",
                         "onlstm_tok_s": tokens / times["onlstm"], "lstm_tok_s": tokens / times["lstm"],
                         "onlstm/lstm_speed": times["lstm"] / times["onlstm"]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer shapes and repeats")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--dropout", type=float, default=0.1, help="attention dropout (training mode)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall-clock time, or CPU time of this process (steadier on a loaded machine)")
    parser.add_argument("--attention-only", action="store_true", help="skip the ON-LSTM part")
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    if args.repeats is None:
        args.repeats = 7 if args.quick else 21
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {args.repeats} "
          f"(after {args.warmup} warm-up runs), attention dropout {args.dropout}, {args.clock} clock")
    print("\nself-attention forward + backward, time relative to vanilla multi-head attention (target hybrid <= 1.05)")
    for r in bench_attention(args):
        rest = "  ".join(f"{k} {v:.3f}x" for k, v in r.items() if k.endswith("/vanilla"))
        print(f"  {r['shape']:<22} vanilla {r['vanilla_ms']:7.2f} ms  {rest}")
    if args.attention_only:
        return
    print("\nON-LSTM layer vs torch.nn.LSTM (same width), tokens/s")
    for r in bench_rnn(args):
        print(f"  {r['shape']:<18} {r['pass']:<8} ON-LSTM {r['onlstm_tok_s']:>9,.0f} tok/s  LSTM "
              f"{r['lstm_tok_s']:>9,.0f} tok/s  ON-LSTM speed = {r['onlstm/lstm_speed']:.2f}x LSTM")


if __name__ == "__main__":
    main()
