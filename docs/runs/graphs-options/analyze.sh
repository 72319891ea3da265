#!/usr/bin/env bash
# The graph statistics of every finished cell of the graphs grid that kept its checkpoint, on dev:
#   bash docs/runs/graphs-options/analyze.sh GRID        # GRID: e.g. runs/graphs-cpu (cn3 experiment run graphs --budget cpu)
# writes docs/runs/graphs-options/<task>-<variant>-seed<S>/{graphs,energy}.json (skips those already there).
set -euo pipefail
cd "$(dirname "$0")/../../.."
grid=${1:?usage: analyze.sh GRID}
out=docs/runs/graphs-options
for cell in "$grid"/*/*/seed*; do
    [ -f "$cell/best.pt" ] && [ -f "$cell/results.json" ] || continue
    seed=${cell##*/}; variant=$(basename "$(dirname "$cell")"); task=$(basename "$(dirname "$(dirname "$cell")")")
    dest="$out/$task-$variant-$seed"
    [ -f "$dest/energy.json" ] && continue
    mkdir -p "$dest"
    OMP_NUM_THREADS=1 .venv/bin/cn3 analyze graphs "$cell" --split dev --out "$dest" >/dev/null
    rm -f "$dest/graphs.png"  # the figure is redrawn by the command; the record keeps the numbers
    OMP_NUM_THREADS=1 .venv/bin/cn3 analyze energy "$cell" --split dev --out "$dest" >/dev/null
    echo "analyzed $cell -> $dest"
done
