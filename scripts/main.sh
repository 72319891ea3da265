#!/usr/bin/env bash
# The main job, end to end on the shared data with the default configuration (about 6 minutes on 2 CPU
# cores once the venv exists, 2.5 of them training; RESULTS.md "The main job from a clean clone"):
# prepare TREC (spaCy parses, GloVe) and print its summary, train CN3 with cn3/configs/trec.yaml,
# score the test split, label a question, and show the sentence graph the model learned.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CN3_DATA=${CN3_DATA:-$(cd .. && pwd)/shared/data}
RUN=${RUN:-runs/trec-cn3-seed1}   # what `cn3 train --task trec` names it: the README's tour reads it
cn3() { .venv/bin/cn3 "$@"; }
cn3 prepare --task trec --embeddings "$CN3_DATA/glove/glove.6B.50d.top100k.txt.gz"
if [ -f "$RUN/latest.pt" ] && [ ! -f "$RUN/results.json" ]; then
    cn3 train --task trec --run-dir "$RUN" --resume      # an interrupted main job continues
elif [ ! -f "$RUN/results.json" ]; then
    cn3 train --task trec --run-dir "$RUN"
fi
cn3 evaluate "$RUN" --split test --report
cn3 predict "$RUN" "What is the capital of Peru ?" "Who wrote Hamlet ?"
cn3 visualize edges "$RUN" "What is Susan B. Anthony 's birthday ?"
