"""Running a file of Triton kernel cases in Triton's interpreter, for the tests of every kernel.

``TRITON_INTERPRET=1`` is read when triton is imported and holds for the whole process, so it cannot be
turned on inside the test session without changing how every later test sees triton: the cases run
in a subprocess of their own, one thread (the interpreter runs one program at a time anyway).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_interpreter_cases(cases: str) -> None:
    """Run ``cases`` (a path under the repository, e.g. ``tests/fused_interpreter_cases.py``) under
    pytest with ``TRITON_INTERPRET=1``; fail with its output unless it passed and skipped nothing."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", cases],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout, result.stdout[-3000:]
