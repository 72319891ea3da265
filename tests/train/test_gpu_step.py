"""``scripts/gpu_step.sh --quick`` on the CPU: every step runs within the budget and the summary holds what
the GPU call is for (eager and compiled step figures after three warm-up rounds, whole trainings with
their accuracy)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from data_prep.prepare import PrepareSettings, prepare

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_gpu_step_quick_runs_on_the_cpu(tmp_path, data_root):
    prepared = tmp_path / "prepared"
    prepare(PrepareSettings(task="trec", data=data_root, out=prepared / "trec", annotator="none"))
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "GPU_STEP_PREPARED": str(prepared), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(["bash", "scripts/gpu_step.sh", str(tmp_path / "out"), "--quick"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    steps = summary["steps"]
    assert summary["quick"] and {"env", "steps", "trec_eager", "trec_compiled"} <= set(steps)
    assert summary["budget_s"] == 540 and summary["seconds"] <= 540
    assert all(s["status"] == "ok" for s in steps.values()), steps
    assert steps["env"]["result"]["device"] == "cpu" and steps["env"]["result"]["cpu"]
    trec = steps["steps"]["result"]["trec"]
    for mode in ("eager", "compiled"):
        assert trec[mode]["items_per_s"] > 0 and trec[mode]["aten_ops_per_step"] > 0
        assert trec[mode]["kernel_launches_per_step"] is None  # a CUDA figure
        assert trec[mode]["graph_launches_per_step"] is None
        assert trec[mode]["warmup_rounds"] == 3  # every timed shape run three times before timing
    assert trec["speedup"] > 0
    for run in ("trec_eager", "trec_compiled"):
        assert 0 <= steps[run]["result"]["test"] <= 100 and steps[run]["result"]["steps"] > 0
