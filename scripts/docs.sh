#!/usr/bin/env bash
# Serve the documentation site (mkdocs.yml, pages under docs/) at http://127.0.0.1:${DOCS_PORT:-8000},
# rebuilt on every change; Ctrl-C stops it. Extra arguments go to `mkdocs serve`. The tests build the
# same site with --strict (tests/project/test_docs.py).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/mkdocs ] || bash scripts/setup.sh
exec .venv/bin/mkdocs serve --dev-addr "127.0.0.1:${DOCS_PORT:-8000}" "$@"
