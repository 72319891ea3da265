"""``cn3 prepare`` and ``cn3 tasks`` through Typer's CliRunner: exit codes and messages."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from cli.main import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def assert_clean_error(result, *fragments):
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.output.startswith("error:")
    for fragment in fragments:
        assert fragment in result.output, result.output


def test_help_teaches():
    result = invoke("prepare", "--help")
    assert result.exit_code == 0
    for option in ("--task", "--annotator", "--max-len", "--embeddings", "--force", "--fold"):
        assert option in result.output


def test_tasks_lists_every_task():
    result = invoke("tasks")
    assert result.exit_code == 0
    for name in ("snli", "sick", "trec", "conll2003", "ud_pos", "logic", "custom"):
        assert name in result.output


def test_prepare_then_up_to_date(tmp_path, data_root):
    out = tmp_path / "trec"
    first = invoke("prepare", "--task", "trec", "--data", data_root, "--out", out, "--annotator", "none")
    assert first.exit_code == 0, first.output
    assert "written" in first.output and "4,907" in first.output and "annotator: none" in first.output
    second = invoke("prepare", "--task", "trec", "--data", data_root, "--out", out, "--annotator", "none")
    assert second.exit_code == 0 and "up to date" in second.output


def test_unknown_task_is_rejected_by_the_enum():
    result = invoke("prepare", "--task", "nope")
    assert result.exit_code == 2 and "nope" in result.output


def test_missing_data_root():
    assert_clean_error(invoke("prepare", "--task", "trec", "--data", "/nonexistent/data"),
                       "/nonexistent/data", "CN3_DATA")


def test_missing_task_directory(tmp_path):
    assert_clean_error(invoke("prepare", "--task", "trec", "--data", tmp_path, "--out", tmp_path / "o"),
                       "trec", "--data")


def test_wrong_column_count_names_file_and_line(tmp_path):
    train = tmp_path / "train.conll"
    train.write_text("EU B-ORG\nrejects O\n\nPeter\n", encoding="utf-8")
    result = invoke("prepare", "--task", "custom", "--train", train, "--format", "conll",
                    "--columns", "word,tag", "--out", tmp_path / "o", "--annotator", "none")
    assert_clean_error(result, "train.conll", "line 4")
    assert not (tmp_path / "o").exists()


def test_non_utf8_bytes(tmp_path):
    train = tmp_path / "train.tsv"
    train.write_bytes(b"text\tlabel\ncaf\xe9 au lait\tpos\n")
    result = invoke("prepare", "--task", "custom", "--train", train, "--format", "tsv",
                    "--out", tmp_path / "o", "--annotator", "none")
    assert_clean_error(result, "train.tsv", "line 2", "utf-8")


def test_pair_with_missing_side(tmp_path):
    train = tmp_path / "train.jsonl"
    train.write_text('{"text_a": "A man sleeps", "text_b": "Nobody sleeps", "label": "c"}\n'
                     '{"text_a": "A dog runs", "label": "e"}\n', encoding="utf-8")
    result = invoke("prepare", "--task", "custom", "--train", train, "--format", "jsonl",
                    "--out", tmp_path / "o", "--annotator", "none")
    assert_clean_error(result, "train.jsonl", "line 2")


def test_empty_sentence(tmp_path):
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\ngood\tpos\n  \tneg\n", encoding="utf-8")
    result = invoke("prepare", "--task", "custom", "--train", train, "--format", "tsv",
                    "--out", tmp_path / "o", "--annotator", "none")
    assert_clean_error(result, "train.tsv", "line 3", "empty")


def test_bad_conllu_head(tmp_path):
    train = tmp_path / "train.conllu"
    train.write_text("1\tHello\t_\tINTJ\tUH\t_\t0\troot\t_\t_\n2\tworld\t_\tNOUN\tNN\t_\tx\tvocative\t_\t_\n\n",
                     encoding="utf-8")
    result = invoke("prepare", "--task", "custom", "--train", train, "--format", "conll", "--columns",
                    "_,word,_,tag,xpos,_,head,deprel,_,_", "--out", tmp_path / "o")
    assert_clean_error(result, "train.conllu", "line 2")


def test_stanza_without_models_fails_and_says_how(tmp_path, data_root):
    """Before annotating anything (nothing written; that it imports neither stanza nor torch first is
    tests/data_prep/test_annotators.py's)."""
    result = invoke("prepare", "--task", "trec", "--data", data_root, "--annotator", "stanza",
                    "--stanza-dir", tmp_path / "models", "--out", tmp_path / "o")
    assert_clean_error(result, "stanza", "--stanza-dir", str(tmp_path / "models"))
    assert not (tmp_path / "o").exists()


def test_gold_without_gold_annotations(tmp_path, data_root):
    result = invoke("prepare", "--task", "trec", "--data", data_root, "--annotator", "gold", "--out", tmp_path / "o")
    assert_clean_error(result, "gold")


@pytest.mark.parametrize("fold", ["10", "-1"])
def test_fold_out_of_range(fold, data_root, tmp_path):
    result = invoke("prepare", "--task", "mr", "--data", data_root, "--fold", fold, "--out", tmp_path / "o")
    assert result.exit_code in (1, 2)
    assert "fold" in result.output and "Traceback" not in result.output
