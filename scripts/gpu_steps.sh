# Sourced by scripts/gpu_check.sh and scripts/gpu_step.sh: the measuring scripts' shared set-up and `step`.
#   gpu_setup OUT PREPARED   OUT made absolute (OUT/steps created), the working directory the repository,
#                            $py (.venv's python where there is one, else python3), $prepared (PREPARED, or
#                            prepared/ on the CPU machine before bundling), $work (a scratch folder removed at
#                            exit: run directories, only their records come back), $started
#   step NAME SECONDS CMD... the command under its timeout, stdout and stderr into OUT/NAME.log, its exit status
#                            and wall time (ms) into OUT/steps/NAME.status; a failed step does not stop the
#                            others; a NAME listed in $STEP_SKIP is recorded as skipped

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
  if [[ " ${STEP_SKIP:-} " == *" $name "* ]]; then
    echo "== $name skipped"; echo "skipped 0" > "$out/steps/$name.status"; return
  fi
  local t0; t0=$(date +%s%N)
  echo "== $name (at most ${limit} s; $(( $(date +%s) - started )) s so far)"
  timeout -k 10 "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "$rc $(( ($(date +%s%N) - t0) / 1000000 ))" > "$out/steps/$name.status"
  tail -n 3 "$out/$name.log"
  echo "   -> exit $rc"
}
