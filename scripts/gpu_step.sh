#!/usr/bin/env bash
# The training step, eager against compiled (train.compile), in one call of at most 540 s (the steps' caps
# add up to 480; a step whose cap would pass GPU_STEP_BUDGET, default 540, is skipped and recorded so).
# Each step runs in its own process under `timeout`; logs and one JSON summary (OUT_DIR/summary.json),
# rewritten as each step finishes, so a call cut short keeps every figure measured before:
#
#   bash scripts/gpu_step.sh OUT_DIR [--quick]
#
# On the GPU machine, with the data bundled as for scripts/gpu_check.sh (prepared TREC and SNLI in
# .gpu/prepared; carry [".gpu"]):   source .gpu/env.sh && bash scripts/gpu_step.sh "$OUT"
#
# It runs on a CPU too; --quick (or GPU_STEP_QUICK=1) shrinks every step (NBOW, a few steps, 300 items,
# one epoch) so the script is tested before a GPU is at hand (tests/train/test_gpu_step.py):
#
#   CUDA_VISIBLE_DEVICES= bash scripts/gpu_step.sh /tmp/gpu-step --quick
#
# Steps and what summary.json keeps of each (beside its status, exit code and seconds):
#   env        torch and device names, the CPU model (lscpu)
#   steps      SNLI and TREC (shipped configs, batches gathered on the device): the step as
#              cn3.train.trainer.train_step runs it, eager then compiled in the same process, on the
#              same batches: each batch (each shape) run three times before timing, so compilation and
#              CUDA-graph recording happen in the warm-up; then ms per step, items/s, kernel launches
#              (CUDA graphs replayed: graph launches apart) and aten operators per step (torch.profiler),
#              host syncs per step (CUDA's sync debug mode), the warm-up's seconds. steps.json is
#              written after each task and mode.
#   trec_eager, trec_compiled, snli_eager, snli_compiled
#              whole trainings (shipped configs, train.compile=off / on): seconds, steps, dev and test accuracy
set -uo pipefail

out=${1:?usage: scripts/gpu_step.sh OUT_DIR [--quick]}
quick=${GPU_STEP_QUICK:-0}
[ "${2:-}" = "--quick" ] && quick=1
source "$(dirname "$0")/gpu_steps.sh"
gpu_setup "$out" "${GPU_STEP_PREPARED:-.gpu/prepared}"
STEP_BUDGET=${GPU_STEP_BUDGET:-540}

if [ "$quick" = 1 ]; then
  small=(--set model.encoder=nbow --set data.limit=300 --set train.epochs=1)
  steps=3; warmup=3; tasks="trec"
  limits=(300 300 300)  # the steps, an eager training, a compiled one: CPU compilation takes a while
else
  small=()
  steps=40; warmup=3; tasks="snli trec"
  limits=(130 80 90)
fi

step env 10 "$py" - "$out/steps/env.json" <<'EOF'
import json, os, subprocess, sys

import torch

lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
cuda = torch.cuda.is_available()
info = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name() if cuda else "cpu",
        "cpu": next((line.split(":", 1)[1].strip() for line in lscpu if line.startswith("Model name")), ""),
        "cpu_count": os.cpu_count(), "threads": torch.get_num_threads()}
print(json.dumps(info))
json.dump(info, open(sys.argv[1], "w"))
EOF

# The step eager, then compiled, on the same batches in the same process: the timed batches run $warmup
# times first (every shape compiled and its CUDA graph recorded before timing), timed updates between
# device syncs, the profiler's counts on replays, the sync count.
step steps "${limits[0]}" "$py" - "$prepared" "$steps" "$warmup" "$out/steps/steps.json" "$tasks" "${small[@]}" <<'EOF'
import json, sys, time, warnings

import torch
from torch.profiler import ProfilerActivity, profile

from cn3.sentence.resolve import resolve_config
from cn3.sentence.task import SentenceTask
from cn3.train.runtime import resolve_device
from cn3.train.trainer import train_step
from data_prep.dataset import load_prepared

prepared, steps, rounds, out, tasks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5].split()
overrides = [a for a in sys.argv[6:] if a != "--set"]
device = resolve_device("auto")
cuda = device.type == "cuda"


def sync():
    if cuda:
        torch.cuda.synchronize()


def measure(task_name: str, compiled: bool) -> dict:
    cfg = resolve_config(task_name, None, {"data.prepared": f"{prepared}/{task_name}"},
                         [*overrides, "train.device_batches=true", f"train.compile={str(compiled).lower()}"])
    ds = load_prepared(cfg.data.prepared)
    if cfg.data.limit:
        ds.splits = {name: split.spread(cfg.data.limit) for name, split in ds.splits.items()}
    task = SentenceTask(cfg, ds, device, {})
    epoch = task.batches(0)
    batches = [task.collate(epoch[i % len(epoch)]) for i in range(steps)]
    task.model.train()
    t = cfg.train

    def run(some) -> int:
        for b in some:
            train_step(task, b, len(b), 1.0, t.lr, t.clip)
        return sum(len(b) for b in some)

    t0 = time.perf_counter()
    for _ in range(rounds):  # every shape timed below: compiled, recorded and replayed before timing
        run(batches)
    sync()
    warm = time.perf_counter() - t0
    start = time.perf_counter()
    items = run(batches)
    sync()
    seconds = time.perf_counter() - start
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        run(batches)  # replays: no compilation or recording left
        sync()
    names = [e.name for e in prof.events()]
    launches = sum(n in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx")
                   for n in names)
    graph_launches = sum(n == "cudaGraphLaunch" for n in names)
    syncs = None
    if cuda:
        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run(batches)
        torch.cuda.set_sync_debug_mode(0)
        syncs = sum("synchroniz" in str(w.message) for w in caught) / steps
    return {"items_per_s": round(items / seconds, 1), "ms_per_step": round(1e3 * seconds / steps, 2),
            "warmup_s": round(warm, 1), "warmup_rounds": rounds, "batch_size": t.batch_size,
            "kernel_launches_per_step": round(launches / steps, 1) if cuda else None,
            "graph_launches_per_step": round(graph_launches / steps, 1) if cuda else None,
            "host_syncs_per_step": syncs, "aten_ops_per_step": round(sum(n.startswith("aten::") for n in names) / steps, 1)}


report = {"device": str(device), "steps": steps, "warmup_rounds": rounds}
for name in tasks:
    report[name] = {}
    for mode in ("eager", "compiled"):
        report[name][mode] = measure(name, mode == "compiled")
        json.dump(report, open(out, "w"), indent=1)  # as each finishes: a timeout keeps the ones before
    e, c = report[name]["eager"], report[name]["compiled"]
    report[name]["speedup"] = float(f"{c['items_per_s'] / e['items_per_s']:.3g}")
    print(name, json.dumps(report[name]))
    json.dump(report, open(out, "w"), indent=1)
EOF

# Whole trainings, eager and compiled (a run's results.json: seconds, steps, dev and test accuracy)
for task in $tasks; do
  for mode in eager compiled; do
    flag=$([ $mode = compiled ] && echo on || echo off)
    limit=$([ $mode = compiled ] && echo "${limits[2]}" || echo "${limits[1]}")
    step "${task}_$mode" "$limit" "$py" -m cli train --task "$task" --prepared "$prepared/$task" \
      --run-dir "$work/${task}_$mode" --device auto --set "train.compile=$flag" "${small[@]}"
    cp "$work/${task}_$mode/results.json" "$out/steps/${task}_$mode.json" 2>/dev/null
    summarize
  done
done

summarize  # OUT/summary.json, complete
echo "gpu_step: $(( $(date +%s) - started )) s; summary in $out/summary.json"
