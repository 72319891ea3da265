"""``cn3 compare`` through CliRunner on hand-made run directories (the cn3 0.3 predictions contract)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from cli.main import app
from cn3.stats import bleu_paired_test, paired_test
from tests.stats.test_stats import GOLD, HYPS_A, HYPS_B, PRED_A, PRED_B, REFS, TAGS_A, TAGS_B, TAGS_GOLD, write_run

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, ["compare", *[str(a) for a in args]])


def test_compare_prints_the_sentence_and_the_json(tmp_path):
    a = write_run(tmp_path / "a", "test", TAGS_GOLD, TAGS_A, "span_f1", "BIOES", "conll2003")
    b = write_run(tmp_path / "b", "test", TAGS_GOLD, TAGS_B, "span_f1", "BIOES", "conll2003")
    result = invoke(a, b)
    assert result.exit_code == 0, result.output
    expected = paired_test(TAGS_GOLD, TAGS_A, TAGS_B, "span_f1", tag_scheme="BIOES")
    assert expected.sentence("test") in result.output.replace("\n", " ")
    line = json.loads(result.stdout.strip().splitlines()[-1])
    assert line["a"] == str(a) and line["split"] == "test" and line["task"] == "conll2003"
    assert line["p_value"] == expected.p_value and line["difference"] == expected.difference
    assert {"score_a", "score_b", "ci_low", "ci_high", "method", "resamples", "n_items"} <= line.keys()


def test_compare_translations_with_sacrebleu(tmp_path):
    a = write_run(tmp_path / "a", "test2016", REFS, HYPS_A, "bleu", task="multi30k en-de")
    b = write_run(tmp_path / "b", "test2016", REFS, HYPS_B, "bleu", task="multi30k en-de")
    result = invoke(a, b, "--split", "test2016", "--resamples", 1000)
    assert result.exit_code == 0, result.output
    line = json.loads(result.stdout.strip().splitlines()[-1])
    expected = bleu_paired_test(REFS, HYPS_A, HYPS_B, resamples=1000)
    assert line["metric"] == "bleu" and line["p_value"] == expected.p_value and line["score_a"] == expected.score_a


def test_compare_refuses_different_items(tmp_path):
    a = write_run(tmp_path / "a", "dev", GOLD, PRED_A, "accuracy")
    b = write_run(tmp_path / "b", "dev", GOLD[:-1], PRED_B[:-1], "accuracy")
    result = invoke(a, b, "--split", "dev")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "not scored on the same dev items: 10 and 9 items" in result.output.replace("\n", " ")
    c = write_run(tmp_path / "c", "dev", ["b"] + GOLD[1:], PRED_B, "accuracy")
    result = invoke(a, c, "--split", "dev")
    assert result.exit_code == 1 and "same dev items: item 0" in result.output.replace("\n", " ")


def test_compare_says_when_predictions_are_missing(tmp_path):
    a = write_run(tmp_path / "a", "test", GOLD, PRED_A, "accuracy")
    old = tmp_path / "old"
    old.mkdir()
    (old / "results.json").write_text(json.dumps({"scores": {"test": {"metric": "accuracy", "score": 50.0}}}))
    result = invoke(a, old)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert (f"{old} has no predictions for test: it was trained before cn3 0.3 or the split was not scored"
            in result.output.replace("\n", ""))
    assert result.stdout == ""  # no JSON line for a failed comparison
