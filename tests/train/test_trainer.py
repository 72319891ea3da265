"""Training end to end on real data: thresholds per task level, exact resume, run directory."""

from __future__ import annotations

import json

import pytest
import torch

from cn3.config import ConfigError
from cn3.kinds import train
from cn3.runs.layout import RunDir
from cn3.sentence.inference import load_model
from cn3.sentence.resolve import resolve_config
from cn3.train.trainer import Trainer
from cn3.util.errors import RunError
from data_prep.prepare import PrepareSettings, prepare

real_fit = Trainer.fit

# slow: real trainings, resume replays (`pytest -m "not slow"` is the quick loop)
pytestmark = pytest.mark.slow

GLOVE = "glove/glove.6B.50d.top100k.txt.gz"
# one torch thread: these models are small, and two threads on a shared machine stalled each other in
# OpenMP's barriers (a resume test took 108 s with two, 4 s with one, on the same loaded 2-core machine)
TINY = ["model.hidden=32", "model.energy_dim=16", "model.mlp_hidden=32", "model.char=none", "model.pos_dim=0",
        "model.spell_dim=0", "train.num_threads=1"]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, data_root):
    base = tmp_path_factory.mktemp("prepared")

    def get(task: str, annotator: str, embeddings: bool = True):
        out = base / f"{task}-{annotator}"
        prepare(PrepareSettings(task=task, data=data_root, out=out, annotator=annotator,
                                embeddings=data_root / GLOVE if embeddings else None))
        return out

    return get


def run(task, prepared_dir, run_dir, overrides, resume=False):
    cfg = resolve_config(task, None, {"data.prepared": prepared_dir}, TINY + overrides)
    return train(cfg, run_dir, resume=resume, device_name="cpu")


def test_trec_learns(prepared, tmp_path):
    # 3,000 questions x 4 epochs with Adam: test 86.8 (2026-11-29); the shipped Adadelta needs 6 full epochs
    # for less, which cost a quarter of the default test run
    results = run("trec", prepared("trec", "none"), tmp_path / "run",
                  ["data.limit=3000", "train.epochs=4", "train.optimizer=adam", "train.lr=0.003", "model.hidden=64",
                   "model.dropout=0.2"])
    assert results["scores"]["test"]["score"] > 80.0, results
    assert results["scores"]["dev"]["metric"] == "accuracy"
    files = {p.name for p in (tmp_path / "run").iterdir()}
    assert {"config.yaml", "vocab.json", "log.txt", "metrics.jsonl", "best.pt", "latest.pt", "results.json"} <= files
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["epoch"] for m in metrics] == [1, 2, 3, 4]
    ckpt = torch.load(tmp_path / "run" / "best.pt", weights_only=False)
    assert {"config", "model_args", "model", "optimizer", "rng", "state", "vocab", "manifest"} <= set(ckpt)


def test_ud_pos_tagging_learns(prepared, tmp_path):
    results = run("ud_pos", prepared("ud_pos", "gold"), tmp_path / "run",
                  ["data.limit=1000", "train.epochs=2", "train.lr=0.01", "model.dropout=0.2",
                   "model.edge_attrs=true"])
    assert results["scores"]["dev"]["metric"] == "token_accuracy"
    assert results["scores"]["dev"]["score"] > 85.0, results


def test_snli_pairs_learn(prepared, tmp_path):
    results = run("snli", prepared("snli", "none"), tmp_path / "run", ["data.limit=3000", "train.epochs=2",
                                                                        "train.optimizer=adam", "train.lr=0.002"])
    assert results["scores"]["dev"]["score"] > 40.0, results  # 3 classes: chance is 33%


@pytest.mark.parametrize("ema, adversarial, precision", [(0.0, 0.0, "fp32"), (0.9, 0.0, "fp32"), (0.0, 0.05, "fp32"),
                                                         (0.0, 0.0, "bf16"), (0.0, 0.05, "fp16")])
def test_resume_reproduces_an_uninterrupted_run(prepared, tmp_path, monkeypatch, ema, adversarial, precision):
    data = prepared("trec", "none", embeddings=False)
    common = ["data.limit=400", "train.epochs=2", "train.batch_size=16", "train.evals_per_epoch=2", f"train.ema={ema}",
              f"train.adversarial={adversarial}", f"train.precision={precision}"]
    if precision == "fp16":  # the loss scaler's path on CPU: a CNN context (oneDNN has no float16 LSTM)
        monkeypatch.setattr("cn3.train.runtime.FP16_DEVICE_TYPES", {"cuda", "cpu"})
        common.append("model.context=cnn")
    straight = run("trec", data, tmp_path / "a", common)
    run("trec", data, tmp_path / "b", common + ["train.max_steps=19"])  # stops mid-epoch 1 (25 batches)
    with pytest.raises(RunError, match="--resume"):
        run("trec", data, tmp_path / "b", common)
    resumed = run("trec", data, tmp_path / "b", common, resume=True)
    assert resumed["scores"] == straight["scores"]
    a = torch.load(tmp_path / "a" / "latest.pt", weights_only=False)
    b = torch.load(tmp_path / "b" / "latest.pt", weights_only=False)
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert (a["raw_model"] is None) == (ema == 0.0) and a["ema_updates"] == b["ema_updates"]
    assert (a["scaler"] is None) == (precision != "fp16")  # fp16's loss scale resumes with the run
    if precision == "fp16":
        assert a["scaler"] == b["scaler"]
    if ema:
        assert all(torch.equal(a["raw_model"][k], b["raw_model"][k]) for k in a["raw_model"])


def test_resume_with_the_step_compiled_reproduces_an_uninterrupted_run(prepared, tmp_path):
    """``train.compile=on`` on the CPU (dropout drawn by inductor's kernels from seeds drawn from torch's
    generator, which the checkpoint restores): interrupted and resumed equals straight through, bit for
    bit, on one thread. (With two threads the weights came out apart in the last bits, the scores equal:
    inductor's parallel CPU reductions; docs/benchmarks.md, "The compiled step".)"""
    data = prepared("trec", "none", embeddings=False)
    common = ["data.limit=200", "data.max_len=8", "train.epochs=2", "train.batch_size=16", "train.evals_per_epoch=2",
              "model.dropout=0.3", "train.compile=on", "train.num_threads=1"]
    straight = run("trec", data, tmp_path / "a", common)
    run("trec", data, tmp_path / "b", common + ["train.max_steps=9"])  # stops mid-epoch 1 (13 batches)
    resumed = run("trec", data, tmp_path / "b", common, resume=True)
    assert resumed["scores"] == straight["scores"]
    a = torch.load(tmp_path / "a" / "latest.pt", weights_only=False)
    b = torch.load(tmp_path / "b" / "latest.pt", weights_only=False)
    diff = max(float((a["model"][k] - b["model"][k]).abs().max()) for k in a["model"])
    assert diff == 0.0, diff
    assert "step compiled" in (tmp_path / "b" / "log.txt").read_text()
    assert "compile: true" in (tmp_path / "a" / "config.yaml").read_text()


def test_loader_workers_change_nothing_that_is_computed(prepared, tmp_path):
    """Batches collated in a loader worker process are those collated in the training process, and
    ``train.loader_workers`` may change at ``--resume``: a run stopped mid-epoch and resumed with a
    worker ends with the weights of an uninterrupted run without one, bit for bit."""
    data = prepared("trec", "none", embeddings=False)
    common = ["data.limit=200", "train.epochs=2", "train.batch_size=16"]
    run("trec", data, tmp_path / "a", common)
    run("trec", data, tmp_path / "b", common + ["train.max_steps=5"])  # epoch 1 has 13 batches
    run("trec", data, tmp_path / "b", common + ["train.loader_workers=1"], resume=True)
    a, b = (torch.load(tmp_path / r / "latest.pt", weights_only=False) for r in ("a", "b"))
    assert a["state"]["step"] == b["state"]["step"] == 26
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def test_deterministic_algorithms_are_scoped_to_the_run(prepared, tmp_path, monkeypatch):
    """``train.deterministic`` turns torch's deterministic algorithms on for the loop only (CPU kernels
    are deterministic already: the same weights as without it) and leaves the process as it was."""
    seen = []
    monkeypatch.setattr(Trainer, "fit", lambda self: seen.append(torch.are_deterministic_algorithms_enabled())
                        or real_fit(self))
    data = prepared("trec", "none", embeddings=False)
    common = ["data.limit=100", "train.epochs=1", "train.batch_size=16"]
    run("trec", data, tmp_path / "a", common)
    run("trec", data, tmp_path / "b", common + ["train.deterministic=true"])
    assert seen == [False, True] and not torch.are_deterministic_algorithms_enabled()
    a, b = (torch.load(tmp_path / r / "latest.pt", weights_only=False)["model"] for r in ("a", "b"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_fp16_on_cpu_is_refused_with_the_way_out(prepared, tmp_path):
    with pytest.raises(ConfigError, match="fp16 needs a CUDA device.*use train.precision=bf16"):
        run("trec", prepared("trec", "none", embeddings=False), tmp_path / "r", ["train.precision=fp16"])


def test_bf16_trains_in_bfloat16_and_keeps_fp32_weights(prepared, tmp_path):
    """``train.precision=bf16`` runs the forward pass under autocast (the weights move differently
    from an fp32 run's) while weights and optimizer state stay fp32; a tagging run's CRF reads fp32
    emissions."""
    data = prepared("trec", "none", embeddings=False)
    common = ["data.limit=200", "train.epochs=1", "train.batch_size=16"]
    runs = {p: run("trec", data, tmp_path / p, common + [f"train.precision={p}"]) for p in ("fp32", "bf16")}
    a, b = (torch.load(tmp_path / p / "latest.pt", weights_only=False)["model"] for p in ("fp32", "bf16"))
    assert all(v.dtype == torch.float32 for v in b.values() if v.is_floating_point())
    assert not all(torch.equal(a[k], b[k]) for k in a)
    assert runs["bf16"]["scores"]["dev"]["score"] > 0
    tagged = run("ud_pos", prepared("ud_pos", "gold"), tmp_path / "tag",
                 ["data.limit=200", "train.epochs=1", "train.lr=0.01", "train.precision=bf16"])
    assert tagged["scores"]["dev"]["score"] > 30.0, tagged  # 17 tags: the CRF learned in bf16


def test_ema_weights_are_scored_and_kept_in_best(prepared, tmp_path):
    data = prepared("trec", "none", embeddings=False)
    run("trec", data, tmp_path / "r", ["data.limit=200", "train.epochs=1", "train.ema=0.9"])  # one evaluation
    latest = torch.load(tmp_path / "r" / "latest.pt", weights_only=False)
    best = torch.load(tmp_path / "r" / "best.pt", weights_only=False)["model"]
    assert latest["ema_updates"] == latest["state"]["step"]
    assert all(torch.equal(best[k], latest["model"][k]) for k in best)  # both hold the average
    assert not all(torch.equal(best[k], latest["raw_model"][k]) for k in best)  # not the raw weights
    (tmp_path / "r" / "best.pt").unlink()  # as when a run stops before its first evaluation
    loaded = load_model(RunDir(tmp_path / "r"), torch.device("cpu")).model.state_dict()
    assert all(torch.equal(loaded[k], best[k]) for k in loaded)


def test_resume_refuses_a_changed_model(prepared, tmp_path):
    data = prepared("trec", "none", embeddings=False)
    common = ["data.limit=100", "train.evals_per_epoch=2"]
    run("trec", data, tmp_path / "r", common + ["train.max_steps=2"])
    with pytest.raises(ConfigError, match="model.hidden"):
        run("trec", data, tmp_path / "r", common + ["model.hidden=40"], resume=True)


def test_resume_accepts_a_run_from_before_a_config_key_existed(prepared, tmp_path):
    import yaml

    data = prepared("trec", "none", embeddings=False)
    common = ["data.limit=100", "train.evals_per_epoch=2"]
    run("trec", data, tmp_path / "r", common + ["train.max_steps=2"])
    saved = yaml.safe_load((tmp_path / "r" / "config.yaml").read_text())
    del saved["model"]["pool"]  # as written by a version without model.pool
    (tmp_path / "r" / "config.yaml").write_text(yaml.safe_dump(saved))
    assert run("trec", data, tmp_path / "r", common + ["train.max_steps=4"], resume=True)["steps"] == 4
    with pytest.raises(ConfigError, match="model.pool"):
        run("trec", data, tmp_path / "r", common + ["train.max_steps=6", "model.pool=max"], resume=True)


def test_lr_decay_sets_each_epochs_rate(prepared, tmp_path):
    data = prepared("trec", "none", embeddings=False)
    run("trec", data, tmp_path / "r", ["data.limit=100", "train.epochs=3", "train.lr=0.8", "train.lr_decay=0.5"])
    groups = torch.load(tmp_path / "r" / "latest.pt", weights_only=False)["optimizer"]["param_groups"]
    assert [g["lr"] for g in groups] == [0.8 * 0.5 ** 2] * len(groups)  # epochs 0, 1, 2


def test_warmup_raises_the_rate_linearly_over_the_first_updates(prepared, tmp_path):
    data = prepared("trec", "none", embeddings=False)
    common = ["data.limit=100", "train.lr=0.8", "train.warmup=4"]
    run("trec", data, tmp_path / "r", [*common, "train.max_steps=3"])
    groups = torch.load(tmp_path / "r" / "latest.pt", weights_only=False)["optimizer"]["param_groups"]
    assert [g["lr"] for g in groups] == [pytest.approx(0.8 * 3 / 4)] * len(groups)  # update 3 of 4
    run("trec", data, tmp_path / "r", [*common, "train.max_steps=6"], resume=True)
    groups = torch.load(tmp_path / "r" / "latest.pt", weights_only=False)["optimizer"]["param_groups"]
    assert [g["lr"] for g in groups] == [0.8] * len(groups)  # warmed up; resumed from update 3
    with pytest.raises(ConfigError, match="train.warmup"):
        run("trec", data, tmp_path / "w", [*common[:2], "train.warmup=-1"])


def test_sigterm_saves_latest_and_resume_finishes(prepared, tmp_path, monkeypatch):
    import os
    import signal

    import cn3.sentence.task as trainer_module

    data = prepared("trec", "none", embeddings=False)
    common = ["data.limit=200", "train.epochs=2", "train.batch_size=16"]
    real_make_batch = trainer_module.make_batch
    calls = {"n": 0}

    def make_batch_then_term(dataset, indices):
        calls["n"] += 1
        if calls["n"] == 5:  # the 5th training batch: steps 1-4 are done
            os.kill(os.getpid(), signal.SIGTERM)
        return real_make_batch(dataset, indices)

    monkeypatch.setattr(trainer_module, "make_batch", make_batch_then_term)
    handler_before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        run("trec", data, tmp_path / "t", common)
    saved = torch.load(tmp_path / "t" / "latest.pt", weights_only=False)["state"]
    assert saved["step"] == 4 and saved["batch_in_epoch"] == 4
    assert signal.getsignal(signal.SIGTERM) == handler_before  # the trainer's handler is gone again
    monkeypatch.setattr(trainer_module, "make_batch", real_make_batch)
    resumed = run("trec", data, tmp_path / "t", common, resume=True)
    straight = run("trec", data, tmp_path / "s", common)
    assert resumed["scores"] == straight["scores"]


def test_interrupted_evaluation_is_redone_on_resume(prepared, tmp_path, monkeypatch):
    """Ctrl-C during a dev evaluation: resuming evaluates again before training on, so the run's
    evaluations, checkpoints and scores equal an uninterrupted run's."""
    import cn3.sentence.task as trainer_module

    data = prepared("trec", "none", embeddings=False)
    common = ["data.limit=200", "train.epochs=2", "train.batch_size=16", "train.evals_per_epoch=2"]
    straight = run("trec", data, tmp_path / "s", common)
    real_evaluate = trainer_module.evaluate_dataset
    calls = {"n": 0}

    def evaluate_then_interrupt(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:  # the epoch-end evaluation of epoch 1
            raise KeyboardInterrupt
        return real_evaluate(*args, **kwargs)

    monkeypatch.setattr(trainer_module, "evaluate_dataset", evaluate_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        run("trec", data, tmp_path / "t", common)
    assert torch.load(tmp_path / "t" / "latest.pt", weights_only=False)["state"]["eval_due"]
    monkeypatch.setattr(trainer_module, "evaluate_dataset", real_evaluate)
    resumed = run("trec", data, tmp_path / "t", common, resume=True)
    assert resumed["scores"] == straight["scores"]

    def evaluations(path):
        return [{k: v for k, v in r.items() if k != "seconds"}
                for r in map(json.loads, (path / "metrics.jsonl").read_text().splitlines())]

    assert evaluations(tmp_path / "t") == evaluations(tmp_path / "s")
