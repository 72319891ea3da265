"""The GPU scripts' lease discipline, on the CPU: a step in its own process under ``timeout``, a step whose
cap would pass the budget skipped and recorded, ``summary.json`` rewritten as each step ends (so a call
cut short keeps what came before); ``gpu_check.sh``'s caps within 540 s; the first-contact script's
CPU mode end to end (slow: about a minute and a half, most of it Triton's interpreter)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _steps(tmp_path: Path, body: str, budget: int) -> subprocess.CompletedProcess:
    """``body`` run after sourcing ``scripts/gpu_steps.sh`` with OUT ``tmp_path/out``."""
    script = (f'source scripts/gpu_steps.sh\ngpu_setup "{tmp_path / "out"}" prepared\n'
              f"STEP_BUDGET={budget}\n{body}\n")
    return subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_step_budget_timeout_and_summary_as_each_step_ends(tmp_path):
    out = tmp_path / "out"
    (tmp_path / "x.json").write_text('{"x": 1}')
    body = f"""
step first 5 cp "{tmp_path / 'x.json'}" "$out/steps/first.json"
cp "$out/summary.json" "{tmp_path}/after_first.json"
step slow 1 sleep 30
step failing 5 false
step too_long 600 true
"""
    done = _steps(tmp_path, body, budget=60)
    assert done.returncode == 0, done.stdout + done.stderr
    after_first = json.loads((tmp_path / "after_first.json").read_text())
    assert after_first["steps"]["first"] == {"status": "ok", "rc": 0, "seconds": pytest.approx(0, abs=3),
                                             "log": "first.log", "result": {"x": 1}}
    summary = json.loads((out / "summary.json").read_text())
    steps = summary["steps"]
    assert summary["budget_s"] == 60
    assert steps["slow"]["status"] == "timeout" and steps["slow"]["seconds"] < 5  # killed at its cap
    assert steps["failing"]["status"] == "failed" and steps["failing"]["rc"] == 1
    assert steps["too_long"] == {"status": "skipped (budget)"}
    assert "too_long skipped: at" in done.stdout and "budget of 60 s" in done.stdout


def test_gpu_check_caps_fit_a_lease():
    """The caps of gpu_check.sh's steps add up to at most 540 s (the device allows 600 a call) and its
    default budget is 540; gpu_step.sh's caps (its GPU limits) too."""
    text = (ROOT / "scripts" / "gpu_check.sh").read_text()
    caps = [int(c) for c in re.findall(r"^step \w+ (\d+) ", text, flags=re.M)]
    assert len(caps) == 9 and sum(caps) <= 540, caps
    assert "STEP_BUDGET=${GPU_CHECK_BUDGET:-540}" in text
    text = (ROOT / "scripts" / "gpu_step.sh").read_text()
    env = int(re.search(r"^step env (\d+) ", text, flags=re.M).group(1))
    limits = [int(v) for v in re.search(r'tasks="snli trec"\n\s*limits=\(([\d ]+)\)', text).group(1).split()]
    assert env + limits[0] + 2 * (limits[1] + limits[2]) <= 540, limits
    assert "STEP_BUDGET=${GPU_STEP_BUDGET:-540}" in text


@pytest.mark.slow
def test_first_contact_runs_on_the_cpu_within_its_budget(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run(["bash", "scripts/gpu_first_contact.sh", str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    status = json.loads((tmp_path / "status.json").read_text())
    assert not status["cuda"] and status["budget_s"] <= 340
    assert set(status["steps"]) == {"env", "kernel_tests", "smoke_barrier", "smoke_fused", "smoke_compiled"}
    assert all(s["status"] == "ok" for s in status["steps"].values()), status
    parts = {}
    for name in ("smoke_barrier", "smoke_fused", "smoke_compiled"):
        parts.update(json.loads((tmp_path / f"{name}.json").read_text())["parts"])
    assert set(parts) == set("ABCDEF") and all(p["status"] == "ok" for p in parts.values()), parts
    assert parts["B"]["result"]["rows"][0]["max_abs_diff"] < 1e-4  # Triton (interpreted) against the scan
    assert parts["D"]["result"]["rows"][0]["max_abs_diff_out"] < 1e-4  # fused against dense
    lstm = parts["F"]["result"]
    assert [r["N"] for r in lstm] == [8, 32]
    assert lstm[0]["graphs"] == lstm[1]["graphs"] and lstm[0]["graph_breaks"] == lstm[1]["graph_breaks"]
