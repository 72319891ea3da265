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


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed (pip install -e '.[dev]')")
def test_ruff_reads_every_tracked_python_file_outside_the_run_records():
    """An ``extend-exclude`` that names a folder by its bare name (``runs``) also skips the packages of that
    name (``cn3/runs``, ``tests/runs``): every tracked ``.py`` but the records under docs/runs is read."""
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    wanted = {path for path in tracked.stdout.splitlines()
              if not path.startswith("docs/runs/") and (ROOT / path).is_file()}
    shown = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--show-files", str(ROOT)],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    read = {Path(line.strip()).resolve().relative_to(ROOT).as_posix() for line in shown.stdout.splitlines()
            if line.strip().endswith(".py")}
    assert {"cn3/runs/records.py", "tests/runs/test_compat.py"} <= wanted
    assert sorted(wanted - read) == []
