"""Checkpoints hold plain data only and resume on any device: ``weights_only=True`` loading, RNG
states read back as CPU byte tensors (a GPU run's resume), runs of earlier releases converted by
``cn3 checkpoint upgrade``, pickled objects refused."""

from __future__ import annotations

import os
import random
import shutil
import signal
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import cn3
import cn3.runs.layout
import cn3.sentence.inference
import cn3.sentence.task
from cli.main import app
from cn3.kinds import train
from cn3.nmt.config import resolve_nmt_config
from cn3.nmt.data import absolutize
from cn3.sentence.resolve import resolve_config
from cn3.train.checkpoint import Checkpoint
from cn3.train.checkpoints import load_checkpoint
from cn3.train.config import LoopConfig
from cn3.train.runtime import rng_state, set_rng_state
from cn3.train.trainer import Trainer
from cn3.util.errors import RunError
from data_prep.prepare import PrepareSettings, prepare
from tests.nmt.test_nmt_cli import TINY as NMT_TINY
from tests.nmt.test_nmt_cli import assert_clean_error, corpus
from tests.train.test_trainer import TINY

pytestmark = pytest.mark.usefixtures("one_thread")
runner = CliRunner()
COMMON = [*TINY, "train.num_threads=1", "data.limit=200", "train.epochs=2", "train.batch_size=16", "train.ema=0.9"]


@pytest.fixture(scope="module")
def trec(tmp_path_factory, data_root):
    out = tmp_path_factory.mktemp("prepared") / "trec"
    prepare(PrepareSettings(task="trec", data=data_root, out=out, annotator="none"))
    return out


def train_trec(trec, run_dir, *overrides, resume=False):
    return train(resolve_config("trec", None, {"data.prepared": trec}, [*COMMON, *overrides]), run_dir,
                 resume=resume, device_name="cpu")


@pytest.fixture(scope="module")
def straight(trec, tmp_path_factory):
    """An uninterrupted run of two epochs (13 batches each)."""
    run_dir = tmp_path_factory.mktemp("straight") / "run"
    train_trec(trec, run_dir)
    return run_dir


def draws() -> tuple:
    return random.random(), float(np.random.rand()), float(torch.rand(()))


def test_rng_state_is_plain_and_restores_every_stream():
    state = rng_state()
    expected = draws()
    draws()
    set_rng_state(state)
    assert draws() == expected
    plain = (torch.Tensor, int, float, str, type(None))
    leaves = torch.utils._pytree.tree_leaves(state)
    assert all(isinstance(leaf, plain) for leaf in leaves), {type(leaf) for leaf in leaves}


def test_a_cuda_run_resumes_with_its_rng_states_as_cpu_bytes(straight, tmp_path, monkeypatch):
    """A checkpoint with CUDA RNG states resumes a model that lives on another device (``meta``
    stands in for CUDA): the states come back as CPU byte tensors, which ``set_rng_state`` takes.
    (cn3 0.3.0 loaded them with ``map_location`` the model's device and failed there.)"""
    cuda_states = [torch.randint(0, 256, (16,), dtype=torch.uint8) for _ in range(2)]
    restored = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)  # this machine has fewer GPUs than the saving one
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [s.clone() for s in cuda_states])
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", restored.extend)
    ckpt = torch.load(straight / "latest.pt", weights_only=True)
    ckpt["rng"] = rng_state()
    expected = draws()
    torch.save(ckpt, tmp_path / "latest.pt")

    model = cn3.sentence.inference.load_model(cn3.runs.layout.RunDir(straight), torch.device("cpu"),
                                              which="latest").model.to("meta")
    task = SimpleNamespace(model=model, optimizer=torch.optim.Adadelta(model.parameters()), scaler=None,
                           ema_decay=0.9)
    trainer = Trainer(task, LoopConfig(), cn3.runs.layout.RunDir(tmp_path), {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # copying into meta parameters is a no-op, and says so
        trainer.restore(Checkpoint.load(tmp_path / "latest.pt"))
    assert trainer.state.step == ckpt["state"]["step"] and draws() == expected
    assert trainer.average.updates == ckpt["ema_updates"]
    assert len(restored) == 1 and restored[0].device.type == "cpu" and restored[0].dtype == torch.uint8
    assert torch.equal(restored[0], cuda_states[0])
    assert next(iter(task.optimizer.state.values()))["square_avg"].device.type == "meta"


def test_sentence_and_translation_checkpoints_load_with_weights_only(straight, tmp_path):
    src, tgt = corpus(tmp_path, "train", 60, seed=3)
    cfg = resolve_nmt_config(None, {"model.encoder": "transformer", "data.corpus": "files", "data.train_src": src,
                                    "data.train_tgt": tgt},
                             [*NMT_TINY, "train.final_splits=[]", "train.epochs=1", "train.num_threads=1"])
    absolutize(cfg)
    train(cfg, tmp_path / "nmt", device_name="cpu")
    for path in (straight / "best.pt", straight / "latest.pt", tmp_path / "nmt" / "best.pt",
                 tmp_path / "nmt" / "latest.pt"):
        assert torch.serialization.get_unsafe_globals_in_checkpoint(path) == [], path
        assert isinstance(torch.load(path, weights_only=True)["model"], dict)


def as_written_by_0_3_0(path) -> None:
    """Rewrite a ``latest.pt`` as cn3 0.3.0 wrote it: Python's and NumPy's RNG states as their
    ``getstate`` tuples (NumPy's key as an ndarray, which needs NumPy's unpickler)."""
    ckpt = torch.load(path, weights_only=True)
    version, words, gauss = ckpt["rng"]["python"]
    n = ckpt["rng"]["numpy"]
    ckpt["rng"]["python"] = (version, tuple(words.tolist()), gauss)
    ckpt["rng"]["numpy"] = (n["bit_generator"], n["key"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                            n["gauss"])
    torch.save(ckpt, path)


def test_an_earlier_release_run_is_refused_then_upgraded_and_resumes_exactly(trec, straight, tmp_path):
    run_dir = tmp_path / "old"
    train_trec(trec, run_dir, "train.max_steps=18")  # stops in epoch 2
    as_written_by_0_3_0(run_dir / "latest.pt")
    with pytest.raises(RunError, match=f"`cn3 checkpoint upgrade {run_dir}`"):
        train_trec(trec, run_dir, resume=True)
    result = runner.invoke(app, ["checkpoint", "upgrade", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert f"upgraded: {run_dir / 'latest.pt'}" in result.output and "already plain" in result.output
    assert torch.serialization.get_unsafe_globals_in_checkpoint(run_dir / "latest.pt") == []
    train_trec(trec, run_dir, resume=True)
    a, b = (load_checkpoint(r / "latest.pt") for r in (straight, run_dir))
    assert a["state"]["step"] == b["state"]["step"] == 26
    for key in ("model", "raw_model"):
        for name, value in a[key].items():
            assert torch.equal(value, b[key][name]), (key, name)


class RunsACommand:
    """What a tampered checkpoint may carry: unpickling it runs a shell command."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def test_a_checkpoint_carrying_a_pickled_object_is_refused(straight, tmp_path):
    run_dir = tmp_path / "shared"
    shutil.copytree(straight, run_dir)
    marker = tmp_path / "ran"
    ckpt = torch.load(run_dir / "best.pt", weights_only=True)
    ckpt["extra"] = RunsACommand(f"touch {marker}")
    torch.save(ckpt, run_dir / "best.pt")
    for args in (["predict", run_dir, "Who wrote Hamlet ?", "--device", "cpu"], ["checkpoint", "upgrade", run_dir]):
        result = runner.invoke(app, [str(a) for a in args])
        assert_clean_error(result, "refusing to open", "posix.system", "--trust")
        assert not marker.exists()
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "best.pt").write_bytes(b"not a checkpoint")
    assert_clean_error(runner.invoke(app, ["predict", str(garbage), "Who ?", "--device", "cpu"]),
                       "is not a readable checkpoint")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: torch.cuda.is_available() is False "
                    "(test_a_cuda_run_resumes_with_its_rng_states_as_cpu_bytes simulates it)")
def test_resume_on_cuda_ends_where_the_uninterrupted_run_ends(trec, tmp_path):
    """On the GPU, under deterministic algorithms: bit for bit, CUDA RNG streams (dropout) included."""
    common = ["train.deterministic=true", "train.loader_workers=0"]
    runs = {}
    for name, stop in (("straight", None), ("resumed", 18)):
        cfg = resolve_config("trec", None, {"data.prepared": trec},
                             [*COMMON, *common, *([f"train.max_steps={stop}"] if stop else [])])
        train(cfg, tmp_path / name, device_name="cuda")
        if stop:
            cfg = resolve_config("trec", None, {"data.prepared": trec}, [*COMMON, *common])
            train(cfg, tmp_path / name, resume=True, device_name="cuda")
        runs[name] = load_checkpoint(tmp_path / name / "latest.pt")
    a, b = runs["straight"], runs["resumed"]
    assert a["state"]["step"] == b["state"]["step"] == 26 and a["rng"]["cuda"] is not None
    for name, value in a["model"].items():
        assert torch.equal(value, b["model"][name]), name


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_an_update_waits_for_it_and_resume_is_exact(trec, straight, tmp_path, monkeypatch, signum):
    """SIGTERM (a scheduler, ``cn3 experiment run``) or Ctrl-C arriving after update 6's forward and
    backward, before its optimizer step: the update completes first, so ``latest.pt`` holds step 6
    whole (cn3 0.3.0 saved step 5's counters with update 6's dropout drawn, and the resumed run
    went elsewhere)."""
    real, calls = cn3.sentence.task.SentenceTask.forward_backward, []
    # what the loop must restore: the default, or SIG_IGN where pytest itself was started in the
    # background by a non-interactive shell (`cmd &` ignores SIGINT), as some CI runners start it
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)

    def train_step(self, *args, **kwargs):
        loss = real(self, *args, **kwargs)
        calls.append(1)
        if len(calls) == 6:
            os.kill(os.getpid(), signum)
        return loss

    monkeypatch.setattr(cn3.sentence.task.SentenceTask, "forward_backward", train_step)
    with pytest.raises(KeyboardInterrupt):
        train_trec(trec, tmp_path / "cut")
    assert load_checkpoint(tmp_path / "cut" / "latest.pt")["state"]["step"] == 6
    monkeypatch.setattr(cn3.sentence.task.SentenceTask, "forward_backward", real)
    train_trec(trec, tmp_path / "cut", resume=True)
    a, b = (load_checkpoint(r / "latest.pt") for r in (straight, tmp_path / "cut"))
    for key in ("model", "raw_model"):
        assert all(torch.equal(value, b[key][name]) for name, value in a[key].items()), key
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before  # the loop's handlers are gone


def test_a_numpy_scalar_in_the_training_state_still_gives_a_plain_checkpoint(tmp_path):
    """seqeval's span F1 is a numpy scalar: a best score of that type once made best.pt unloadable
    with weights_only=True (cn3 predict refused a CoNLL-2000 run it had just trained)."""
    import numpy as np

    from cn3.train.checkpoints import load_checkpoint, plain_checkpoint
    from cn3.util.atomic import atomic_torch_save

    path = tmp_path / "best.pt"
    atomic_torch_save(path, plain_checkpoint({"state": {"best_score": np.float64(75.0)}, "w": torch.ones(2)},
                                             path.name))
    back = load_checkpoint(path)
    assert back["state"]["best_score"] == 75.0 and type(back["state"]["best_score"]) is float
    with pytest.raises(RunError, match=r"best.pt\['x'\] is a builtins.object, which a checkpoint cannot hold"):
        plain_checkpoint({"x": object()}, path.name)
