"""What every run leaves for a comparison: ``predictions/<split>.jsonl`` with gold, ``curves.png``,
``cn3 plot`` of several runs, and TensorBoard scalars under ``train.tensorboard``.

Each prediction file is checked against the prepared data (or the translation references) and
rescored with the metric results.json names, which must give results.json's score.
"""

from __future__ import annotations

import json
import sys

import pytest
import sacrebleu
from typer.testing import CliRunner

from cli.main import app
from cn3.metrics import score
from data_prep.dataset import load_prepared
from data_prep.prepare import PrepareSettings, prepare
from tests.cli.test_cli_train import TINY
from tests.nmt.test_nmt_cli import TINY as NMT_TINY
from tests.nmt.test_nmt_cli import corpus

# slow: trains the runs whose outputs it reads (`pytest -m "not slow"` is the quick loop)
pytestmark = pytest.mark.slow

runner = CliRunner()
# One epoch of 200 CoNLL-2000 sentences at this rate already finds some chunks (span F1 about 12), so the
# rescored F1 is not a trivial 0 (tests/cli/test_cli_predict.py trains 150 steps, for peaked marginals).
TAGGER = [*TINY, "--set", "data.limit=200", "--set", "train.lr=0.01"]
PNG = b"\x89PNG\r\n\x1a\n"
TENSORBOARD_MESSAGE = "train.tensorboard: true needs the tensorboard package (pip install tensorboard)"


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def read_predictions(run, split: str) -> list[dict]:
    """A split's predictions as ``{"i", "gold", "pred"}`` per item, read by cn3.runs.layout (ids in xz JSON)."""
    from cn3.runs.records import load_predictions

    p = load_predictions(run, split)
    return [{"i": i, "gold": g, "pred": q} for i, (g, q) in enumerate(zip(p.gold, p.pred, strict=True))]


def assert_one_line_error(result, fragment: str) -> None:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and result.output.strip().count("\n") == 0, result.output
    assert result.output.startswith("error:") and fragment in result.output, result.output


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, data_root):
    """``prepared(task)``: the task prepared once for the module (no annotator, no vectors)."""
    base = tmp_path_factory.mktemp("prepared")

    def get(task: str):
        out = base / task
        if not out.is_dir():
            prepare(PrepareSettings(task=task, data=data_root, out=out, annotator="none"))
        return out

    return get


def train_run(prepared, task: str, run, *settings):
    result = invoke("train", "--task", task, "--prepared", prepared(task), "--run-dir", run, "--device", "cpu",
                    *settings)
    assert result.exit_code == 0, result.output
    return run


@pytest.fixture(scope="module")
def trec_run(prepared, tmp_path_factory):
    return train_run(prepared, "trec", tmp_path_factory.mktemp("trec") / "run", *TINY)


@pytest.fixture(scope="module")
def tagger_run(prepared, tmp_path_factory):
    return train_run(prepared, "conll2000", tmp_path_factory.mktemp("conll2000") / "run", *TAGGER)


def limited_split(prepared_dir, split: str, limit: int):
    """The split as the run saw it (``data.limit`` spreads every split) and the label names."""
    ds = load_prepared(prepared_dir)
    return ds.splits[split].spread(limit), ds.vocabs["labels"].itos


def test_classification_predictions_match_gold_and_the_score(trec_run, prepared):
    results = json.loads((trec_run / "results.json").read_text())
    assert set(results["predictions"]) == {"dev", "test"}
    for split in ("dev", "test"):
        entry = results["predictions"][split]
        records = read_predictions(trec_run, split)
        dataset, labels = limited_split(prepared("trec"), split, 300)
        assert entry == {"path": f"predictions/{split}.json.xz", "items": len(dataset), "metric": "accuracy",
                         "tag_scheme": None, "task": "trec"}
        assert [r["i"] for r in records] == list(range(len(dataset)))
        assert [r["gold"] for r in records] == [labels[int(y)] for y in dataset.t["y"]]
        assert {r["pred"] for r in records} <= set(labels)
        accuracy = 100 * sum(r["gold"] == r["pred"] for r in records) / len(records)
        assert round(accuracy, 2) == results["scores"][split]["score"]


def test_tagging_predictions_are_tag_lists_scored_by_span_f1(tagger_run, prepared):
    results = json.loads((tagger_run / "results.json").read_text())
    entry = results["predictions"]["test"]
    assert entry["metric"] == "span_f1" and entry["tag_scheme"] == "BIOES" and entry["task"] == "conll2000"
    records = read_predictions(tagger_run, "test")
    dataset, labels = limited_split(prepared("conll2000"), "test", 200)
    assert [r["gold"] for r in records] == [[labels[t] for t in dataset[i].y.tolist()] for i in range(len(dataset))]
    assert all(len(r["pred"]) == len(r["gold"]) for r in records)
    rescored = score("node", "BIOES", [r["gold"] for r in records], [r["pred"] for r in records])
    assert rescored["metric"] == "span_f1" and rescored["score"] > 0  # a trained tagger, not an empty one
    assert round(rescored["score"], 2) == results["scores"]["test"]["score"]


def test_a_run_draws_its_curves_and_writes_no_tensorboard_by_default(trec_run):
    assert (trec_run / "curves.png").read_bytes()[:8] == PNG
    assert not (trec_run / "tensorboard").exists()


def test_plot_several_runs_and_the_error_for_a_dir_without_metrics(trec_run, tagger_run, tmp_path):
    out = tmp_path / "both.png"
    result = invoke("plot", trec_run, tagger_run, "--out", out)
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == PNG and str(out) in result.output
    one_panel = invoke("plot", trec_run, tagger_run, "--metric", "train_loss", "--out", tmp_path / "loss.svg")
    assert one_panel.exit_code == 0 and (tmp_path / "loss.svg").read_text().lstrip().startswith("<?xml")
    assert_one_line_error(invoke("plot", trec_run, tmp_path, "--out", tmp_path / "x.png"), "has no metrics.jsonl")
    assert_one_line_error(invoke("plot", trec_run, "--metric", "bleu", "--out", tmp_path / "x.png"), "has no 'bleu'")
    assert_one_line_error(invoke("plot", trec_run, "--out", tmp_path / "x.gif"), "unsupported extension")
    assert not (tmp_path / "x.png").exists()


def test_curves_of_a_translation_record_and_a_stop_record(tmp_path):
    """Translation records carry dev_loss and dev_bleu; a stop record carries a flag that is not drawn."""
    from cn3.train.curves import lines, panel_title, read_metrics

    (tmp_path / "metrics.jsonl").write_text(
        '{"epoch": 1, "step": 10, "train_loss": 5.0, "dev_loss": 4.0, "dev_bleu": 1.5, "seconds": 3}\n'
        '{"epoch": 1, "step": 12, "train_loss": 4.5, "dev_loss": 3.5, "dev_bleu": 2.5, "seconds": 4, "stop": true}\n')
    records = read_metrics(tmp_path)
    loss = lines(records, "loss", "r")
    assert [(text, style) for _, _, text, style in loss] == [("r (train)", "-"), ("r (dev)", "--")]
    assert loss[1][:2] == ([10, 12], [4.0, 3.5])
    assert lines(records, "dev", "r")[0][:2] == ([10, 12], [1.5, 2.5])
    assert panel_title("dev", [records]) == "dev BLEU"
    with pytest.raises(Exception, match="has no 'stop'"):
        lines(records, "stop", "r")


def test_a_failed_plot_is_a_warning_not_a_failed_training(prepared, tmp_path, monkeypatch):
    import cn3.train.curves

    def broken(*args, **kwargs):
        raise RuntimeError("no canvas")

    monkeypatch.setattr(cn3.train.curves, "plot_runs", broken)
    run = train_run(prepared, "trec", tmp_path / "run", *TINY, "--set", "train.max_steps=2")
    assert (run / "results.json").is_file() and not (run / "curves.png").exists()
    assert "could not draw" in (run / "log.txt").read_text() and "no canvas" in (run / "log.txt").read_text()


def test_tensorboard_scalars_and_switching_it_on_at_resume(prepared, tmp_path):
    pytest.importorskip("tensorboard", reason="tensorboard is not installed (pip install 'cn3[tensorboard]'); "
                        "the message without it is tested below")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = train_run(prepared, "trec", tmp_path / "run", *TINY, "--set", "train.max_steps=2")
    assert not (run / "tensorboard").exists()
    # train.tensorboard changes nothing that is computed, so a resumed run may switch it on
    train_run(prepared, "trec", run, *TINY, "--set", "train.max_steps=20", "--set", "train.tensorboard=true",
              "--resume")
    (events,) = (run / "tensorboard").glob("events.out.tfevents.*")
    board = EventAccumulator(str(events.parent))
    board.Reload()
    assert {"train/loss", "train/lr", "dev/accuracy"} <= set(board.Tags()["scalars"])
    metrics = read_jsonl(run / "metrics.jsonl")
    assert [e.step for e in board.Scalars("dev/accuracy")] == [m["step"] for m in metrics if m["step"] > 2]
    assert board.Scalars("dev/accuracy")[-1].value == pytest.approx(metrics[-1]["dev"])


def test_tensorboard_without_the_package_is_a_clear_error(prepared, tmp_path, monkeypatch):
    # None in sys.modules makes the import fail as if the package were absent
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    result = invoke("train", "--task", "trec", "--prepared", prepared("trec"), "--run-dir", tmp_path / "run",
                    "--device", "cpu", *TINY, "--set", "train.tensorboard=true")
    assert_one_line_error(result, TENSORBOARD_MESSAGE)
    assert not (tmp_path / "run").exists()  # refused before the run directory, data or model


@pytest.mark.usefixtures("one_thread")
def test_translation_predictions_are_references_and_hypotheses(tmp_path):
    from cn3.nmt.data import load_split
    from cn3.nmt.inference import load_run

    src, tgt = corpus(tmp_path, "train", 80, seed=11)
    test_src, test_tgt = corpus(tmp_path, "test", 12, seed=12)
    run = tmp_path / "run"
    settings = [*NMT_TINY, "train.max_steps=4", "train.final_splits=[val,test]", f"data.test_src={test_src}",
                f"data.test_tgt={test_tgt}"]
    result = invoke("nmt", "train", "--encoder", "transformer", "--src", src, "--tgt", tgt, "--run-dir", run,
                    "--device", "cpu", *[x for s in settings for x in ("--set", s)])
    assert result.exit_code == 0, result.output
    results = json.loads((run / "results.json").read_text())
    assert set(results["predictions"]) == {"val", "test"}
    cfg = load_run(run, "cpu").config
    for split in ("val", "test"):
        entry = results["predictions"][split]
        assert entry["metric"] == "bleu" and entry["tag_scheme"] is None and entry["task"] == results["corpus"]
        records = read_predictions(run, split)
        assert entry["items"] == len(records) == results["scores"][split]["sentences"]
        assert [r["gold"] for r in records] == [t for _, t in load_split(cfg.data, split, cfg.train.seed)]
        hyps = [r["pred"] for r in records]
        assert hyps == (run / "translations" / f"{split}.beam2.txt").read_text(encoding="utf-8").splitlines()
        bleu = sacrebleu.corpus_bleu(hyps, [[r["gold"] for r in records]]).score
        assert results["scores"][split]["metric"] == "bleu"
        assert round(bleu, 2) == results["scores"][split]["score"]
    assert (run / "curves.png").read_bytes()[:8] == PNG
