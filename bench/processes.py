"""Training throughput with 1 and 2 processes x threads on this machine, and what to expect on more
cores or GPUs.

    CN3_DATA=/work/shared/data .venv/bin/python bench/processes.py --quick   # 60/20 updates, 2 rounds
    CN3_DATA=/work/shared/data .venv/bin/python bench/processes.py           # 120/40 updates, 3 rounds
    .venv/bin/python bench/processes.py --smoke                              # checks the script only
    .venv/bin/python bench/processes.py --steps 100 --repeats 5 --tasks trec --out /tmp/procs

Timed updates per run: ``trec`` 120 (``--quick`` 60), ``nmt`` 40 (``--quick`` 20), after 5 untimed
ones; ``--steps N`` sets both. Run it on idle cores: every layout uses both of them.

Two real trainings, each in three layouts on the same machine:

* ``trec``: ``cn3 train --task trec`` (``cn3/configs/trec.yaml``: CN3 encoder, BiLSTM context,
  +char+Spell, batch 32, AdaDelta), sentences/s;
* ``nmt``: ``cn3 nmt train`` with the default small config (``cn3/configs/nmt/small.yaml``:
  Transformer 128/512, 3+3 layers, batches of 4,096 padded tokens, Adam), target tokens/s (the
  tokens the loss is a mean over, ``</s>`` included: ``TranslationTask.count``). The training pairs
  are Multi30k's (``data.corpus=files`` on the staged ``multi30k/raw/train.*.gz``, the very pairs of
  ``data.corpus=multi30k``); the dev pair is the first 32 lines of Multi30k's val, so that the
  evaluation that every run does when it stops (``max_steps`` before any evaluation) and the final
  report stay short; ``train.final_splits=[]``.

Layouts: ``1x1`` one process, ``train.num_threads=1``; ``1x2`` one process, 2 threads; ``2x1``
``torchrun --standalone --nproc_per_node 2`` (gloo), 1 thread each (``OMP_NUM_THREADS`` matches the
thread count in every layout). Each round runs ``1x1 1x2 2x1`` for one task, then for the other, so
machine noise spreads over the layouts; the ratios are taken within a round (a layout's rate over
the same round's ``1x1``) and summarised by their median and min/max over the rounds.

What is timed: each run trains ``warmup + steps`` updates (``train.max_steps``) with
``train.log_every=1`` and ``train.tensorboard=true``, and the window is read from the run's own
TensorBoard scalars, whose wall time is stamped by rank 0 right after each update: from the end of
update ``warmup`` to the end of update ``warmup + steps``. It holds the updates (collation, forward,
backward, the gradient all-reduce, clipping, the optimizer step) and the per-update log line and
scalars, and nothing else: not the start-up (imports, data, subword model, model), not the first
``warmup`` updates (allocator and oneDNN warm-up), not the evaluation at the stop or the final
report. (``results.json``'s ``seconds`` is not used: it runs from the loop's start to the last
checkpoint, the evaluation at the stop included. The log line and the two scalars per update cost
well under a millisecond, on rank 0 only, in every layout alike.) The window must end within the
first epoch, so no epoch-end evaluation or checkpoint falls in it; the script checks this. With
``--out DIR`` the runs and ``DIR/processes.json`` (every run's window, items and per-update times)
are kept. Every layout trains the
same updates on the same global batches (``cn3.train.distributed``: a rank takes a strided share of each
batch), so items per window are counted once per task from the task's own ``batches(0)`` and
``count`` (per subword model for ``nmt``), and the ratios are ratios of updates/s too.

The all-reduce on its own: gloo, 2 spawned processes of 1 thread, one flat float32 tensor of the
model's trainable parameters (what ``World.average_gradients`` reduces each update), median of the
repeats; it is the measured communication cost ``c2`` of one update below.

What to expect elsewhere (an estimate, with its basis; nothing here was measured on more than 2
cores). One update with ``N`` processes costs about

    T(N) = a + b / N + c(N)

* ``b``: the work that divides with the batch: each rank runs forward and backward on its strided
  ``1/N`` share of the global batch (``B/N`` sentences, or ``max_tokens/N`` padded tokens);
* ``a``: the work that does not: the per-batch fixed costs (Python, kernel launches, the BiLSTM's
  sequential time steps, whose count is the batch's length whatever its width), and the optimizer
  step and gradient clipping, which every rank runs over all parameters;
* ``c(N)``: the all-reduce of ``P`` float32 gradients, ``4P`` bytes per update, not overlapped with
  the backward pass (``cn3/train/distributed.py`` explains why not DDP). A ring all-reduce moves
  ``2 (N-1)/N x 4P`` bytes per process, so ``c(N) ~ c(2) x 2 (N-1)/N``, at most twice ``c(2)``,
  plus a latency per step that grows with ``N`` (ignored: optimistic).

From the measured ``T(1)`` (1x1), ``T(2)`` (2x1) and ``c(2)`` the script solves ``b = 2 (T(1) - T(2)
+ c(2))``, ``a = T(1) - b`` and prints the projected speed-up ``T(1) / T(N)`` for 4, 8 and 16
processes of one thread on one machine (assuming cores as fast as these and no memory-bandwidth
limit, so an upper estimate; at ``N > B`` a rank gets no sentence and TREC cannot gain at all). Two
points determine the two unknowns exactly, so the noise of two measurements goes straight into the
projection: read it to one digit. On GPUs (NCCL) the same formula holds with other constants: the
all-reduce is cheap (``4P`` bytes at an assumed 100 GB/s of NVLink or 10 GB/s of PCIe: printed for
each task's ``P``), but ``b`` shrinks by one to two orders of magnitude while ``a`` (kernel launches,
the sequential BiLSTM, Python) shrinks far less, so ``a`` dominates and a 32-sentence or
4,096-token update gains little from a second GPU. For cn3's model sizes, several GPUs are better
used by several runs at once, one per GPU (``CUDA_VISIBLE_DEVICES``; ``cn3 experiment run --jobs``
does not assign GPUs), than by one run split over them; splitting pays when the global batch is
large (``train.max_tokens`` of Transformer-base, 25k tokens per GPU in the papers) and the model is
big.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

LAYOUTS = {  # name -> (processes, threads per process)
    "1x1": (1, 1),
    "1x2": (1, 2),
    "2x1": (2, 1),
}
UNITS = {"trec": "sent/s", "nmt": "tgt tok/s"}
VAL_LINES = 32  # the nmt runs' dev pair: the first lines of Multi30k val


@dataclass
class Result:
    task: str
    layout: str
    round: int
    seconds: float  # the timed window
    steps: int
    items: int
    step_ms: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.items / self.seconds


# ----------------------------------------------------------------------------- the runs


def sets(*pairs: str) -> list[str]:
    return [x for p in pairs for x in ("--set", p)]


def task_args(task: str, out: Path, prepared: Path) -> list[str]:
    """The ``cli`` arguments of one task (without run directory and loop settings)."""
    if task == "trec":
        return ["train", "--task", "trec", "--device", "cpu", *sets(f"data.prepared={prepared}")]
    from cn3.nmt.data import multi30k_files
    from data_prep.paths import data_root

    train_src, train_tgt = multi30k_files(data_root(None), "train", "en", "de")
    return ["nmt", "train", "--device", "cpu",
            *sets("data.corpus=files", f"data.train_src={train_src}", f"data.train_tgt={train_tgt}",
                  f"data.valid_src={out / 'val.en'}", f"data.valid_tgt={out / 'val.de'}", "train.final_splits=[]")]


def command(task: str, layout: str, run_dir: Path, out: Path, prepared: Path, max_steps: int) -> list[str]:
    processes, threads = LAYOUTS[layout]
    launcher = [sys.executable, "-m", "cli"]
    if processes > 1:
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                    str(processes), "-m", "cli"]
    return [*launcher, *task_args(task, out, prepared), "--run-dir", str(run_dir),
            *sets(f"train.max_steps={max_steps}", "train.log_every=1", "train.tensorboard=true",
                  f"train.num_threads={threads}", "train.checkpoint_every=0", "train.evals_per_epoch=1")]


def run_once(task: str, layout: str, rnd: int, args, out: Path, prepared: Path) -> Path:
    run_dir = out / "runs" / f"{task}-{layout}-r{rnd}"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    cmd = command(task, layout, run_dir, out, prepared, args.warmup + args.steps[task])
    _, threads = LAYOUTS[layout]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    log = out / "runs" / f"{task}-{layout}-r{rnd}.out"
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with open(log, "w") as handle:
        done = subprocess.run(cmd, cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT, timeout=args.timeout)
    if done.returncode != 0:
        tail = log.read_text()[-3000:]
        raise SystemExit(f"{task} {layout} round {rnd} failed (exit {done.returncode}):\n  {' '.join(cmd)}\n{tail}")
    print(f"  {task:<4} {layout}  round {rnd + 1}: {time.perf_counter() - start:5.1f} s in all", flush=True)
    return run_dir


def step_times(run_dir: Path) -> dict[int, float]:
    """Wall time (s) at the end of each update, from the run's TensorBoard ``train/loss`` scalars."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    return {e.step: e.wall_time for e in acc.Scalars("train/loss")}


# ----------------------------------------------------------------------------- items per update


class Counter:
    """Items per update of a task's first epoch, from the task adapter itself (cached: per task for
    ``trec``, per subword model for ``nmt``); also the trainable parameter count."""

    def __init__(self):
        self.cache: dict[str, tuple[list[int], int]] = {}

    def __call__(self, task: str, run_dir: Path) -> tuple[list[int], int]:
        if task == "trec":
            key = "trec"
        else:
            key = "nmt:" + hashlib.sha256(
                b"".join(p.read_bytes() for p in sorted(run_dir.glob("spm.*.model")))).hexdigest()
        if key not in self.cache:
            self.cache[key] = self._count(task, run_dir)
        return self.cache[key]

    @staticmethod
    def _count(task: str, run_dir: Path) -> tuple[list[int], int]:
        import yaml

        config = yaml.safe_load((run_dir / "config.yaml").read_text())
        cpu = torch.device("cpu")
        if task == "trec":
            from cn3.config import from_dict
            from cn3.sentence.config import RunConfig
            from cn3.sentence.task import SentenceTask
            from data_prep.dataset import load_prepared

            cfg = from_dict(RunConfig, config)
            adapter = SentenceTask(cfg, load_prepared(cfg.data.prepared), cpu, {})
        else:
            from cn3.nmt.config import config_from_dict
            from cn3.nmt.data import Tokenizer, encode_pairs, load_split
            from cn3.nmt.task import TranslationTask

            cfg = config_from_dict(config)
            tok = Tokenizer.from_dir(run_dir)
            train = encode_pairs(tok, load_split(cfg.data, "train", cfg.train.seed), cfg.data.max_len)
            val_pairs = load_split(cfg.data, "val", cfg.train.seed)
            adapter = TranslationTask(cfg, tok, train, encode_pairs(tok, val_pairs, cfg.data.max_len), val_pairs, cpu)
        counts = [adapter.count(batch) for batch in adapter.batches(0)]
        params = sum(p.numel() for p in adapter.model.parameters() if p.requires_grad)
        return counts, params


def measure(task: str, layout: str, rnd: int, run_dir: Path, args, counter: Counter) -> Result:
    counts, _ = counter(task, run_dir)
    first, last = args.warmup, args.warmup + args.steps[task]
    if last > len(counts):
        raise SystemExit(f"{task}: warmup + steps = {last} updates exceed the first epoch ({len(counts)} batches): "
                         "the window would hold an evaluation; use fewer --steps")
    times = step_times(run_dir)
    missing = [s for s in range(first, last + 1) if s not in times]
    if missing:
        raise SystemExit(f"{run_dir}: no TensorBoard scalar for update(s) {missing[:5]}")
    # updates first+1 .. last trained batches[first:last] (update s is batch s - 1 of the epoch)
    return Result(task, layout, rnd, times[last] - times[first], last - first, sum(counts[first:last]),
                  [1e3 * (times[s + 1] - times[s]) for s in range(first, last)])


# ----------------------------------------------------------------------------- the all-reduce alone


def _allreduce_worker(rank: int, size: int, init: str, numel: int, iters: int, out: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=size)
    grad = torch.randn(numel)
    times = []
    for i in range(iters + 3):
        dist.barrier()
        start = time.perf_counter()
        flat = grad.clone()  # World.average_gradients: flatten (a copy), all-reduce, divide
        dist.all_reduce(flat)
        flat.div_(size)
        if i >= 3:
            times.append(time.perf_counter() - start)
    if rank == 0:
        Path(out).write_text(json.dumps(times))
    dist.destroy_process_group()


def allreduce_seconds(numel: int, iters: int, out: Path) -> float:
    import torch.multiprocessing as mp

    init, report = out / f"allreduce-{numel}.init", out / f"allreduce-{numel}.json"
    init.unlink(missing_ok=True)
    mp.spawn(_allreduce_worker, args=(2, str(init), numel, iters, str(report)), nprocs=2, join=True)
    return statistics.median(json.loads(report.read_text()))


# ----------------------------------------------------------------------------- the report


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def table(results: list[Result], tasks: list[str]) -> dict:
    by = {(r.task, r.layout, r.round): r for r in results}
    rounds = sorted({r.round for r in results})
    print("\n| task | layout | processes x threads | runs | items/s median | min | max | ms/update median "
          "| speed-up vs 1x1 median | min | max |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    summary = {}
    for task in tasks:
        for layout, (p, t) in LAYOUTS.items():
            runs = [by[(task, layout, r)] for r in rounds if (task, layout, r) in by]
            if not runs:
                continue
            rates = [r.rate for r in runs]
            step_ms = statistics.median(1e3 * r.seconds / r.steps for r in runs)
            ratios = [by[(task, layout, r)].rate / by[(task, "1x1", r)].rate for r in rounds
                      if (task, layout, r) in by and (task, "1x1", r) in by]
            summary[(task, layout)] = {"rate": statistics.median(rates), "step_s": step_ms / 1e3,
                                       "ratio": statistics.median(ratios) if ratios else float("nan")}
            ratio_text = (f"{statistics.median(ratios):.2f}x | {min(ratios):.2f}x | {max(ratios):.2f}x"
                          if ratios else "– | – | –")
            print(f"| {task} ({UNITS[task]}) | {layout} | {p} x {t} | {len(runs)} "
                  f"| {fmt_rate(statistics.median(rates))} "
                  f"| {fmt_rate(min(rates))} | {fmt_rate(max(rates))} | {step_ms:.1f} | {ratio_text} |")
    return summary


def estimate(task: str, summary: dict, params: int, c2: float, batch_note: str) -> None:
    """The projection of the module docstring, from this run's numbers."""
    if (task, "1x1") not in summary or (task, "2x1") not in summary:
        return
    t1, t2 = summary[(task, "1x1")]["step_s"], summary[(task, "2x1")]["step_s"]
    b = 2 * (t1 - t2 + c2)
    clamped = not 0.0 <= b <= t1
    b = min(max(b, 0.0), t1)  # noise (or a loaded machine) can push the two-point solution outside [0, T1]
    a = t1 - b
    proj = {n: t1 / (a + b / n + c2 * 2 * (n - 1) / n) for n in (2, 4, 8, 16)}
    gb = 4 * params / 1e9
    print(f"\n{task}: P = {params:,} trainable parameters, all-reduce {4 * params / 1e6:.1f} MB per update; "
          f"measured: T(1) = {1e3 * t1:.1f} ms, T(2) = {1e3 * t2:.1f} ms, c(2) = {1e3 * c2:.2f} ms "
          f"(gloo, 2 x 1 thread)")
    print(f"  fit T(N) = a + b/N + c(N): a = {1e3 * a:.1f} ms (does not divide), b = {1e3 * b:.1f} ms "
          f"(divides over ranks; {100 * b / t1:.0f}% of T(1)){' (clamped to [0, T(1)])' if clamped else ''}; "
          f"{batch_note}")
    print("  ESTIMATE, CPU processes of 1 thread on one machine (upper bound, see docstring): speed-up vs 1x1 "
          + ", ".join(f"N={n}: {s:.2f}x" for n, s in proj.items()))
    print(f"  ESTIMATE, GPUs (NCCL ring, large N: 2 x {4 * params / 1e6:.1f} MB per GPU and update): all-reduce "
          f"~{2e3 * gb / 100:.2f} ms at an assumed 100 GB/s (NVLink), ~{2e3 * gb / 10:.2f} ms at 10 GB/s (PCIe); "
          "the rest is a + b/N with a GPU's a and b, see the docstring")


# ----------------------------------------------------------------------------- main


def write_val(out: Path) -> None:
    from cn3.nmt.data import multi30k_files, read_parallel
    from data_prep.paths import data_root

    pairs = read_parallel(*multi30k_files(data_root(None), "val", "en", "de"))[:VAL_LINES]
    (out / "val.en").write_text("".join(s + "\n" for s, _ in pairs))
    (out / "val.de").write_text("".join(t + "\n" for _, t in pairs))


def prepare_trec(prepared: Path) -> Path:
    from cn3.sentence.prepared import ensure_prepared
    from cn3.sentence.resolve import resolve_config

    return ensure_prepared(resolve_config("trec", None, {}, [f"data.prepared={prepared}"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="See the module docstring for what is timed and how to read it.")
    parser.add_argument("--quick", action="store_true", help="fewer updates (trec 60, nmt 20), 2 rounds")
    parser.add_argument("--smoke", action="store_true", help="2 updates, 1 round: checks the script, measures nothing")
    parser.add_argument("--steps", type=int, default=None,
                        help="timed updates per run, both tasks (default trec 120, nmt 40; --quick 60, 20)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed updates before the window (default 5)")
    parser.add_argument("--repeats", type=int, default=None, help="rounds of every layout (default 3; --quick 2)")
    parser.add_argument("--tasks", default="trec,nmt", help="comma-separated: trec, nmt")
    parser.add_argument("--out", type=Path, default=None,
                        help="keep runs here (default: a temporary directory, removed)")
    parser.add_argument("--prepared", type=Path, default=None,
                        help="prepared TREC directory (default OUT/prepared/trec, prepared once with spaCy)")
    parser.add_argument("--allreduce-iters", type=int, default=None, help="timed all-reduces (default 50; --smoke 3)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per run before it counts as failed")
    args = parser.parse_args()
    steps = {"trec": 120, "nmt": 40} if not args.quick else {"trec": 60, "nmt": 20}
    args.steps = {task: args.steps or (2 if args.smoke else n) for task, n in steps.items()}
    args.warmup = args.warmup if args.warmup is not None else (1 if args.smoke else 5)
    args.repeats = args.repeats or (1 if args.smoke else 2 if args.quick else 3)
    args.allreduce_iters = args.allreduce_iters or (3 if args.smoke else 50)
    if args.warmup < 1 or min(args.steps.values()) < 1:
        parser.error("--warmup and --steps must be >= 1 (the window starts at the end of update --warmup)")
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if not tasks or any(t not in UNITS for t in tasks):
        parser.error(f"--tasks: choose from {', '.join(UNITS)}")
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        raise SystemExit("bench/processes.py reads the runs' TensorBoard scalars: "
                         "pip install 'cn3[tensorboard]'") from None
    torch.set_num_threads(1)  # this process only waits and counts: leave the cores to the runs

    keep = args.out is not None
    out = (args.out or Path(tempfile.mkdtemp(prefix="cn3-processes-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    try:
        print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, load average before {os.getloadavg()[0]:.2f}; "
              f"{args.repeats} round(s); runs in {out}", flush=True)
        print("timed window of each run (its TensorBoard scalars): " + ", ".join(
            f"{task} updates {args.warmup + 1}-{args.warmup + args.steps[task]}" for task in tasks), flush=True)
        prepared = (args.prepared or out / "prepared" / "trec").resolve()
        if "trec" in tasks:
            prepared = prepare_trec(prepared)
        if "nmt" in tasks:
            write_val(out)
        counter, results = Counter(), []
        wall = time.perf_counter()
        for rnd in range(args.repeats):
            for task in tasks:
                for layout in LAYOUTS:
                    run_dir = run_once(task, layout, rnd, args, out, prepared)
                    results.append(measure(task, layout, rnd, run_dir, args, counter))
                    if not keep:
                        shutil.rmtree(run_dir, ignore_errors=True)
        print(f"all runs: {time.perf_counter() - wall:.0f} s; load average after {os.getloadavg()[0]:.2f}")
        if keep:
            (out / "processes.json").write_text(json.dumps([{**r.__dict__, "rate": r.rate} for r in results], indent=1))
        if args.smoke:
            print("\n--smoke: a few updates per run; the numbers below check the script and measure nothing")
        summary = table(results, tasks)
        for task in tasks:
            params = next(p for key, (_, p) in counter.cache.items() if key.split(":")[0] == task)
            counts = next(c for key, (c, _) in counter.cache.items() if key.split(":")[0] == task)
            c2 = allreduce_seconds(params, args.allreduce_iters, out)
            note = (f"global batch {statistics.median(counts):,.0f} "
                    f"{'sentences' if task == 'trec' else 'target tokens'} (median), {len(counts)} per epoch")
            estimate(task, summary, params, c2, note)
    finally:
        if not keep:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
