"""``cn3 probe``: the classifier and its choice of regularization on synthetic features (known
answers), the onlstm_san stacks in ``info``, and the command on tiny real runs (a sentence run on
TREC questions, an onlstm_san translation run) over the EWT probing tasks."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from cli.main import app
from cn3.config import ConfigError
from cn3.probe.probing import (
    C_GRID,
    GROUPS,
    PROBE_TASKS,
    capture_layer,
    detokenize,
    fit_probe,
    majority_baseline,
    parse_tasks,
)
from tests.analysis.test_analysis_graphs import TINY as SENTENCE_TINY
from tests.analysis.test_analysis_graphs import _small_trec
from tests.nmt.test_nmt_cli import TINY as NMT_TINY
from tests.nmt.test_nmt_cli import assert_clean_error, corpus

# slow: trains and probes real runs (`pytest -m "not slow"` is the quick loop)
pytestmark = pytest.mark.slow

runner = CliRunner()


def blobs(n: int, dim: int, gap: float, seed: int):
    """Two classes ``a``/``b`` of ``n`` points each around ``-gap/2`` and ``+gap/2`` on every axis."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(-gap / 2, 1.0, (n, dim)), rng.normal(gap / 2, 1.0, (n, dim))])
    return x.astype(np.float32), ["a"] * n + ["b"] * n


# ---- the classifier ------------------------------------------------------------------------------

def test_separable_features_are_read_perfectly():
    (xtr, ytr), (xdv, ydv), (xte, yte) = (blobs(100, 5, 8.0, s) for s in (1, 2, 3))
    fit = fit_probe(xtr, ytr, xdv, ydv, xte, yte)
    assert fit["test_accuracy"] == 1.0 and fit["dev_accuracy"] == 1.0 and fit["converged"]
    assert fit["parameter"] == "C" and set(fit["dev"]) == {repr(c) for c in C_GRID}
    # every C is perfect on dev: the tie goes to the strongest regularization
    assert fit["chosen"] == C_GRID[0]


def test_noise_features_stay_near_the_majority_baseline():
    rng = np.random.default_rng(0)
    x = {s: rng.normal(size=(n, 20)).astype(np.float32) for s, n in (("train", 400), ("dev", 200), ("test", 400))}
    y = {s: list(rng.choice(["x", "y"], size=len(x[s]))) for s in x}
    fit = fit_probe(x["train"], y["train"], x["dev"], y["dev"], x["test"], y["test"])
    _, majority = majority_baseline(y["train"], y["test"])
    assert abs(fit["test_accuracy"] - 0.5) < 0.1 and abs(majority - 0.5) < 0.1


def test_the_regularization_is_chosen_on_dev_alone():
    """The same train and dev with two different test sets (the labels of one flipped): the choice
    and the dev scores are the same, only the test accuracy moves, and the choice is the best on dev."""
    (xtr, ytr), (xdv, ydv), (xte, yte) = (blobs(60, 30, 0.6, s) for s in (4, 5, 6))
    flipped = ["b" if y == "a" else "a" for y in yte]
    first = fit_probe(xtr, ytr, xdv, ydv, xte, yte)
    second = fit_probe(xtr, ytr, xdv, ydv, xte, flipped)
    assert first["chosen"] == second["chosen"] and first["dev"] == second["dev"]
    assert first["test_accuracy"] == pytest.approx(1.0 - second["test_accuracy"])
    best = max(first["dev"].values())
    assert first["dev"][repr(first["chosen"])] == best == first["dev_accuracy"]
    assert first["chosen"] == next(c for c in C_GRID if first["dev"][repr(c)] == best)  # the first best
    # the predictions kept for paired tests are the ones scored
    assert len(first["test_predictions"]) == len(yte)
    assert np.mean([p == y for p, y in zip(first["test_predictions"], yte)]) == first["test_accuracy"]
    assert first["test_predictions"] == second["test_predictions"]
    # fitting again gives the same numbers (deterministic)
    assert fit_probe(xtr, ytr, xdv, ydv, xte, yte) == first


def test_mlp_chooses_alpha_on_dev():
    (xtr, ytr), (xdv, ydv), (xte, yte) = (blobs(50, 5, 8.0, s) for s in (7, 8, 9))
    fit = fit_probe(xtr, ytr, xdv, ydv, xte, yte, classifier="mlp")
    assert fit["parameter"] == "alpha" and fit["test_accuracy"] == 1.0 and fit["chosen"] == 1.0
    with pytest.raises(ConfigError, match="single class"):
        fit_probe(xtr, ["a"] * len(ytr), xdv, ydv, xte, yte)


def test_majority_baseline_counts_train_and_scores_test():
    assert majority_baseline(["b", "a", "b"], ["b", "a", "a", "a"]) == ("b", 0.25)
    assert majority_baseline(["b", "a"], ["a"]) == ("a", 1.0)  # ties: the first label in sorted order


def test_task_names_and_groups():
    assert parse_tasks("sentlen, probe_tense,sentlen") == ["probe_sentlen", "probe_tense"]
    assert parse_tasks("all") == list(PROBE_TASKS) and len(PROBE_TASKS) == 10
    assert [t for t in PROBE_TASKS if GROUPS[t] == "surface"] == ["probe_sentlen", "probe_wc"]
    assert {t for t in PROBE_TASKS if GROUPS[t] == "syntactic"} == {"probe_bshift", "probe_treedepth",
                                                                   "probe_topconst"}
    with pytest.raises(ConfigError, match="unknown probing task 'tenses'"):
        parse_tasks("tenses")


def test_detokenize_restores_running_text():
    assert detokenize(["I", "do", "n't", "know", "(", "really", ")", ",", "he", "'s", "year", "-", "round", "."]) \
        == "I don't know (really), he's year-round."
    assert detokenize(["``", "It", "-LRB-", "is", "-RRB-", "$", "5", "''", "."]) == '"It (is) $5".'
    assert detokenize(["He", "said", '"', "yes", '"', "."]) == 'He said "yes".'


# ---- the encoders: H_onlstm and H_san apart, per-layer states ------------------------------------

def test_onlstm_san_exposes_both_stacks_outside_training():
    from cn3.encoders import EncoderArgs, build_encoder
    from cn3.encoders.options import RecurrentOptions

    torch.manual_seed(0)
    enc = build_encoder("onlstm_san", EncoderArgs(in_dim=8, d=8, layers=2, heads=2, ff=16, level="translation",
                                                  rnn=RecurrentOptions(layers=1, chunk_size=4)))
    x, mask = torch.randn(2, 5, 8), torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    enc.train()
    assert "h_rnn" not in enc(x, mask)[1]  # not kept while training
    enc.eval()
    h, info = enc(x, mask)
    assert torch.equal(h, (info["h_rnn"] + info["h_san"]).masked_fill(~mask.unsqueeze(-1), 0.0))  # H = H_onlstm + H_san
    assert "alphas" in info and len(info["alphas"]) == 1
    with capture_layer(enc, 1) as store:
        enc(x, mask)
    assert store["h"].shape == (2, 5, 8)
    with pytest.raises(ConfigError, match="out of range"), capture_layer(enc, 2):
        pass
    lstm = build_encoder("lstm", EncoderArgs(in_dim=8, d=8, layers=1, heads=2, ff=16, level="translation"))
    with pytest.raises(ConfigError, match="exposes no per-layer states"), capture_layer(lstm, 1):
        pass


# ---- cn3 probe on tiny runs ----------------------------------------------------------------------

def probe(*args):
    return runner.invoke(app, ["probe", *[str(a) for a in args], "--device", "cpu"])


@pytest.fixture(scope="module")
def sentence_run(tmp_path_factory, data_root, one_thread):
    """A tiny CN3 run on every 20th TREC question (no parser, no vectors: nothing to annotate later)."""
    from cn3.kinds import train
    from cn3.sentence.resolve import resolve_config
    from data_prep.prepare import PrepareSettings, prepare

    tmp = tmp_path_factory.mktemp("probe")
    prepared = prepare(PrepareSettings(task="trec", data=_small_trec(data_root, tmp / "data"), out=tmp / "none",
                                       annotator="none")).out
    cfg = resolve_config("trec", None, {"data.prepared": prepared}, SENTENCE_TINY)
    train(cfg, tmp / "run", device_name="cpu")
    return tmp / "run"


def test_probe_a_sentence_run_writes_table_and_json(sentence_run, staged, tmp_path):
    staged("ud_english_ewt")
    result = probe(sentence_run, "--tasks", "sentlen", "--limit", "120", "--out", tmp_path)
    assert result.exit_code == 0, result.output
    assert "sentlen" in result.output and "surface" in result.output and "majority" in result.output
    record = json.loads((tmp_path / "probe.json").read_text())
    assert record["kind"] == "sentence" and record["encoder"] == "cn3" and list(record["feature_sets"]) == ["sentence"]
    (task,) = record["tasks"]
    assert task["task"] == "probe_sentlen" and task["n"] == {"train": 120, "dev": 120, "test": 120}
    fit = task["features"]["sentence"]
    assert 0.0 <= fit["test_accuracy"] <= 1.0 and 0.0 <= task["majority"]["accuracy"] <= 1.0
    assert fit["chosen"] in C_GRID and fit["dim"] == 32  # 2 * model.hidden
    assert len(task["test_gold"]) == len(fit["test_predictions"]) == 120
    assert np.mean([p == g for p, g in zip(fit["test_predictions"], task["test_gold"])]) == fit["test_accuracy"]
    assert record["groups"]["surface"]["test_accuracy"]["sentence"] == fit["test_accuracy"]
    assert "syntactic" not in record["groups"]
    # the default output directory is the run's
    again = probe(sentence_run, "--tasks", "sentlen", "--limit", "60")
    assert again.exit_code == 0, again.output
    assert json.loads((sentence_run / "probe" / "probe.json").read_text())["limit"] == 60


def test_probe_errors_are_one_clear_line(sentence_run, tmp_path):
    assert_clean_error(probe(tmp_path / "nope"), "run directory not found")
    assert_clean_error(probe(sentence_run, "--tasks", "tenses"), "unknown probing task 'tenses'")
    assert_clean_error(probe(sentence_run, "--layer", "1"), "exposes no per-layer states")


def test_probe_an_onlstm_san_translation_run_splits_the_stacks(tmp_path, staged, one_thread):
    staged("ud_english_ewt")
    src, tgt = corpus(tmp_path, "train", 300, seed=1)
    run = tmp_path / "run"
    sets = [x for s in NMT_TINY for x in ("--set", s)]
    trained = runner.invoke(app, ["nmt", "train", "--encoder", "onlstm_san", "--src", str(src), "--tgt", str(tgt),
                                  "--run-dir", str(run), "--device", "cpu", *sets])
    assert trained.exit_code == 0, trained.output
    result = probe(run, "--tasks", "bshift", "--limit", "80", "--out", tmp_path / "out", "--layer", "1")
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "out" / "probe.json").read_text())
    assert record["kind"] == "translation" and list(record["feature_sets"]) == ["layer 1", "H_onlstm", "H_san"]
    features = record["tasks"][0]["features"]
    assert all(0.0 <= f["test_accuracy"] <= 1.0 and f["dim"] == 32 for f in features.values())
    plain = probe(run, "--tasks", "bshift", "--limit", "80", "--out", tmp_path / "plain", "--no-split-features")
    assert plain.exit_code == 0, plain.output
    assert list(json.loads((tmp_path / "plain" / "probe.json").read_text())["feature_sets"]) == ["encoder"]
