"""scripts/gpu_claims.sh, the script a lent GPU runs for the grids' GPU cells, on the CPU with one smoke
round: it trains the round, probes a run once its checkpoint exists, skips a round the budget cannot
hold, and packs the records and probes without checkpoints (what comes back from the GPU machine)."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROUND = "liu-table3 --budget smoke --only task=trec --only variant=nbow --only seed=1"


def run_claims(out: Path, runs: Path, budget: int, round_seconds: int, probes: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "GPU_CLAIMS_RUNS": str(runs), "GPU_CLAIMS_ROUNDS": f"{ROUND}\n{ROUND}",
           "ROUND_SECONDS": str(round_seconds), "GPU_CLAIMS_PROBES": probes}
    return subprocess.run(["bash", str(REPO / "scripts" / "gpu_claims.sh"), str(out), str(budget)],
                          env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # smoke rounds, each a `cn3 experiment run` and a probe in subprocesses: 20 s
def test_a_round_trains_and_its_records_come_back_without_checkpoints(staged, tmp_path):
    staged("trec")
    runs = tmp_path / "runs"
    cell = runs / "liu-table3-smoke" / "trec" / "nbow" / "seed1"
    probe = tmp_path / "probes" / "nbow"
    probes = f"{cell} {probe} --tasks sentlen --limit 200\n{runs}/nothing/here {tmp_path}/never"
    done = run_claims(tmp_path / "out", runs, budget=500, round_seconds=1, probes=probes)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (cell / "results.json").is_file() and list(cell.glob("*.pt"))  # trained, checkpoints there
    log = (tmp_path / "out" / "gpu_claims.log").read_text()
    assert "round 1: " + ROUND in log and "round 2: " in log  # the second line: its cell is done, seconds
    assert "packed the records of 1 grids and 1 probes" in log
    assert log.count("probe: ") == 1  # probed after round 1, not again after round 2; no run, no probe
    assert (probe / "probe.json").is_file() and not (tmp_path / "never").exists()
    with tarfile.open(tmp_path / "out" / "claims.tar.xz") as tar:
        names = tar.getnames()
    assert any(n.endswith("probes/nbow/probe.json") for n in names)
    assert any(n.endswith("liu-table3-smoke/trec/nbow/seed1/results.json") for n in names)
    assert any(n.endswith("liu-table3-smoke/grid.json") for n in names)
    assert not [n for n in names if n.endswith(".pt") or "/spm." in n or n.endswith("vocab.json")]


def test_a_round_the_budget_cannot_hold_is_not_started(tmp_path):
    done = run_claims(tmp_path / "out", tmp_path / "runs", budget=10, round_seconds=300)
    assert done.returncode == 0, done.stdout + done.stderr
    log = (tmp_path / "out" / "gpu_claims.log").read_text()
    assert "round 1 and later not started: " in log and "a round needs about 300" in log
    assert "packed the records of 0 grids and 0 probes" in log
    assert not (tmp_path / "runs").exists()
