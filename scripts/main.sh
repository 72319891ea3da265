#!/usr/bin/env bash
# The main job, end to end on the shared data with the default configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
DATA=${CN3_DATA:-../shared/data}
.venv/bin/cn3 prepare --task snli --data "$DATA" --embeddings "$DATA/glove/glove.6B.50d.top100k.txt.gz"
