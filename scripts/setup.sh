#!/usr/bin/env bash
# Create .venv and install cn3 with its dependencies; does nothing when already up to date.
# `bash scripts/setup.sh --browser` also installs the browser the page tests drive (scripts/test.sh does;
# the main job, scripts/main.sh, does not: it needs no browser).
# torch is installed first and pinned (TORCH_SPEC, default the local CPU build torch==2.13.0), so the
# range in pyproject.toml is already satisfied and pip never pulls another (multi-GB CUDA) torch.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
stamp=.venv/.cn3-installed
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ scripts/setup.sh -nt "$stamp" ]; then
    echo "setup: installing into .venv (log: .venv/setup.log)" >&2
    {
        .venv/bin/pip install --disable-pip-version-check "$TORCH_SPEC" &&
        .venv/bin/pip install --disable-pip-version-check -e ".[spacy,dev,ray,slurm]" &&
        .venv/bin/pip install --disable-pip-version-check "triton>=3.2"  # the gpu extra: fused-kernel tests (interpreter)
    } >.venv/setup.log 2>&1 || { tail -n 30 .venv/setup.log >&2; exit 1; }
    touch "$stamp"
fi
# The browser tests of cn3 serve (tests/serve/test_browser.py) drive Debian's chromium through its
# chromedriver. Installed with --browser only, as root where apt-get exists (as in CI); elsewhere nothing
# is done and those tests skip, saying what is missing.
if [ "${1:-}" = --browser ] && { [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; }; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        mkdir -p .venv
        echo "setup: installing chromium and chromium-driver (log: .venv/chromium.log)" >&2
        { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
            chromium chromium-driver; } >.venv/chromium.log 2>&1 ||
            { tail -n 20 .venv/chromium.log >&2; echo "setup: chromium not installed; the browser tests will skip" >&2; }
    fi
fi
