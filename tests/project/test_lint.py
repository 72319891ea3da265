"""The repository passes ``ruff check`` with the configuration of pyproject.toml ([tool.ruff])."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed (pip install -e '.[dev]')")
def test_ruff_check_reports_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                             str(ROOT)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"ruff check reported problems:\n{result.stdout}{result.stderr}"
