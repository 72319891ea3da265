"""Missing staged data skips a test locally but fails it under ``$CI`` (tests/conftest.py).

Each case runs pytest in a subprocess on a two-test file beside a copy of the real conftest, with
``CN3_DATA`` pointing at a directory that does or does not exist.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

PROBE = '''
def test_needs_the_data_root(data_root):
    assert data_root.is_dir()


def test_needs_one_file(staged):
    staged("corpus/train.txt")
'''


def run_pytest(tmp_path: Path, data: Path, ci: str | None) -> subprocess.CompletedProcess:
    tests = tmp_path / "probe"
    tests.mkdir(exist_ok=True)
    shutil.copy2(CONFTEST, tests / "conftest.py")
    (tests / "test_probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "CN3_DATA", "PYTEST_ADDOPTS")}
    env["CN3_DATA"] = str(data)
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rsE", "-p", "no:cacheprovider", str(tests)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("ci", ["true", "1"])
def test_missing_data_root_fails_under_ci(tmp_path, ci):
    nowhere = tmp_path / "nowhere"
    run = run_pytest(tmp_path, nowhere, ci)
    assert run.returncode == 1, run.stdout
    assert "2 errors" in run.stdout and f"staged data not found at {nowhere}" in run.stdout, run.stdout


@pytest.mark.parametrize("ci", [None, "", "false"])
def test_missing_data_root_skips_elsewhere(tmp_path, ci):
    run = run_pytest(tmp_path, tmp_path / "nowhere", ci)
    assert run.returncode == 0, run.stdout
    assert "2 skipped" in run.stdout and "failed" not in run.stdout and "error" not in run.stdout, run.stdout


def test_missing_file_fails_under_ci_and_names_it(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    run = run_pytest(tmp_path, data, "true")
    assert run.returncode == 1, run.stdout
    assert "1 failed, 1 passed" in run.stdout, run.stdout
    assert f"staged data not found at {data / 'corpus' / 'train.txt'}" in run.stdout, run.stdout
    (data / "corpus").mkdir()
    (data / "corpus" / "train.txt").write_text("x\n")
    assert run_pytest(tmp_path, data, "true").returncode == 0
