# Sourced by scripts/gpu_check.sh and scripts/gpu_step.sh: the measuring scripts' shared set-up, `step`
# and `summarize`.
#   gpu_setup OUT PREPARED   OUT made absolute (OUT/steps created), the working directory the repository,
#                            $py (.venv's python where there is one, else python3), $prepared (PREPARED, or
#                            prepared/ on the CPU machine before bundling), $work (a scratch folder removed at
#                            exit: run directories, only their records come back), $started
#   step NAME SECONDS CMD... the command in its own process under `timeout` (its watchdog), stdout and
#                            stderr into OUT/NAME.log, its exit status and wall time (ms) into
#                            OUT/steps/NAME.status, then OUT/summary.json rewritten; a failed step does not
#                            stop the others; a NAME listed in $STEP_SKIP is recorded as skipped, and a step
#                            whose cap would take the script past $STEP_BUDGET seconds (default 540) as
#                            skipped for the budget, so the whole script ends within the budget (+10 s)
#   summarize QUICK          OUT/summary.json from OUT/steps: every step's status, exit code and seconds,
#                            with what it measured (OUT/steps/NAME.json; a run's results.json cut to its
#                            figures; a JUnit OUT/steps/NAME.xml as test counts)

gpu_setup() {
  mkdir -p "$1/steps"
  out=$(cd "$1" && pwd)
  cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
  py=python3
  [ -x .venv/bin/python ] && py=.venv/bin/python  # the CPU machine's environment; the GPU machine has python3
  prepared=$2
  [ -d "$prepared/trec" ] || prepared=prepared   # the CPU machine before bundling
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  started=$(date +%s)
}

step() {
  local name=$1 limit=$2; shift 2
  local spent=$(( $(date +%s) - started ))
  if [[ " ${STEP_SKIP:-} " == *" $name "* ]]; then
    echo "== $name skipped"; echo "skipped 0" > "$out/steps/$name.status"; summarize; return
  fi
  if (( spent + limit > ${STEP_BUDGET:-540} )); then
    echo "== $name skipped: at ${spent} s its cap of ${limit} s would pass the budget of ${STEP_BUDGET:-540} s"
    echo "budget 0" > "$out/steps/$name.status"; summarize; return
  fi
  local t0; t0=$(date +%s%N)
  echo "== $name (at most ${limit} s; ${spent} s so far)"
  timeout -k 10 "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "$rc $(( ($(date +%s%N) - t0) / 1000000 ))" > "$out/steps/$name.status"
  tail -n 3 "$out/$name.log"
  echo "   -> exit $rc"
  summarize
}

summarize() {
  "$py" - "$out" "$(( $(date +%s) - started ))" "${quick:-0}" "${STEP_BUDGET:-540}" <<'PY'
import json, sys
import xml.etree.ElementTree as ET
from pathlib import Path

out, total, quick, budget = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4])
summary = {"seconds": total, "budget_s": budget, "quick": quick, "steps": {}}
for status in sorted((out / "steps").glob("*.status"), key=lambda p: p.stat().st_mtime):
    rc, ms = status.read_text().split()
    if rc in ("skipped", "budget"):
        summary["steps"][status.stem] = {"status": "skipped" if rc == "skipped" else "skipped (budget)"}
        continue
    rc, ms = int(rc), int(ms)
    summary["steps"][status.stem] = {"status": "ok" if rc == 0 else "timeout" if rc in (124, 137) else "failed",
                                     "rc": rc, "seconds": round(ms / 1000, 1), "log": f"{status.stem}.log"}
for path in sorted((out / "steps").glob("*.json")):
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError:
        data = {"unreadable": path.name}
    if isinstance(data, dict) and "scores" in data:  # a run's results.json: the figures, not the predictions
        data = {"seconds": data.get("seconds"), "steps": data.get("steps"), "device": data.get("device"),
                **{split: s["score"] for split, s in data["scores"].items()}}
    summary["steps"].setdefault(path.stem, {})["result"] = data
for path in sorted((out / "steps").glob("*.xml")):  # pytest's JUnit report: the counts
    try:
        suite = ET.parse(path).getroot()
    except ET.ParseError:
        continue
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    summary["steps"].setdefault(path.stem, {})["result"] = counts
(out / "summary.json.tmp").write_text(json.dumps(summary, indent=1) + "\n")
(out / "summary.json.tmp").replace(out / "summary.json")
PY
}
