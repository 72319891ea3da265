#!/bin/bash
# Paired and Welch tests between the probes of docs/runs/probing (RESULTS.md, "Probing"): per task, A - B
# on the pooled test items of the seeds both encoders have, Welch across them, Holm over the ten tasks.
# Run from the repository root once the probes exist:
#     bash docs/runs/probing/tests.sh        # writes docs/runs/probing/tests/<a>-vs-<b>.json
set -euo pipefail
P=docs/runs/probing
cn3=${CN3:-.venv/bin/cn3}
mkdir -p $P/tests

# compare A B [options]: the probes P/A-seedS against P/B-seedS for every seed S both have
compare() {
    local a=$1 b=$2 out=$1-vs-$2
    shift 2
    local args=()
    for dir in $(ls -d $P/$a-seed* | sort -V); do
        local seed=${dir##*-seed}
        [ -d $P/$b-seed$seed ] && args+=("$dir" -b "$P/$b-seed$seed")
    done
    [ "$a" = "$b" ] && out=$a-stacks
    echo "== $out"
    $cn3 compare-probes "${args[@]}" "$@" --out $P/tests/$out.json
}

compare nmt-local nmt-transformer                # Xu et al. Table 3: local attention against the transformer
compare nmt-hybrid nmt-transformer               # ... and hybrid (per-token gate)
compare nmt-onlstm_san nmt-transformer           # ON-LSTM+SAN against the 3-layer transformer of xu-table1
if ls -d $P/nmt-san6-seed* > /dev/null 2>&1; then   # Hao et al. Table 3: against its own baseline, the 6-layer SAN
    compare nmt-onlstm_san nmt-san6                 # (scripts/gpu_claims.sh trains it again and probes it on a GPU)
fi
compare nmt-onlstm_san nmt-onlstm_san --features H_onlstm --against-features H_san   # its two stacks apart
compare trec-cn3 trec-lstm                       # CN3 against the LSTM, both trained on TREC
compare nmt-transformer trec-lstm                # a translation encoder against a TREC one (length)
