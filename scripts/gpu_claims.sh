#!/usr/bin/env bash
# The translation cells RESULTS.md's claims still wait for, trained on a lent GPU in the order that
# decides the most claims first, within a time budget, their records packed into OUT_DIR to come back:
#
#   source .gpu/env.sh && bash scripts/gpu_claims.sh "$OUT" [SECONDS]        (on the GPU machine)
#   tar -xJf FILES_AT/claims.tar.xz                                           (here, from the project root)
#
# A translation cell takes about 50 minutes on one CPU core and 2.2-2.6 minutes on an H200 with four
# cells side by side (--jobs 4 --threads 2: 1.7 cells a minute; --jobs 12 gave 1.35); on an H100 four
# 6-layer SAN cells took 170-177 s side by side, while three ON-LSTM+SAN cells beside one SAN were not
# done after 247 s (2026-11-26, the plain ON-LSTM scan); with the Triton scan (`auto`, hidden 128) four
# ON-LSTM+SAN cells took 198-215 s side by side on an H200 (2026-11-26); on an H200 on 2026-11-27 four or five LSTM+SAN
# cells took 155-175 s, four hybrid Transformer cells 108-119 s and three SAN-first ON-LSTM cells 161-163 s (`results.json`
# "seconds"), so two calls held three rounds and one more. So the script runs rounds of at most four cells, each round one
# or two `cn3 experiment run` invocations side by side (runners share a grid), and starts a round only
# while ROUND_SECONDS (default 300) still fit in the budget (default 540 s, so a device session of 15
# minutes keeps room for the machine's start). With the plain scan an ON-LSTM round needs most of a
# call, so run it alone in a session (no gpu_check before it), at most 560 s a call; a warm machine
# with over 300 s of device time left takes one more round (GPU_CLAIMS_ROUNDS=LINE, SECONDS 330).
# A round cut by the budget leaves interrupted cells whose checkpoints do not come back: they start
# again next time; every finished cell is reused (grids skip finished cells), so running the script
# again in the next GPU session continues where this one stopped.
# A second call on the same warm machine gets this tree again (the tracked grid.json as committed
# here): extract the first call's claims.tar.xz before it, or its grid.json will lack the first call's
# invocations (the cells' own records are kept either way).
#
# What comes back (claims.tar.xz): each touched grid's records as docs/runs keeps them (no
# checkpoints, subword models, vocabularies, curves or translations: docs/runs/.gitignore) and its
# grid.json, whose invocations name the device (recorded by the runner since 2026-11-26). Extract it
# over the tree, commit the cells, and re-render the reports with RESULTS.md's commands.
#
# Prepare on the CPU machine: GPU_DATA="multi30k ud_english_ewt nltk_data" bash ../shared/gpu/bundle.sh
# (carry [".gpu"]; the last two are the probing data).
set -uo pipefail

out=${1:?usage: scripts/gpu_claims.sh OUT_DIR [SECONDS]}
budget=${2:-540}
round_seconds=${ROUND_SECONDS:-300}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
py=python3
[ -x .venv/bin/python ] && py=.venv/bin/python
runs=${GPU_CLAIMS_RUNS:-docs/runs/experiments}   # (tests point it elsewhere)
started=$(date +%s)
stamp=$(mktemp)   # files newer than this are what the rounds wrote

# One round a line: invocations side by side (four cells in all at most), separated by " ; ", each "SPEC ARGS..."
# (what `cn3 experiment run` takes after the command); cells already finished are skipped, so a line
# whose cells are done costs seconds. What the claims table (RESULTS.md) still waits for, in its order:
# hao-table1's 6-layer ON-LSTM and LSTM seeds 4-5 (seeds 1-3 trained on the CPU), then ON-LSTM+SAN with
# residual connections (not in the paper). hao-table2, xu-window and the probed SAN are complete.
ROUNDS=${GPU_CLAIMS_ROUNDS:-"hao-table1 --only variant=onlstm --only seed=4,5 ; hao-table1 --only variant=lstm --only seed=4,5
hao-table1 --only variant=onlstm+san-residual --only seed=1,2,3,4
hao-table1 --only variant=onlstm+san-residual --only seed=5"}

# Probes, one a line, "RUN_DIR PROBE_DIR [cn3 probe options]": after each round, a run that now has
# its checkpoint (best.pt) and no probe.json in PROBE_DIR yet is probed here, since checkpoints never
# come back; its probing data must travel (bundle GPU_DATA="multi30k ud_english_ewt nltk_data"). The
# probes come back in claims.tar.xz beside the records. None is waiting now (the 6-layer SAN of Hao et
# al. Table 3 was trained again and probed on the CPU, seeds 1-2); a round that trains a run to probe
# names it here.
PROBES=${GPU_CLAIMS_PROBES-""}

log() { echo "[gpu_claims $(( $(date +%s) - started )) s] $*" | tee -a "$out/gpu_claims.log"; }

probed=()
probe_ready() {
    local line a left
    while IFS= read -r line; do
        [ -n "$line" ] || continue
        read -ra a <<< "$line"
        [ -f "${a[0]}/best.pt" ] && [ ! -f "${a[1]}/probe.json" ] || continue
        left=$(( budget - ($(date +%s) - started) ))
        [ "$left" -gt 0 ] || { log "probe of ${a[0]} not started: the budget is spent"; continue; }
        log "probe: ${a[0]} -> ${a[1]}"
        timeout -s TERM -k 30 "$left" "$py" -m cli probe "${a[0]}" --out "${a[1]}" "${a[@]:2}" \
            > "$out/probe.$(basename "${a[1]}").log" 2>&1 < /dev/null || log "probe of ${a[0]} exited $?"
        probed+=("${a[1]}")
    done <<< "$PROBES"
}

grids=()
round=0
while IFS= read -r line; do
    [ -n "$line" ] || continue
    round=$((round + 1))
    left=$(( budget - ($(date +%s) - started) ))
    if [ "$left" -lt "$round_seconds" ]; then
        log "round $round and later not started: $left s left of $budget, a round needs about $round_seconds"
        break
    fi
    log "round $round: $line"
    pids=()
    part=0
    IFS=';' read -ra parts <<< "$line"
    for p in "${parts[@]}"; do
        read -ra args <<< "$p"
        part=$((part + 1))
        grid=${args[0]}   # the grid's folder: SPEC, or SPEC-BUDGET under --budget
        for ((i = 1; i < ${#args[@]}; i++)); do [ "${args[i]}" = --budget ] && grid+="-${args[i+1]}"; done
        grids+=("$grid")
        # Two threads a cell, four cells at most at a time; a round's own options come after, so win.
        timeout -s TERM -k 30 "$left" "$py" -m cli experiment run "${args[0]}" --jobs 4 --threads 2 \
            "${args[@]:1}" --out "$runs" > "$out/round$round.$part.log" 2>&1 &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do
        wait "$pid"; rc=$?
        [ "$rc" = 0 ] || log "round $round: an invocation exited $rc (its log: round$round.*.log)"
    done
    probe_ready
done <<< "$ROUNDS"

# The records of every grid touched: the files written since the start (the machine's copy of the
# tree may have no .git), less the large ones docs/runs/.gitignore leaves out anyway; what else it
# ignores (the untested splits' predictions, locks) stays ignored when extracted here.
touched=()   # (printf of an empty list prints one empty line: no round, no grid)
[ ${#grids[@]} -gt 0 ] && mapfile -t touched < <(printf '%s\n' "${grids[@]}" | sort -u)
files=$(mktemp)
for g in "${touched[@]}"; do
    [ -d "$runs/$g" ] && find "$runs/$g" -type f -newer "$stamp" >> "$files"
done
for d in "${probed[@]}"; do
    [ -d "$d" ] && find "$d" -type f -newer "$stamp" >> "$files"
done
tar -cJf "$out/claims.tar.xz" --exclude='*.pt' --exclude='spm.*' --exclude=vocab.json --exclude=curves.png \
    --exclude=translations --exclude=tensorboard --exclude=experiment.log --exclude='.*.lock' -T "$files"
log "packed the records of ${#touched[@]} grids and ${#probed[@]} probes ($(tar -tJf "$out/claims.tar.xz" | wc -l) files) into claims.tar.xz; $(( $(date +%s) - started )) s in all"
