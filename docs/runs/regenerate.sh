#!/usr/bin/env bash
# Regenerate every committed grid report from the records under docs/runs into a scratch folder and
# compare it with the committed one, file by file (report.md/.csv/.json/.tex; the reports' PNGs are drawn
# by matplotlib, whose bytes depend on its version, so they are not compared); then RESULTS.md's claims
# table (python -m cn3.stats.claims --check) and the forest plots docs/figures/forest-<paper>.png, drawn
# again into SCRATCH/figures and compared byte for byte (fixed metadata; the venv's matplotlib).
#   bash docs/runs/regenerate.sh [SCRATCH]      exit 0: every report, the table and the plots regenerate
#   bash docs/runs/regenerate.sh --write        rewrite the claims table and the forest plots in place
# The commands are RESULTS.md's, with --out pointed at SCRATCH; a --baseline report of the same cells as
# its grid's report is drawn --no-plot (its PNG would be a byte-for-byte copy of that report's). Needs the prepared logic data for the
# --by n_ops report (cn3 prepare logic), as RESULTS.md says.
set -uo pipefail
cd "$(dirname "$0")/../.."
CN3=${CN3:-.venv/bin/cn3}
PYTHON=${PYTHON:-.venv/bin/python}
if [ "${1:-}" = --write ]; then
    "$PYTHON" -m cn3.stats.claims && "$PYTHON" -m cn3.stats.forest docs/figures
    exit $?
fi
scratch=${1:-$(mktemp -d)}
runs=docs/runs/experiments
status=0
report() {  # report OUT_DIR_COMMITTED ARGS...
    local committed=$1; shift
    local out="$scratch/${committed#docs/runs/}"
    echo "== $committed" >&2
    mkdir -p "$out"
    if ! "$CN3" experiment report "$@" --runs "$runs" --out "$out" >"$out.log" 2>&1; then
        echo "FAILED: $committed (log: $out.log)" >&2; tail -5 "$out.log" >&2; status=1; return
    fi
    for f in "$out"/*.md "$out"/*.csv "$out"/*.json "$out"/*.tex; do
        [ -e "$f" ] || continue
        if ! cmp -s "$f" "$committed/$(basename "$f")"; then
            echo "DIFFERS: $committed/$(basename "$f")" >&2; status=1
        fi
    done
}
mkdir -p "$scratch"
report docs/runs/liu-table3-cpu liu-table3 --budget cpu --only task=trec,sick,conll2000
report docs/runs/liu-table3-cpu/vs-pdgraph liu-table3 --budget cpu --only task=trec,sick,conll2000 --baseline pdgraph --no-plot
report docs/runs/liu-table3-cpu/sst2 liu-table3 --budget cpu --only task=sst2
runs=docs/runs/experiments-sst2-test report docs/runs/liu-table3-cpu/sst2-test liu-table3 --budget cpu --only task=sst2
runs=docs/runs/experiments-sst2-test report docs/runs/liu-table3-cpu/sst2-test/vs-pdgraph liu-table3 --budget cpu --only task=sst2 --baseline pdgraph --no-plot
runs=docs/runs/experiments-sst2-test report docs/runs/liu-table3-cpu/sst2-test/vs-cn3 liu-table3 --budget cpu --only task=sst2 --baseline cn3 --no-plot
report docs/runs/liu-table3-cpu/vs-cn3 liu-table3 --budget cpu --only task=trec,sick,conll2000 --baseline cn3 --no-plot
report docs/runs/liu-table3-cpu-rest liu-table3 --budget cpu-rest
report docs/runs/liu-table3-cpu-rest/vs-pdgraph liu-table3 --budget cpu-rest --baseline pdgraph --no-plot
report docs/runs/liu-table3-cpu-folds liu-table3 --budget cpu-folds
report docs/runs/liu-table3-cpu-folds/vs-pdgraph liu-table3 --budget cpu-folds --baseline pdgraph --no-plot
report docs/runs/liu-table3-cpu-tuned liu-table3 --budget cpu-tuned
report docs/runs/liu-table3-cpu-tuned/vs-pdgraph liu-table3 --budget cpu-tuned --baseline pdgraph --no-plot
report docs/runs/logic-length logic-length --budget cpu
report docs/runs/logic-length/vs-transformer logic-length --budget cpu --only variant=transformer,onlstm,onlstm_san,hybrid --baseline transformer
report docs/runs/logic-length logic-length --budget cpu --by n_ops
report docs/runs/logic-length/vs-transformer logic-length --budget cpu --only variant=transformer,onlstm,onlstm_san,hybrid --baseline transformer --by n_ops
report docs/runs/experiments/xu-table1/report xu-table1
report docs/runs/experiments/xu-table1/report/vs-local xu-table1 --baseline local --only variant=local,hybrid-gate,hybrid-concat
report docs/runs/experiments/xu-table1/report/vs-concat xu-table1 --baseline hybrid-concat --only variant=hybrid-concat,hybrid-gate
report docs/runs/experiments/xu-window/report xu-window
report docs/runs/experiments/hao-table1/report hao-table1
report docs/runs/experiments/hao-table1/report/vs-noshortcut hao-table1 --baseline onlstm+san-noshortcut --only variant=onlstm+san,onlstm+san-noshortcut
report docs/runs/experiments/hao-table1/report/vs-lstm-san hao-table1 --baseline lstm+san --only variant=lstm+san,onlstm+san
report docs/runs/experiments/hao-table1/report/vs-lstm hao-table1 --baseline lstm --only variant=lstm,onlstm
report docs/runs/experiments/hao-table1-no-residual/report hao-table1 --budget no-residual
report docs/runs/experiments/hao-table2/report hao-table2
report docs/runs/experiments/hao-table2/report/paper-rows hao-table2 --baseline onlstm-first-noshortcut --only variant=onlstm-first-noshortcut,san-first-noshortcut
report docs/runs/experiments/precision-cpu/report precision --budget cpu
report docs/runs/experiments/graphs-cpu/report graphs --budget cpu
report docs/runs/experiments/graphs-conll/report graphs --budget conll
echo "== RESULTS.md claims table and docs/figures/forest-*.png" >&2
if ! "$PYTHON" -m cn3.stats.claims --check; then status=1; fi
if "$PYTHON" -m cn3.stats.forest "$scratch/figures" >/dev/null; then
    for f in "$scratch"/figures/forest-*.png; do
        cmp -s "$f" "docs/figures/$(basename "$f")" || { echo "DIFFERS: docs/figures/$(basename "$f")" >&2; status=1; }
    done
else
    echo "FAILED: the forest plots" >&2; status=1
fi
[ $status = 0 ] && echo "every report, the claims table and the forest plots regenerated byte for byte (scratch: $scratch)" >&2
exit $status
