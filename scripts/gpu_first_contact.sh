#!/usr/bin/env bash
# First contact with a GPU: the first call on a lent machine, at most 340 s in all (BUDGET, default 335
# plus at most 5 s for a killed step to exit). Needs only torch, triton and pytest (no .gpu bundle):
#
#   bash scripts/gpu_first_contact.sh OUT_DIR     # from anywhere; the device call's timeout_s about 420
#
# Steps, each in its own process under `timeout` (its cap), the Python parts also under their own
# watchdog (scripts/gpu_first_contact.py: a hang is reported, not waited for):
#   kernel_tests    the Triton kernels' CUDA tests (fused energy against dense, bf16, hardware tanh;
#                   ON-LSTM Triton against the scan)
#   smoke_barrier   A environment; B the ON-LSTM spin barrier at the sizes `auto` picks (and beyond:
#                   forced); C an oversized cooperative grid, which must raise, not hang
#   smoke_fused     D fused CN3 attention against dense, fp32 and bf16: first-call (compile + autotune)
#                   seconds, ms, the autotuner's picks, registers and spills
#   smoke_compiled  E the fused op under CUDA graphs (record, replay); F the BiLSTM context compiled per
#                   length: seconds, graphs, graph breaks, ms against eager
# A step whose cap would overrun BUDGET is skipped and recorded so. What comes back: OUT_DIR/<step>.log,
# OUT_DIR/smoke_*.json (each part and each measured row written as it finishes) and OUT_DIR/status.json
# (every step's status, exit code and seconds, rewritten as each step ends).
#
# Without CUDA it runs the tiny CPU variant under Triton's interpreter, which tests the script itself
# (tests/train/test_gpu_scripts.py):   CUDA_VISIBLE_DEVICES= bash scripts/gpu_first_contact.sh /tmp/first-contact
set -uo pipefail
out=${1:?usage: scripts/gpu_first_contact.sh OUT_DIR}
mkdir -p "$out"; out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.." || exit 1
py=python3; [ -x .venv/bin/python ] && py=.venv/bin/python
BUDGET=${BUDGET:-335}
started=$(date +%s)
export PYTHONUNBUFFERED=1 TRITON_PRINT_AUTOTUNING=1
export TORCH_LOGS="${TORCH_LOGS:-perf_hints,recompiles}"   # 'skipping cudagraphs due to ...' lands in the logs
cuda=$(timeout 60 "$py" -c "import torch; print(int(torch.cuda.is_available()))" 2>/dev/null || echo 0)
smoke=(); [ "$cuda" = 1 ] || { smoke=(--cpu-smoke); export TRITON_INTERPRET=1; }
: > "$out/status.txt"

status_json() {  # OUT/status.json from OUT/status.txt ("NAME STATUS RC SECONDS" lines)
  "$py" - "$out" "$BUDGET" "$(( $(date +%s) - started ))" "$cuda" <<'PY'
import json, sys
from pathlib import Path

out = Path(sys.argv[1])
steps = {}
for line in (out / "status.txt").read_text().splitlines():
    name, status, rc, seconds = line.split()
    steps[name] = {"status": status, "rc": None if rc == "-" else int(rc), "seconds": int(seconds)}
report = {"budget_s": int(sys.argv[2]), "seconds": int(sys.argv[3]), "cuda": sys.argv[4] == "1", "steps": steps}
(out / "status.json").write_text(json.dumps(report, indent=1) + "\n")
PY
}

step() {  # step NAME CAP CMD...
  local name=$1 cap=$2; shift 2
  local spent=$(( $(date +%s) - started ))
  if (( spent + cap > BUDGET )); then
    echo "== $name skipped: at ${spent} s its cap of ${cap} s would pass the budget of ${BUDGET} s"
    echo "$name skipped - 0" >> "$out/status.txt"; status_json; return
  fi
  echo "== $name (cap ${cap} s, at ${spent} s)"
  local t0; t0=$(date +%s)
  timeout -k 5 "$cap" "$@" > "$out/$name.log" 2>&1
  local rc=$? state=ok
  (( rc == 124 || rc == 137 )) && state=timeout
  (( rc != 0 && state == ok )) && state=failed
  echo "$name $state $rc $(( $(date +%s) - t0 ))" >> "$out/status.txt"
  status_json
  tail -n 4 "$out/$name.log"
}

step env 20 "$py" -c "
import json, torch, triton
cuda = torch.cuda.is_available()
info = {'torch': torch.__version__, 'cuda': torch.version.cuda, 'triton': triton.__version__,
        'device': torch.cuda.get_device_name() if cuda else 'cpu'}
print(json.dumps(info)); json.dump(info, open('$out/env.json', 'w'))"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > "$out/nvidia-smi.txt" 2>&1 || true

step kernel_tests 90 "$py" -m pytest -q -rs -p no:cacheprovider -k cuda \
  tests/layers/test_fused_energy.py tests/layers/test_onlstm_triton.py
step smoke_barrier 90 "$py" "$here/gpu_first_contact.py" "$out/smoke_barrier.json" --parts=A,B,C "${smoke[@]}"
step smoke_fused 75 "$py" "$here/gpu_first_contact.py" "$out/smoke_fused.json" --parts=D "${smoke[@]}"
step smoke_compiled 75 "$py" "$here/gpu_first_contact.py" "$out/smoke_compiled.json" --parts=E,F "${smoke[@]}"
status_json
echo "gpu_first_contact: $(( $(date +%s) - started )) s; $out/status.json"
