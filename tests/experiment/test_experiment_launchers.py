"""``cn3 experiment run --launcher ray|slurm``: the same grid trained as Ray tasks on a local Ray cluster
of two workers and as jobs of submitit's local executor gives the report ``--launcher local`` gives;
a worker killed mid-cell leaves a failed cell that the next run of the grid finishes exactly."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cli.main import app
from cn3.experiment.spec import load_spec
from data_prep.prepare import PrepareSettings, prepare

# slow: grids through Ray and submitit (`pytest -m "not slow"` is the quick loop)
pytestmark = pytest.mark.slow

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def tiny_spec(path: Path, prepared: Path, **fields) -> Path:
    """TREC, LSTM and NBOW x 2 seeds, models of seconds (as tests/experiment/test_experiment.py's grid)."""
    spec = {"name": "tiny", "tasks": ["trec"], "baseline": "lstm", "seeds": [1, 2],
            "variants": {"lstm": {"model.encoder": "lstm"}, "nbow": {"model.encoder": "nbow"}},
            "set": {"data.prepared": str(prepared), "data.embeddings": None, "data.limit": 150, "train.epochs": 2,
                    "model.hidden": 16, "model.char": "none", "model.pos_dim": 0, "model.spell_dim": 0}}
    spec.update(fields)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, data_root):
    out = tmp_path_factory.mktemp("launchers") / "trec"
    prepare(PrepareSettings(task="trec", data=data_root, out=out, annotator="none"))
    return out


@pytest.fixture(scope="module")
def ray_cluster():
    """A Ray of two CPUs started by the test process, which the launcher then uses as it is; its
    sockets in a short temporary directory (a Unix socket path has at most 107 bytes). Its one GPU
    exists for Ray's scheduling only: cells asking for half of it share it and are shown it
    (CUDA_VISIBLE_DEVICES=0), and the CPU build of torch trains them on the CPU all the same."""
    import ray

    temp = tempfile.mkdtemp(prefix="cn3ray-", dir="/tmp")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_AUTH_MODE", "disabled")  # else Ray writes a token under ~/.ray
        patch.delenv("RAY_ADDRESS", raising=False)
        ray.init(num_cpus=2, num_gpus=1, _temp_dir=temp, include_dashboard=False, log_to_driver=False)
        try:
            yield ray
        finally:
            ray.shutdown()
            shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def local_grid(tmp_path_factory, prepared):
    base = tmp_path_factory.mktemp("local")
    spec = tiny_spec(base / "tiny.yaml", prepared)
    result = invoke("experiment", "run", spec, "--jobs", "2", "--threads", "1", "--out", base / "runs")
    assert result.exit_code == 0, result.output
    return spec, base / "runs"


def report_of(spec: Path, runs: Path) -> str:
    result = invoke("experiment", "report", spec, "--runs", runs, "--resamples", "200")
    assert result.exit_code == 0, result.output
    return result.stdout


def results(spec: Path, runs: Path) -> dict:
    return {c.name: json.loads((c.run_dir / "results.json").read_text())["scores"] for c in load_spec(spec).cells(runs)}


@pytest.mark.slow  # about 40 s on 2 busy cores
def test_a_grid_through_ray_gives_the_local_report(local_grid, ray_cluster, tmp_path):
    spec, local_runs = local_grid
    runs = tmp_path / "runs"
    result = invoke("experiment", "run", spec, "--launcher", "ray", "--cpus-per-cell", "1", "--gpus-per-cell", "0.5",
                    "--out", runs)
    assert result.exit_code == 0, result.output
    assert results(spec, runs) == results(spec, local_runs)  # same cells, same numbers at the same seeds
    assert report_of(spec, runs) == report_of(spec, local_runs)
    record = json.loads((runs / "tiny" / "grid.json").read_text())
    assert record["invocations"][0]["launcher"] == "ray" and record["invocations"][0]["threads"] == 1
    assert "device" not in record["invocations"][0]  # the workers may be other machines
    workers = {entry["worker"] for entry in record["cells"].values()}
    assert len(workers) == 4 and all("ray node" in w and w.endswith("gpu 0") for w in workers)  # a fresh worker each
    assert "4/4 cells finished" in invoke("experiment", "run", spec, "--launcher", "ray", "--out", runs).output


@pytest.mark.slow  # about 40 s on 2 busy cores
def test_a_grid_through_submitits_local_executor_gives_the_local_report(local_grid, tmp_path):
    from cn3.experiment.launchers import SlurmLauncher
    from cn3.experiment.runner import run_spec

    spec, local_runs = local_grid
    runs = tmp_path / "runs"
    loaded = load_spec(spec)
    launcher = SlurmLauncher(tmp_path / "submitit", cpus=1, time=10, cluster="local")
    states = run_spec(loaded, lambda: loaded.cells(runs), jobs=2, threads=1, launcher=launcher)
    assert [s.state for s in states] == ["done"] * 4, [(s.cell.name, s.state) for s in states]
    assert results(spec, runs) == results(spec, local_runs)
    assert report_of(spec, runs) == report_of(spec, local_runs)
    log = (states[0].cell.run_dir / "experiment.log").read_text()
    assert log.startswith("$ cn3 train --task trec --seed 1") and "# worker: " in log


def test_a_cell_whose_worker_was_killed_continues_when_the_grid_is_run_again(ray_cluster, prepared, tmp_path):
    """SIGKILL to the Ray worker training the cell once it has saved a latest.pt: the cell is failed
    (the worker's loss named), and the next run of the grid resumes it to the results of a training
    that was never interrupted."""
    from cn3.experiment.cell import run_cell
    from cn3.experiment.launchers import RayLauncher
    from cn3.experiment.runner import run_grid

    spec_path = tiny_spec(tmp_path / "s.yaml", prepared, seeds=[1], variants={"lstm": {"model.encoder": "lstm"}})
    data = yaml.safe_load(spec_path.read_text())
    data["set"].update({"data.limit": 400, "train.epochs": 5})
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    spec = load_spec(spec_path)
    (cell,) = spec.cells(tmp_path / "runs")
    launcher = RayLauncher(cpus=1)
    first: list = []
    grid = threading.Thread(target=lambda: first.extend(run_grid(spec, [cell], None, 1, launcher=launcher)))
    grid.start()
    deadline = time.time() + 240
    while not (cell.run_dir / "latest.pt").is_file():
        assert grid.is_alive() and time.time() < deadline
        time.sleep(0.05)
    log = (cell.run_dir / "experiment.log").read_text()
    worker = re.search(r"# worker: .* pid (\d+) ray node \w+\n", log)  # no GPU asked for, none shown
    os.kill(int(worker.group(1)), signal.SIGKILL)
    grid.join(120)
    assert not grid.is_alive()
    assert [s.state for s in first] == ["failed"] and not (cell.run_dir / "results.json").exists()
    failed = json.loads((cell.run_dir / "cell.failed").read_text())
    assert failed["exit_code"] is None and "Worker" in failed["error"]

    (again,) = run_grid(spec, [cell], None, 1, launcher=launcher)
    assert again.state == "done" and not (cell.run_dir / "cell.failed").exists()
    assert "--resume" in (cell.run_dir / "experiment.log").read_text()
    straight = dataclasses.replace(cell, run_dir=tmp_path / "straight")
    assert run_cell(straight, 1) == 0
    resumed, uninterrupted = (json.loads((c.run_dir / "results.json").read_text()) for c in (cell, straight))
    assert resumed["scores"] == uninterrupted["scores"] and resumed["steps"] == uninterrupted["steps"]


@pytest.mark.parametrize("launcher, module, extra", [("ray", "ray", "ray"), ("slurm", "submitit", "slurm")])
def test_a_launcher_without_its_extra_names_the_extra(tmp_path, monkeypatch, launcher, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    spec = tiny_spec(tmp_path / "s.yaml", tmp_path / "prepared")
    result = invoke("experiment", "run", spec, "--launcher", launcher, "--out", tmp_path / "runs")
    assert result.exit_code == 1
    assert f"--launcher {launcher} needs {module}" in result.output and f"pip install 'cn3[{extra}]'" in result.output


def test_launcher_options_are_checked_and_shown_in_the_dry_run(tmp_path):
    spec = tiny_spec(tmp_path / "s.yaml", tmp_path / "prepared")
    wrong = invoke("experiment", "run", spec, "--launcher", "ray", "--partition", "gpu", "--dry-run")
    assert wrong.exit_code == 2 and "--partition is for --launcher slurm, not ray" in " ".join(wrong.output.split())
    half = invoke("experiment", "run", spec, "--launcher", "slurm", "--gpus-per-cell", "0.5", "--dry-run")
    assert half.exit_code == 2 and "whole CPUs and GPUs" in " ".join(half.output.split())
    # the dry run connects to nothing: no srun here, no Ray started
    dry = invoke("experiment", "run", spec, "--launcher", "slurm", "--partition", "gpu", "--gpus-per-cell", "1",
                 "--cpus-per-cell", "4", "--time", "90", "--slurm-option", "account=proj", "--dry-run",
                 "--out", tmp_path / "runs")
    assert dry.exit_code == 0, dry.output
    text = " ".join(dry.output.split())
    assert "Slurm jobs on partition gpu: 4 CPU, 1 GPU, 90 min and 4 thread(s) each" in text
    assert "train.num_threads=4" in text
