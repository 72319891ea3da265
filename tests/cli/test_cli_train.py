"""``cn3 train/evaluate/predict`` through CliRunner: a real tiny run, exit codes and messages."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from cli.main import app
from data_prep.prepare import PrepareSettings, prepare

# one torch thread for the module's tiny in-process trainings (two stalled each other in OpenMP's barriers
# on a loaded 2-core machine: tests/train/test_trainer.py); conftest's fixture restores the count after
pytestmark = pytest.mark.usefixtures("one_thread")

runner = CliRunner()
TINY = ["--set", "model.hidden=16", "--set", "model.energy_dim=8", "--set", "model.mlp_hidden=16",
        "--set", "model.char=none", "--set", "model.pos_dim=0", "--set", "model.spell_dim=0",
        "--set", "data.limit=300", "--set", "train.epochs=1", "--set", "data.embeddings=null"]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def trained(tmp_path_factory, data_root):
    base = tmp_path_factory.mktemp("cli")
    prepared = base / "trec"
    prepare(PrepareSettings(task="trec", data=data_root, out=prepared, annotator="none"))
    run = base / "run"
    result = invoke("train", "--task", "trec", "--prepared", prepared, "--run-dir", run, "--device", "cpu", *TINY)
    assert result.exit_code == 0, result.output
    return run, prepared


def test_train_prints_the_final_table(trained):
    run, _ = trained
    assert (run / "results.json").is_file()
    assert json.loads((run / "results.json").read_text())["scores"]["dev"]["metric"] == "accuracy"


def test_evaluate_split_and_file(trained, data_root):
    import torch

    from cn3.runs.layout import RunDir
    from cn3.sentence.inference import evaluate_dataset, load_model
    from data_prep.dataset import load_prepared

    run, prepared = trained
    result = invoke("evaluate", run, "--split", "test", "--device", "cpu")
    assert result.exit_code == 0, result.output
    line = json.loads(result.stdout.strip().splitlines()[-1])
    loaded = load_model(RunDir(run), torch.device("cpu"))  # the same best.pt through the Python API
    test = load_prepared(prepared).splits["test"]  # all 500 (the run trained with data.limit)
    direct = evaluate_dataset(loaded.model, test, loaded.vocabs["labels"].itos, "graph", None, torch.device("cpu"))
    assert line["metric"] == "accuracy" and line["score"] == pytest.approx(direct["score"], abs=0.01)
    on_file = invoke("evaluate", run, "--file", data_root / "trec" / "TREC_10.label", "--device", "cpu")
    assert on_file.exit_code == 0, on_file.output
    assert json.loads(on_file.stdout.strip().splitlines()[-1])["score"] == line["score"]  # same 500 questions


def test_predict_text_and_file(trained, tmp_path):
    run, _ = trained
    result = invoke("predict", run, "Who wrote Hamlet ?", "How far is Denver from Aspen ?", "--device", "cpu")
    assert result.exit_code == 0, result.output
    records = [json.loads(x) for x in result.stdout.strip().splitlines()]
    assert len(records) == 2 and records[0]["tokens"] == ["Who", "wrote", "Hamlet", "?"]
    assert records[1]["label"] == next(iter(records[1]["probs"]))  # the most probable class
    questions = tmp_path / "q.txt"
    questions.write_text("What is a fjord ?\nWhen did it rain ?\n")
    result = invoke("predict", run, "--file", questions, "--device", "cpu")
    assert result.exit_code == 0 and len(result.stdout.strip().splitlines()) == 2


def test_evaluate_file_with_unknown_label(trained, tmp_path):
    run, _ = trained
    bad = tmp_path / "bad.label"
    bad.write_text("HUM:ind Who wrote Hamlet ?\nXYZ:abc What is this ?\n", encoding="latin-1")
    result = invoke("evaluate", run, "--file", bad, "--device", "cpu")
    assert result.exit_code == 1 and "bad.label" in result.output and "line 2" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("override, message", [
    ("model.hiden=3", "did you mean 'model.hidden'"),
    ("trian.lr=1", "unknown key 'trian'"),
    ("model.encoder=rnnn", "unknown encoder 'rnnn'; did you mean 'rnn'"),
])
def test_bad_config_values(override, message, tmp_path):
    result = invoke("train", "--task", "trec", "--run-dir", tmp_path / "r", "--set", override)
    assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "r").exists()


def test_bad_config_file(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("model: [1, 2\n")
    result = invoke("train", "--config", config, "--run-dir", tmp_path / "r")
    assert result.exit_code == 1 and "c.yaml" in result.output and "line" in result.output


def test_missing_run(tmp_path):
    for command in (["evaluate", tmp_path / "none"], ["predict", tmp_path / "none", "hello"]):
        result = invoke(*command)
        assert result.exit_code == 1 and "run directory not found" in result.output


def test_existing_run_needs_resume(trained):
    run, prepared = trained
    result = invoke("train", "--task", "trec", "--prepared", prepared, "--run-dir", run, *TINY)
    assert result.exit_code == 1 and "--resume" in result.output


def test_resume_continues_the_runs_own_config(trained, tmp_path):
    """`--resume --set train.epochs=2` goes on with the settings the run was started with (TINY's), as
    `cn3 nmt train --resume` does: they need not be given again."""
    import shutil

    run, prepared = trained
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    result = invoke("train", "--task", "trec", "--prepared", prepared, "--run-dir", copy, "--device", "cpu",
                    "--resume", "--set", "train.epochs=2")
    assert result.exit_code == 0, result.output
    assert "epoch 2 step" in (copy / "log.txt").read_text()
    saved = yaml.safe_load((copy / "config.yaml").read_text())
    assert saved["model"]["hidden"] == 16 and saved["train"]["epochs"] == 2


def test_mismatched_vocabularies_are_refused(trained, data_root):
    run, prepared = trained
    prepare(PrepareSettings(task="trec", data=data_root, out=prepared, annotator="none", min_freq=3, force=True))
    try:
        result = invoke("evaluate", run, "--split", "dev", "--device", "cpu")
        assert result.exit_code == 1 and "not the dataset this run was trained on" in result.output
    finally:
        prepare(PrepareSettings(task="trec", data=data_root, out=prepared, annotator="none", force=True))


def test_cuda_requested_without_cuda(trained):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    run, _ = trained
    result = invoke("evaluate", run, "--device", "cuda")
    assert result.exit_code == 1 and "no CUDA device" in result.output


def test_missing_embeddings_in_config(tmp_path):
    result = invoke("train", "--task", "trec", "--run-dir", tmp_path / "r", "--set", "data.embeddings=nowhere.txt",
                    "--set", f"data.prepared={tmp_path / 'p'}")
    assert result.exit_code == 1 and "embeddings file not found" in result.output
    assert "Traceback" not in result.output


def test_predict_splits_text_as_the_task_files_are(tmp_path, data_root):
    """MR keeps ``doesn't`` whole, so predict must too, or the word would be ``n't`` -> ``<unk>``."""
    prepared = tmp_path / "mr"
    prepare(PrepareSettings(task="mr", data=data_root, out=prepared, annotator="none"))
    run = tmp_path / "run"
    result = invoke("train", "--task", "mr", "--prepared", prepared, "--run-dir", run, "--device", "cpu", *TINY)
    assert result.exit_code == 0, result.output
    result = invoke("predict", run, "It doesn't work -- at all.", "--device", "cpu")
    assert result.exit_code == 0, result.output
    tokens = json.loads(result.stdout)["tokens"]
    assert tokens == ["It", "doesn't", "work", "--", "at", "all", "."]
    known = set(json.loads((run / "vocab.json").read_text())["lower"]["itos"])
    assert {t.lower() for t in tokens} <= known


def test_encoders_lists_the_zoo():
    from cn3.encoders import ENCODERS

    names = invoke("encoders", "--names")
    assert names.exit_code == 0 and names.stdout.split() == list(ENCODERS)
    table = runner.invoke(app, ["encoders"], env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.output
    for name, spec in ENCODERS.items():
        row = next(line for line in table.output.splitlines() if line.startswith(f"│ {name} "))
        assert ("dependency trees" in row) == spec.needs_trees, row


def test_an_encoder_needing_trees_fails_before_training_on_data_without(trained, tmp_path):
    _, prepared = trained  # prepared with --annotator none
    result = invoke("train", "--task", "trec", "--prepared", prepared, "--run-dir", tmp_path / "r",
                    "--set", "model.encoder=treelstm", *TINY)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "encoder 'treelstm' needs dependency trees" in result.output and "--annotator" in result.output
    assert not (tmp_path / "r" / "latest.pt").exists()


def test_a_family_option_the_encoder_does_not_read_is_warned_of_before_training(trained, tmp_path):
    """CN3's options are plain model.* keys on sentence tasks (TINY sets model.energy_dim); an LSTM
    reads none of them, and trains all the same."""
    _, prepared = trained
    result = invoke("train", "--task", "trec", "--prepared", prepared, "--run-dir", tmp_path / "r",
                    "--set", "model.encoder=lstm", "--set", "model.rnn.residual=true", *TINY)
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert warnings == [("warning: --set model.energy_dim changes nothing: the lstm encoder does not read it (the "
                         "family options it reads: rnn.bidirectional, rnn.residual; `cn3 encoders` lists them all)")]
    assert (tmp_path / "r" / "best.pt").is_file()
