"""ON-LSTM layer: the scan with a hand-written backward against the step loop under autograd.

    OMP_NUM_THREADS=1 .venv/bin/python bench/onlstm.py                 # 3 shapes, padded and unpadded
    OMP_NUM_THREADS=1 .venv/bin/python bench/onlstm.py --quick         # first shape, fewer repeats

:class:`cn3.layers.onlstm.ONLSTM` (``new``) runs its recurrence in ``_ONLSTMScan``: forward without
recording into preallocated buffers, a backward written by hand (the gradient-independent factors
for all steps at once, one weight-gradient product). ``old`` is the layer's previous forward, kept
here verbatim as :class:`StepLoopONLSTM` (the same parameters and :meth:`ONLSTM.cell`, the step loop
under autograd; the layer keeps an equivalent loop, ``ONLSTM._step_loop``, as the tests' reference).
Both get the same weights and inputs; before timing, their outputs and gradients are compared.

Each step (forward + backward by default; ``--forward-only`` adds forward only) runs ``--warmup``
times, then ``old`` and ``new`` alternate for ``--repeats`` rounds; the ratio new/old of each round
is recorded and the median, min and max over rounds are printed (< 1 = the new layer is faster).
``--clock cpu`` (default) times the CPU seconds of this process (``time.process_time``), which other
processes holding the cores do not inflate; with one thread it counts no idle spinning either.
``--padded`` masks random lengths in ``[N/2, N]`` (the padded steps take the masked path).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cn3.layers.attention import padding_mask  # noqa: E402
from cn3.layers.onlstm import ONLSTM  # noqa: E402

SHAPES = [(64, 25, 256), (32, 50, 512), (8, 200, 512)]
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


class StepLoopONLSTM(ONLSTM):
    """The previous ``ONLSTM.forward`` (before the scan), verbatim: the reference."""

    def forward(self, x, mask=None, state=None, return_master=False):
        b, n, _ = x.shape
        if state is None:
            h = x.new_zeros(b, self.hidden)
            c = x.new_zeros(b, self.hidden)
        else:
            h, c = state
        pre = self.ih(x).transpose(0, 1).contiguous()  # (N, B, width): every input projection at once
        full = n
        if mask is not None:
            padded_cols = (~mask.bool()).any(0).nonzero()
            full = int(padded_cols[0]) if len(padded_cols) else n
        step_mask = None if mask is None else mask.transpose(0, 1).unsqueeze(-1).to(x.dtype)  # (N, B, 1)
        weight = self.hh.weight.t()
        outs, masters = [], []
        for t, pre_t in enumerate(pre.unbind(0)):
            gates = torch.addmm(pre_t, h, weight)
            h_new, c_new, master_f = self.cell(gates, c)
            if t >= full and step_mask is not None:
                keep = step_mask[t]
                h_new = h_new * keep
                h = h_new + (1.0 - keep) * h
                c = c_new * keep + (1.0 - keep) * c
            else:
                h, c = h_new, c_new
            outs.append(h_new)
            if return_master:
                masters.append(master_f)
        out = torch.stack(outs, 1) if outs else x.new_zeros(b, 0, self.hidden)
        if return_master:
            return out, (h, c), torch.stack(masters, 1)
        return out, (h, c)


def step(layer, x, mask, backward: bool):
    def run():
        layer.zero_grad(set_to_none=True)
        x.grad = None
        with torch.set_grad_enabled(backward):
            out, (h, c) = layer(x, mask)
            if backward:
                (out.sum() + c.sum()).backward()
    return run


def check_equal(old, new, x, mask) -> float:
    """Largest difference of outputs and gradients (x, parameters) between the two layers."""
    results = []
    for layer in (old, new):
        layer.zero_grad(set_to_none=True)
        x.grad = None
        out, (h, c) = layer(x, mask)
        (out.sum() + c.sum()).backward()
        grads = [x.grad.clone()] + [p.grad.clone() for p in layer.parameters()]
        results.append([out.detach(), h.detach(), c.detach()] + grads)
    return max(float((a - b).abs().max() / (1 + b.abs().max())) for a, b in zip(*results))


def race(fns: dict, warmup: int, repeats: int, clock) -> dict[str, list[float]]:
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = clock()
            fn()
            times[name].append(clock() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="first shape only, fewer repeats")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--chunk-size", type=int, default=8)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    parser.add_argument("--padded", choices=["both", "yes", "no"], default="both",
                        help="random lengths in [N/2, N] under a mask, full rows without one, or both")
    parser.add_argument("--forward-only", action="store_true", help="also time the forward pass alone")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    repeats = args.repeats or (5 if args.quick else 15)
    clock = CLOCKS[args.clock]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {args.clock} clock, chunk size "
          f"{args.chunk_size}, {repeats} alternating rounds after {args.warmup} warm-up runs")
    print("ratio = new / old time per round: median [min, max]  (< 1: the new layer is faster)")
    paddings = {"both": [False, True], "yes": [True], "no": [False]}[args.padded]
    for b, n, d in SHAPES[: 1 if args.quick else None]:
        for padded in paddings:
            torch.manual_seed(0)
            new = ONLSTM(d, d, args.chunk_size)
            old = StepLoopONLSTM(d, d, args.chunk_size)
            old.load_state_dict(new.state_dict())
            x = torch.randn(b, n, d, requires_grad=True)
            mask = None
            if padded:
                lengths = torch.randint(max(1, n // 2), n + 1, (b,))
                lengths[0] = n
                mask = padding_mask(lengths, n)
            err = check_equal(old, new, x, mask)
            for backward in [True] + ([False] if args.forward_only else []):
                times = race({"old": step(old, x, mask, backward), "new": step(new, x, mask, backward)},
                             args.warmup, repeats, clock)
                ratios = sorted(t_new / t_old for t_new, t_old in zip(times["new"], times["old"]))
                label = f"B={b} N={n} d={d}" + (" padded" if padded else "")
                old_ms, new_ms = (statistics.median(times[k]) * 1e3 for k in ("old", "new"))
                print(f"  {label:<26} {'fwd+bwd' if backward else 'fwd':<8} old {old_ms:8.1f} ms"
                      f"  new {new_ms:8.1f} ms"
                      f"  ratio {statistics.median(ratios):.3f} [{ratios[0]:.3f}, {ratios[-1]:.3f}]"
                      f"  max rel. diff {err:.1e}")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
