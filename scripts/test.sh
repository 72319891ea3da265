#!/usr/bin/env bash
# Set up (if needed, with the browser of the page tests) and run the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --browser
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
