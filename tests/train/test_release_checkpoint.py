"""A run that cn3 0.3.0 wrote (``tests/train/release_run``, made by its ``make.py`` with that
release's code) is used by this one as it is: both checkpoints load with ``weights_only``, give the
logits the release computed, and ``latest.pt`` resumes to the weights of a straight run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from cn3.kinds import train
from cn3.runs.layout import RunDir
from cn3.sentence.inference import load_model
from cn3.train.checkpoint import Checkpoint
from cn3.util.errors import RunError
from tests.train.release_run.make import STEPS, STEPS_BEFORE, config, dev_logits, prepare_data

RELEASE_RUN = Path(__file__).parent / "release_run" / "run"

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """The release's run copied into a fresh directory with its data prepared beside it (the run's
    config names ``prepared/questions`` relative to where it was trained)."""
    monkeypatch.chdir(tmp_path)
    shutil.copytree(RELEASE_RUN, tmp_path / "run")
    return tmp_path, prepare_data(tmp_path)


def test_the_release_checkpoints_load_with_every_field(workdir):
    root, _ = workdir
    for name in ("best.pt", "latest.pt"):
        assert torch.serialization.get_unsafe_globals_in_checkpoint(root / "run" / name) == []
        ckpt = Checkpoint.load(root / "run" / name)
        assert ckpt.kind == "cn3-sentence" and ckpt.cn3_version == "0.3.0"
        assert ckpt.state["step"] == STEPS_BEFORE and ckpt.state["best_written"]
        assert set(ckpt.payload) == {"vocab", "manifest"} and ckpt.config["data"]["task"] == "custom"
    best, latest = (Checkpoint.load(root / "run" / name) for name in ("best.pt", "latest.pt"))
    assert best.optimizer is None and best.rng is None and best.raw_model is None and best.ema_updates is None
    assert latest.ema_updates == STEPS_BEFORE and set(latest.raw_model) == set(latest.model)
    assert latest.optimizer["state"] and latest.rng["torch"].dtype == torch.uint8


def test_the_release_checkpoints_score_as_the_release_did(workdir):
    """Both checkpoints' ``model`` (the weight average under ``train.ema``) give the release's dev logits."""
    root, prepared = workdir
    expected = json.loads((RELEASE_RUN / "dev_logits.json").read_text(encoding="utf-8"))
    for which in ("best", "latest"):
        torch.testing.assert_close(torch.tensor(dev_logits(root / "run", prepared, which)),
                                   torch.tensor(expected[which]))
    loaded = load_model(RunDir(root / "run"), torch.device("cpu"))
    assert loaded.manifest["task"] == "custom" and loaded.vocabs["labels"].itos == ["DESC", "HUM", "LOC", "NUM"]


def latest(run: Path) -> Checkpoint:
    return Checkpoint.load(run / "latest.pt")


def test_the_release_latest_resumes_as_a_straight_run(workdir):
    """``--resume`` from the release's ``latest.pt`` (step 2) to step 4 ends where a run of this release
    trained straight to step 4 ends: weights, weight average, optimizer state and counters. (Within
    float tolerance: the release computed its two steps with its own kernels, perhaps on another CPU.)"""
    root, prepared = workdir
    more = [f"train.max_steps={STEPS}", "train.epochs=2"]
    train(config(prepared, *more), Path("run"), resume=True, device_name="cpu")
    train(config(prepared, *more), Path("straight"), device_name="cpu")
    resumed, straight = latest(root / "run"), latest(root / "straight")
    for key in ("step", "epoch", "batch_in_epoch", "best_step", "bad_evals", "eval_due", "best_written"):
        assert resumed.state[key] == straight.state[key], key
    assert resumed.state["step"] == STEPS and resumed.ema_updates == straight.ema_updates == STEPS
    torch.testing.assert_close(resumed.model, straight.model)
    torch.testing.assert_close(resumed.raw_model, straight.raw_model)
    torch.testing.assert_close(resumed.optimizer["state"], straight.optimizer["state"])


def test_a_release_checkpoint_rewritten_by_this_release_resumes_bit_for_bit_alike(workdir):
    """Reading the release's ``latest.pt`` and writing it back in this release's form changes nothing
    that resuming reads: both resume to identical weights."""
    root, prepared = workdir
    shutil.copytree(root / "run", root / "rewritten")
    Checkpoint.load(root / "run" / "latest.pt").write(root / "rewritten" / "latest.pt")
    more = [f"train.max_steps={STEPS}", "train.epochs=2"]
    for name in ("run", "rewritten"):
        train(config(prepared, *more), Path(name), resume=True, device_name="cpu")
    a, b = latest(root / "run"), latest(root / "rewritten")
    assert a.state == b.state | {"seconds": a.state["seconds"]}
    for key in a.model:
        assert torch.equal(a.model[key], b.model[key]) and torch.equal(a.raw_model[key], b.raw_model[key]), key


def test_this_release_writes_the_release_keys(workdir):
    """A checkpoint written now has every key the release's had; ``best.pt`` adds ``raw_model`` and
    ``ema_updates`` as ``None`` (every field is written, in ``latest.pt`` only with a value)."""
    root, prepared = workdir
    train(config(prepared, f"train.max_steps={STEPS}", "train.epochs=2"), Path("new"), device_name="cpu")
    for name, added in (("latest.pt", set()), ("best.pt", {"raw_model", "ema_updates"})):
        old, new = (torch.load(run / name, weights_only=True) for run in (RELEASE_RUN, root / "new"))
        assert set(new) == set(old) | added, name
        assert all(new[key] is None for key in added)
        assert set(new["state"]) == set(old["state"]) and set(new["manifest"]) == set(old["manifest"])


def test_a_state_older_than_best_written_takes_it_from_the_run_directory(tmp_path):
    """Checkpoints written before ``TrainState.best_written`` existed: the run has a best checkpoint
    when its ``best.pt`` is there."""
    saved = torch.load(RELEASE_RUN / "latest.pt", weights_only=True)
    del saved["state"]["best_written"]
    assert Checkpoint.from_dict(dict(saved), tmp_path / "latest.pt").state["best_written"] is False
    shutil.copy(RELEASE_RUN / "best.pt", tmp_path / "best.pt")
    assert Checkpoint.from_dict(dict(saved), tmp_path / "latest.pt").state["best_written"] is True


def test_a_checkpoint_round_trips_and_names_what_it_cannot_hold(tmp_path):
    ckpt = Checkpoint.load(RELEASE_RUN / "latest.pt")
    ckpt.write(tmp_path / "latest.pt")
    back = Checkpoint.load(tmp_path / "latest.pt")
    assert back.payload.keys() == ckpt.payload.keys() and back.state == ckpt.state and back.kind == ckpt.kind
    assert all(torch.equal(back.raw_model[k], ckpt.raw_model[k]) for k in ckpt.raw_model)
    with pytest.raises(ValueError, match=r"payload cannot use the names of its fields: \['state'\]"):
        Checkpoint(**{**vars(ckpt), "payload": {"state": 1}}).to_dict()
    torch.save({"weights": torch.ones(1)}, tmp_path / "other.pt")
    with pytest.raises(RunError, match="other.pt is not a cn3 checkpoint"):
        Checkpoint.load(tmp_path / "other.pt")
