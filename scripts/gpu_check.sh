#!/usr/bin/env bash
# Everything worth knowing from a GPU machine in one call of at most 540 s (the steps' caps add up to
# 540; a step whose cap would pass GPU_CHECK_BUDGET, default 540, is skipped and recorded so; 299 s on an
# H200 and 321 s on an H100, 2026-11-26: docs/benchmarks.md). Each step runs in its own process under
# `timeout`; logs and one JSON summary (OUT_DIR/summary.json), rewritten as each step finishes, so a
# call cut short keeps every figure measured before:
#
#   bash scripts/gpu_check.sh OUT_DIR [--quick]
#
# 1. On the CPU machine, from the project root: prepare what it trains on (spaCy and gensim live here only)
#    and bundle it into the git-ignored .gpu/ (see ../shared/gpu/README.md):
#
#      .venv/bin/python -m cli prepare --task trec --embeddings ../shared/data/glove/glove.6B.50d.top100k.txt.gz --out prepared/trec
#      .venv/bin/python -m cli prepare --task snli --embeddings ../shared/data/glove/glove.6B.50d.top100k.txt.gz --out prepared/snli
#      GPU_DATA="trec multi30k" bash ../shared/gpu/bundle.sh prepared/trec prepared/snli
#
# 2. On the GPU machine (carry [".gpu"]):   source .gpu/env.sh && bash scripts/gpu_check.sh "$OUT"
#
# GPU_CHECK_SKIP="gpu_layers trec" leaves the named steps out (a second GPU session measures only what the
# first could not; the summary lists them as skipped).
#
# It runs on a CPU too, taking the CPU paths; --quick (or GPU_CHECK_QUICK=1) shrinks every step so the
# whole script is tested before a GPU is at hand:
#
#      CUDA_VISIBLE_DEVICES= bash scripts/gpu_check.sh /tmp/gpu-check --quick
#
# Steps and what summary.json keeps of each (beside its status, exit code and seconds):
#   env          torch, CUDA and device names
#   cuda_tests   tests/train/test_cuda_paths.py and every test file with CUDA-only tests, -k cuda: passed/failed/skipped
#   gpu_layers   bench/gpu_layers.py --json: CN3 blockwise/dense/fused against nn.MultiheadAttention
#   gpu_nmt_layers  bench/gpu_nmt_layers.py --json: hybrid against the Transformer layer, ON-LSTM against nn.LSTM
#   trec         cn3 train --task trec (the shipped config): seconds, steps, dev and test accuracy
#   steps        the sentence training step (SNLI, TREC), host-built batches against train.device_batches:
#                items/s and ms per step, kernel launches, host syncs and aten operators per step
#   multi30k     cn3 nmt train (nmt/small.yaml, hybrid), a short timed run: target tokens/s
#   resume       a tiny TREC run stopped by SIGTERM and resumed against the same run uninterrupted
#                (train.deterministic): same final weights bit for bit, same scores; and the
#                uninterrupted run again without train.deterministic: the option's cost in seconds
set -uo pipefail

out=${1:?usage: scripts/gpu_check.sh OUT_DIR [--quick]}
quick=${GPU_CHECK_QUICK:-0}
[ "${2:-}" = "--quick" ] && quick=1
source "$(dirname "$0")/gpu_steps.sh"
gpu_setup "$out" "${GPU_CHECK_PREPARED:-.gpu/prepared}"
export CUBLAS_WORKSPACE_CONFIG=${CUBLAS_WORKSPACE_CONFIG:-:4096:8}  # cuBLAS's deterministic mode
export py prepared work out
STEP_SKIP=${GPU_CHECK_SKIP:-}
STEP_BUDGET=${GPU_CHECK_BUDGET:-540}

if [ "$quick" = 1 ]; then
  trec_set=(--set data.limit=300 --set train.epochs=1 --set model.hidden=32 --set model.char=none)
  bench_steps=4; bench_warmup=2; nmt_steps=4
  resume_set="--set data.limit=200 --set train.epochs=2"
  test_filter=(-k "cuda and not encoder")
else
  trec_set=()
  bench_steps=50; bench_warmup=10; nmt_steps=150
  resume_set="--set data.limit=600 --set train.epochs=2"
  test_filter=(-k cuda)
fi

step env 10 "$py" -c "
import json, torch
cuda = torch.cuda.is_available()
info = {'torch': torch.__version__, 'cuda': torch.version.cuda, 'cuda_available': cuda,
        'device': torch.cuda.get_device_name() if cuda else 'cpu', 'threads': torch.get_num_threads()}
print(json.dumps(info))
json.dump(info, open('$out/steps/env.json', 'w'))"

# every test file with tests that run only where CUDA is, in every folder of tests/ (the kernel files
# are the `kernels` step's)
cuda_tests=$(grep -rl --include='test_*.py' "cuda.is_available()" tests | grep -v -e test_fused_energy.py \
  -e test_onlstm_triton.py | sort | tr '\n' ' ')
step cuda_tests 70 "$py" -m pytest -q -rs -p no:cacheprovider "${test_filter[@]}" --junitxml="$out/steps/cuda_tests.xml" \
  $cuda_tests

# the layer benchmarks: CN3 (blockwise, dense, fused) against MHA, then hybrid against the Transformer
# layer and ON-LSTM against nn.LSTM (fp32 and bf16; the Triton scan's four compiles add 15-25 s); the
# CN3 one skips its optional variants after 50 s
step gpu_layers 70 "$py" bench/gpu_layers.py --json "$out/steps/gpu_layers.json" --budget 50 \
  $([ "$quick" = 1 ] && echo --quick)
step gpu_nmt_layers 60 "$py" bench/gpu_nmt_layers.py --json "$out/steps/gpu_nmt_layers.json" \
  $([ "$quick" = 1 ] && echo --quick)
step kernels 70 "$py" -m pytest -q -rs -p no:cacheprovider -k cuda tests/layers/test_fused_energy.py tests/layers/test_onlstm_triton.py

step trec 80 "$py" -m cli train --task trec --prepared "$prepared/trec" --run-dir "$work/trec" --device auto \
  "${trec_set[@]}"
cp "$work/trec/results.json" "$out/steps/trec.json" 2>/dev/null
cp "$work/trec/metrics.jsonl" "$out/trec.metrics.jsonl" 2>/dev/null
summarize

# The sentence training step as cn3.train.trainer.train_step runs it (zero_grad, forward and backward, clipping,
# the optimizer), batches from the same batch loader, timed between device syncs; then the same steps
# under the profiler (kernel launches and operators per step) and under CUDA's sync debug mode
# (host syncs per step: each one leaves the GPU idle while Python catches up).
step steps 70 "$py" - "$prepared" "$bench_steps" "$bench_warmup" "$out/steps/steps.json" <<'EOF'
import json, sys, time, warnings

import torch
from torch.profiler import ProfilerActivity, profile

from cn3.train.averaging import make_ema
from cn3.train.bucketing import batch_loader
from cn3.sentence.resolve import resolve_config
from cn3.train.runtime import resolve_device
from cn3.sentence.task import SentenceTask
from data_prep.dataset import load_prepared

prepared, steps, warmup, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
device = resolve_device("auto")
cuda = device.type == "cuda"


def sync():
    if cuda:
        torch.cuda.synchronize()


def measure(task: str, device_batches: bool) -> dict:
    cfg = resolve_config(task, None, {"data.prepared": f"{prepared}/{task}"},
                         [f"train.device_batches={str(device_batches).lower()}"])
    ds = load_prepared(cfg.data.prepared)
    adapter = SentenceTask(cfg, ds, device, {})
    average = make_ema(adapter.model, adapter.ema_decay)  # the Trainer's weight average
    t = cfg.train
    epoch = adapter.batches(0)  # TREC's epoch is shorter than the steps measured: it repeats
    batches = [epoch[i % len(epoch)] for i in range(warmup + 3 * steps)]
    on_host = not adapter.device_collate
    loader = iter(batch_loader(adapter.collate, batches, t.workers(device) if on_host else 0,
                               pin_memory=on_host and cuda))
    todo = iter(batches)
    adapter.model.train()

    def update():
        indices, batch = next(todo), next(loader)
        adapter.optimizer.zero_grad(set_to_none=True)
        adapter.forward_backward(batch, len(indices))
        torch.nn.utils.clip_grad_norm_(adapter.model.parameters(), t.clip)
        adapter.optimizer.step()
        if average is not None:
            average.update_parameters(adapter.model)
        return len(indices)

    for _ in range(warmup):
        update()
    sync()
    start = time.perf_counter()
    items = sum(update() for _ in range(steps))
    sync()
    seconds = time.perf_counter() - start
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        for _ in range(steps):
            update()
        sync()
    events = prof.events()
    launches = sum(e.name in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx")
                   for e in events)
    ops = sum(e.name.startswith("aten::") for e in events)
    syncs = None
    if cuda:
        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(steps):
                update()
        torch.cuda.set_sync_debug_mode(0)
        syncs = sum("synchroniz" in str(w.message) for w in caught) / steps
    return {"items_per_s": round(items / seconds, 1), "ms_per_step": round(1e3 * seconds / steps, 2),
            "batch_size": t.batch_size, "device_batches": adapter.device_collate,
            "kernel_launches_per_step": round(launches / steps, 1) if cuda else None,
            "host_syncs_per_step": syncs, "aten_ops_per_step": round(ops / steps, 1)}


report = {"device": str(device), "steps": steps}
for task in ("snli", "trec"):
    report[task] = {"host_batches": measure(task, False), "device_batches": measure(task, True)}
    print(task, json.dumps(report[task]))
    json.dump(report, open(out, "w"), indent=1)  # after each task: a timeout keeps the ones before
EOF

# Multi30k: a short timed translation run; the rate is the loop's own (target tokens per second over
# the epoch so far), read from its last log line. --quick trains on 2,000 pairs of the same files.
nmt_args=(--encoder hybrid --run-dir "$work/nmt" --device auto --set train.max_steps=$nmt_steps
          --set train.log_every=$(( nmt_steps / 2 )) --set train.final_splits=[] --set train.eval_beam=1)
if [ "$quick" = 1 ]; then
  m30k=${CN3_DATA:-../shared/data}/multi30k/raw
  zcat "$m30k/train.en.gz" | head -n 2000 > "$work/train.en"
  zcat "$m30k/train.de.gz" | head -n 2000 > "$work/train.de"
  nmt_args+=(--src "$work/train.en" --tgt "$work/train.de" --set data.valid_size=20 --set train.max_tokens=1024
             --set model.d_model=64 --set model.ff=128 --set data.vocab_size=500)
fi
step multi30k 30 "$py" -m cli nmt train "${nmt_args[@]}"
"$py" - "$work/nmt/log.txt" "$out/steps/multi30k.json" <<'EOF'
import json, re, sys
from pathlib import Path

log = Path(sys.argv[1])
rates = re.findall(r"step (\d+): .*? ([\d,]+) tgt tok/s", log.read_text()) if log.is_file() else []
step, rate = rates[-1] if rates else (None, None)
json.dump({"tgt_tokens_per_s": int(rate.replace(",", "")) if rate else None, "at_step": int(step) if step else None},
          open(sys.argv[2], "w"))
EOF
summarize

# Interrupted and resumed against uninterrupted: the same tiny run twice, the second stopped by SIGTERM
# (as a job scheduler or `cn3 experiment run` stops it) once its first latest.pt exists, then resumed.
resume_check() {
  # shellcheck disable=SC2086  # $train: the command's words (no spaces inside them)
  local train="-m cli train --task trec --prepared $prepared/trec --device auto --set train.deterministic=true
    --set model.hidden=32 --set model.char=none --set train.batch_size=16 --set train.checkpoint_every=5 $resume_set"
  "$py" $train --run-dir "$work/straight" || return 1
  # the same run without deterministic algorithms: what the option costs, and how far apart the two end
  "$py" ${train/train.deterministic=true/train.deterministic=false} --run-dir "$work/loose" || return 1
  "$py" $train --run-dir "$work/cut" & local pid=$!  # python itself, so that the signal reaches it
  until [ -f "$work/cut/latest.pt" ] || ! kill -0 $pid 2>/dev/null; do sleep 0.05; done
  kill -TERM $pid 2>/dev/null; wait $pid; echo "interrupted run exited with $?"
  "$py" $train --run-dir "$work/cut" --resume || return 1
  "$py" - "$work/straight" "$work/cut" "$work/loose" "$out/steps/resume.json" <<'EOF'
import json, sys
from pathlib import Path

import torch

from cn3.train.checkpoints import load_checkpoint

a, b = (load_checkpoint(Path(d) / "latest.pt") for d in sys.argv[1:3])
log = (Path(sys.argv[2]) / "log.txt").read_text()
same = [torch.equal(v, b["model"][k]) for k, v in a["model"].items()]
diff = max(float((v.double() - b["model"][k].double()).abs().max()) for k, v in a["model"].items())
results = [json.loads((Path(d) / "results.json").read_text()) for d in sys.argv[1:4]]
scores = [r["scores"] for r in results]
report = {"interrupted": "interrupted at step" in log, "resumed": "resuming" in log,
          "steps": [a["state"]["step"], b["state"]["step"]], "weights_equal": all(same), "max_abs_diff": diff,
          "scores_equal": scores[0] == scores[1],
          "test": [s["test"]["score"] for s in scores[:2]], "dev": [s["dev"]["score"] for s in scores[:2]],
          # train.deterministic's cost: the uninterrupted run's training seconds with it and without
          "seconds_deterministic": results[0].get("seconds"), "seconds_without": results[2].get("seconds"),
          "test_without": scores[2]["test"]["score"], "dev_without": scores[2]["dev"]["score"]}
print(json.dumps(report))
json.dump(report, open(sys.argv[4], "w"))
EOF
}
export resume_set
step resume 80 bash -c "$(declare -f resume_check); resume_check"

summarize  # OUT/summary.json, complete
echo "gpu_check: $(( $(date +%s) - started )) s; summary in $out/summary.json"
