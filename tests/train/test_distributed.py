"""Multi-process training (``cn3.train.distributed``): gloo on CPU with 2 processes.

* the gradient arithmetic against one process, in spawned workers: after every update the ranks
  hold identical parameters, equal (within float tolerance) to one process's update on the whole
  batch, an odd-sized batch and a batch smaller than the world included;
* ``torchrun -m cli train`` end to end: the same model as one process (dropout off, the only
  difference being float rounding), only rank 0 writes, a rank killed mid-run resumes to the
  uninterrupted result bit for bit, and a resume with another process count is a clean error;
* ``torchrun -m cli nmt train``: the same model as one process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from cn3.train.distributed import World, step_seed

# slow: torchrun processes training real runs (`pytest -m "not slow"` is the quick loop)
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "cli"]
SINGLE = [sys.executable, "-m", "cli"]
TINY = ["model.hidden=16", "model.energy_dim=8", "model.mlp_hidden=16", "model.char=none", "model.pos_dim=0",
        "model.spell_dim=0", "model.dropout=0.0", "data.limit=300", "data.embeddings=null", "train.num_threads=1"]


def sets(*pairs: str) -> list[str]:
    return [x for p in pairs for x in ("--set", p)]


# ----------------------------------------------------------------------------- the arithmetic


def test_share_is_a_strided_slice_and_pads_short_batches():
    assert World(0, 2).share([5, 6, 7, 8, 9]) == ([5, 7, 9], True)
    assert World(1, 2).share([5, 6, 7, 8, 9]) == ([6, 8], True)
    assert World(1, 2).share([5]) == ([5], False)  # nothing left: the first item, weight 0
    assert World(0, 1).share([5, 6]) == ([5, 6], True)


def test_step_seeds_differ_per_rank_and_step():
    seeds = {step_seed(1, r, s) for r in range(4) for s in range(1, 1000)}
    assert len(seeds) == 4 * 999


BATCHES = [list(range(0, 8)), list(range(8, 15)), [15]]  # even, odd, smaller than the world


def _make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def _data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(16, 6, generator=g), torch.randint(0, 3, (16,), generator=g)


def _worker(rank: int, size: int, init_file: str, out_file: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=size)
    world = World(rank, size)
    x, y = _data()
    model, reference = _make_model(), _make_model()
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    ref_opt = torch.optim.Adam(reference.parameters(), lr=0.05)
    report = []
    for batch in BATCHES:
        own, real = world.share(batch)
        weight = size * len(own) / len(batch) if real else 0.0  # as the Trainer weighs a rank's share
        opt.zero_grad()
        (torch.nn.functional.cross_entropy(model(x[own]), y[own]) * weight).backward()
        world.average_gradients(model)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        ref_opt.zero_grad()  # one process, the whole batch
        torch.nn.functional.cross_entropy(reference(x[batch]), y[batch]).backward()
        torch.nn.utils.clip_grad_norm_(reference.parameters(), 1.0)
        ref_opt.step()
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        gathered = [torch.empty_like(flat) for _ in range(size)]
        dist.all_gather(gathered, flat)
        ref = torch.cat([p.detach().flatten() for p in reference.parameters()])
        report.append((all(torch.equal(gathered[0], g) for g in gathered),
                       float((flat - ref).abs().max())))
    if rank == 0:
        torch.save(report, out_file)
    # both ranks reach the teardown together: a rank whose peer had already closed its gloo pairs was
    # once seen to abort there ("terminate called without an active exception", 2 loaded cores)
    dist.barrier()
    dist.destroy_process_group()


def test_ranks_agree_and_match_one_process(tmp_path):
    out = tmp_path / "report.pt"
    mp.spawn(_worker, args=(2, str(tmp_path / "init"), str(out)), nprocs=2, join=True)
    report = torch.load(out)
    assert len(report) == len(BATCHES)
    for identical, gap in report:
        assert identical  # the ranks hold the same parameters after every update
        assert gap < 1e-6  # and the update equals one process's on the whole batch


# ----------------------------------------------------------------------------- torchrun end to end


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, **kwargs)


def weights(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=False)["model"]


@pytest.fixture(scope="module")
def trec_runs(tmp_path_factory, data_root):
    """One tiny TREC run in one process and the same run under torchrun with 2 processes."""
    root = tmp_path_factory.mktemp("ddp")
    common = ["train", "--task", "trec", "--device", "cpu",
              *sets(*TINY, f"data.prepared={root / 'prep'}", "train.epochs=6")]
    one = run([*SINGLE, *common, "--run-dir", str(root / "one")])
    assert one.returncode == 0, one.stderr[-3000:]
    two = run([*TORCHRUN, *common, "--run-dir", str(root / "two")])
    assert two.returncode == 0, two.stderr[-3000:]
    return root, common, two


def test_torchrun_trains_the_single_process_model(trec_runs):
    root, _, _ = trec_runs
    a, b = weights(root / "one" / "best.pt"), weights(root / "two" / "best.pt")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], rtol=1e-4, atol=1e-5), k
    import json

    ra, rb = (json.loads((root / r / "results.json").read_text()) for r in ("one", "two"))
    assert ra["scores"]["test"]["score"] == rb["scores"]["test"]["score"]
    assert rb["processes"] == 2 and ra["processes"] == 1


def test_only_rank_zero_writes(trec_runs):
    root, _, two = trec_runs
    files = lambda d: sorted(str(p.relative_to(d)) for p in d.rglob("*"))  # noqa: E731
    assert files(root / "two") == files(root / "one")
    log = (root / "two" / "log.txt").read_text()
    assert log.count("training cn3 on trec") == 1 and "2 processes" in log
    assert len((root / "two" / "metrics.jsonl").read_text().splitlines()) == 6  # one record per epoch
    assert two.stderr.count("dev accuracy") == 6  # rank 1 printed nothing


def test_a_killed_rank_resumes_to_the_uninterrupted_run(trec_runs):
    root, common, _ = trec_runs
    run_dir = root / "killed"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    job = subprocess.Popen([*TORCHRUN, *common, "--run-dir", str(run_dir), *sets("train.checkpoint_every=1")],
                           cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    metrics, deadline = run_dir / "metrics.jsonl", time.monotonic() + 300
    while time.monotonic() < deadline and job.poll() is None:
        if metrics.is_file() and len(metrics.read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    assert job.poll() is None, "the run ended before it could be killed"
    rank1 = [pid for pid in _children(job.pid) if "RANK=1" in _environ(pid)]
    assert len(rank1) == 1
    os.kill(rank1[0], signal.SIGKILL)
    _, err = job.communicate(timeout=120)
    assert job.returncode != 0, err[-2000:]
    assert (run_dir / "latest.pt").is_file()
    step = torch.load(run_dir / "latest.pt", weights_only=False)["state"]["step"]
    assert 0 < step < 60  # mid-run: 6 epochs of 10 updates

    resumed = run([*TORCHRUN, *common, "--run-dir", str(run_dir), *sets("train.checkpoint_every=1"), "--resume"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    a, b = weights(run_dir / "latest.pt"), weights(root / "two" / "latest.pt")
    assert all(torch.equal(a[k], b[k]) for k in a)

    again = run([*SINGLE, *common, "--run-dir", str(run_dir), "--resume", *sets("train.epochs=7")])
    assert again.returncode == 1
    assert "trained by 2 process(es), this is 1" in again.stderr and "Traceback" not in again.stderr


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]


def _environ(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").replace("\0", "\n")
    except OSError:
        return ""


def test_torchrun_translation_matches_one_process(tmp_path):
    from tests.nmt.test_nmt_cli import TINY as NMT_TINY
    from tests.nmt.test_nmt_cli import corpus

    src, tgt = corpus(tmp_path, "train", 200, seed=1)
    args = ["nmt", "train", "--encoder", "transformer", "--src", str(src), "--tgt", str(tgt), "--device", "cpu",
            *sets(*NMT_TINY, "model.dropout=0.0", "model.attention_dropout=0.0", "train.label_smoothing=0.0",
                  "train.num_threads=1", "train.final_splits=[]")]
    one = run([*SINGLE, *args, "--run-dir", str(tmp_path / "one")])
    assert one.returncode == 0, one.stderr[-3000:]
    two = run([*TORCHRUN, *args, "--run-dir", str(tmp_path / "two")])
    assert two.returncode == 0, two.stderr[-3000:]
    a, b = weights(tmp_path / "one" / "latest.pt"), weights(tmp_path / "two" / "latest.pt")
    # A key bias shifts every energy of a query by the same amount: its true gradient is 0, and Adam
    # turns the float noise that stands in for it into full-size steps of either sign.
    compared = [k for k in a if not k.endswith("k_proj.bias")]
    assert len(compared) > 0.9 * len(a)
    for k in compared:
        assert torch.allclose(a[k], b[k], rtol=1e-4, atol=1e-5), k
