"""``cn3 evaluate --by FIELD``: group keys and per-group scores on hand-made records, then the CLI on
a tiny logic run (n_ops 7-12 never occur in its training split)."""

from __future__ import annotations

import gzip
import json

import pytest
from typer.testing import CliRunner

from cli.main import app
from cn3.config import ConfigError
from cn3.sentence.grouped import (
    MISSING,
    Group,
    example_record,
    group_keys,
    grouped_scores,
    plot_groups,
    seen_keys,
)
from data_prep.example import Example, Sentence
from data_prep.prepare import PrepareSettings, prepare
from data_prep.readers.logic import TEST_MAX_OPS, TRAIN_MAX_OPS


def record(n_tokens: int, source: str = "a.txt", **meta) -> dict:
    return {"tokens": [["w"] * n_tokens], "label": "x", "source": source, "line": 1, "meta": meta}


RECORDS = [record(3, n_ops=2), record(12, n_ops=10), record(10, n_ops=2, source="b.txt"),
           record(25, n_ops=10), record(1, n_ops=2)]
GOLD = ["a", "b", "a", "b", "a"]
PRED = ["a", "a", "b", "b", "a"]


def test_group_keys_of_meta_length_and_source():
    assert group_keys(RECORDS, "n_ops") == [2, 10, 2, 10, 2]
    assert group_keys(RECORDS, "length") == [1, 11, 1, 21, 1]  # first token of each 10-token bin
    assert group_keys(RECORDS, "source") == ["a.txt", "a.txt", "b.txt", "a.txt", "a.txt"]
    assert group_keys([record(2, ops=[1, 2]), record(2)], "ops") == ["[1, 2]", MISSING]  # lists: JSON text


def test_an_unknown_field_names_the_fields_the_items_have():
    with pytest.raises(ConfigError) as err:
        group_keys(RECORDS, "depth")
    assert str(err.value) == "--by depth: no item has this field; the items have: n_ops, length, source"


def test_scores_per_group_numerically_sorted_with_unseen_marks():
    groups = grouped_scores(group_keys(RECORDS, "n_ops"), GOLD, PRED, "graph", None, "n_ops", seen={2})
    # n_ops 2: items 0, 2, 4 -> 2 of 3 right; n_ops 10: items 1, 3 -> 1 of 2 right; 2 before 10 (not as text)
    assert [(g.label, g.items, round(g.score, 2), g.unseen) for g in groups] == [
        ("2", 3, 66.67, False), ("10", 2, 50.0, True)]
    assert groups[1].as_dict() == {"group": "10", "items": 2, "score": 50.0, "unseen_in_training": True}
    by_length = grouped_scores(group_keys(RECORDS, "length"), GOLD, PRED, "graph", None, "length")
    assert [(g.label, g.items, g.score, g.unseen) for g in by_length] == [
        ("1-10", 3, pytest.approx(200 / 3), None), ("11-20", 1, 0.0, None), ("21-30", 1, 100.0, None)]
    assert "unseen_in_training" not in by_length[0].as_dict()  # unknown, not False


def test_items_without_the_field_form_the_last_group():
    records = [record(2, fold=3), record(2), record(2, fold=0)]
    groups = grouped_scores(group_keys(records, "fold"), ["a", "a", "a"], ["a", "b", "a"], "graph", None, "fold")
    assert [(g.label, g.score) for g in groups] == [("0", 100.0), ("3", 100.0), ("(none)", 0.0)]


def test_tagging_groups_use_the_task_metric():
    records = [record(2, genre="news"), record(2, genre="web")]
    gold = [["NOUN", "VERB"], ["DET", "NOUN"]]
    pred = [["NOUN", "NOUN"], ["DET", "NOUN"]]
    groups = grouped_scores(group_keys(records, "genre"), gold, pred, "node", None, "genre")
    assert [(g.label, g.score) for g in groups] == [("news", 50.0), ("web", 100.0)]  # token accuracy


def test_seen_keys_of_the_training_records():
    assert seen_keys(RECORDS, "n_ops") == {2, 10}
    assert seen_keys(RECORDS, "length") == {1, 11, 21}
    assert seen_keys([record(2)], "n_ops") == set()  # no training item has it: every group is unseen


def test_example_record_is_shaped_like_a_sidecar_record():
    ex = Example([Sentence(["a", "b"]), Sentence(["c"])], "=", 7, "test7.gz", {"n_ops": 7})
    assert example_record(ex) == {"tokens": [["a", "b"], ["c"]], "label": "=", "source": "test7.gz", "line": 7,
                                  "meta": {"n_ops": 7}}


def test_plot_groups(tmp_path):
    groups = [Group(6, "6", 10, 90.0, False), Group(7, "7", 10, 60.0, True)]
    out = plot_groups(groups, tmp_path / "g.png", "n_ops", "accuracy", "logic test")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ConfigError, match="unsupported extension '.jpg'"):
        plot_groups(groups, tmp_path / "g.jpg", "n_ops", "accuracy", "logic test")


# --- the CLI on a tiny logic run ------------------------------------------------------------------

runner = CliRunner()
TINY = ["--set", "model.hidden=16", "--set", "model.energy_dim=8", "--set", "model.mlp_hidden=16",
        "--set", "model.char=none", "--set", "model.pos_dim=0", "--set", "model.spell_dim=0",
        "--set", "data.limit=300", "--set", "train.epochs=1", "--set", "data.embeddings=null",
        "--set", "model.encoder=lstm", "--set", "train.max_steps=10"]
TRAIN_LINES, TEST_LINES = 40, 4  # per staged file: the whole test split would take minutes to score on CPU


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def logic_run(tmp_path_factory, staged):
    """A run trained on the first lines of every staged logic file (train0-6; test0-12 all kept as
    groups), prepared without annotation or vectors: quick to train and to score."""
    base = tmp_path_factory.mktemp("grouped")
    folder = base / "data" / "logic_inference"
    folder.mkdir(parents=True)
    for kind, last, n_lines in (("train", TRAIN_MAX_OPS, TRAIN_LINES), ("test", TEST_MAX_OPS, TEST_LINES)):
        for n in range(last + 1):
            with gzip.open(staged(f"logic_inference/{kind}{n}.gz"), "rt", encoding="utf-8") as handle:
                lines = [line for _, line in zip(range(n_lines), handle)]
            with gzip.open(folder / f"{kind}{n}.gz", "wt", encoding="utf-8") as handle:
                handle.writelines(lines)
    prepared = base / "logic"
    prepare(PrepareSettings(task="logic", data=base / "data", out=prepared, annotator="none"))
    run = base / "run"
    result = invoke("train", "--task", "logic", "--prepared", prepared, "--run-dir", run, "--device", "cpu", *TINY)
    assert result.exit_code == 0, result.output
    return run, folder


def table_rows(output: str) -> dict[str, str]:
    """``{group: row text}`` of the ``by`` table (rich box rows start with a vertical bar)."""
    rows = [line.strip("│ ").split("│") for line in output.splitlines() if line.startswith("│")]
    return {cells[0].strip(): "│".join(cells) for cells in rows}


def test_evaluate_by_n_ops_marks_lengths_unseen_in_training(logic_run, tmp_path):
    run, _ = logic_run
    figure = tmp_path / "n_ops.png"
    result = invoke("evaluate", run, "--split", "test", "--by", "n_ops", "--plot", figure, "--device", "cpu")
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stderr)
    assert list(rows) == [str(n) for n in range(TEST_MAX_OPS + 1)]  # numeric order: 0 .. 12
    assert all(("unseen in training" in rows[str(n)]) == (n > TRAIN_MAX_OPS) for n in range(TEST_MAX_OPS + 1))
    line = json.loads(result.stdout.strip().splitlines()[-1])
    groups = line["by"]["groups"]
    assert line["by"]["field"] == "n_ops" and sum(g["items"] for g in groups) == 13 * TEST_LINES
    assert [g["unseen_in_training"] for g in groups] == [n > TRAIN_MAX_OPS for n in range(TEST_MAX_OPS + 1)]
    # the groups' scores add up to the overall one (accuracy weighted by items)
    assert sum(g["score"] * g["items"] for g in groups) / (13 * TEST_LINES) == pytest.approx(line["score"], abs=0.01)
    assert figure.read_bytes()[:4] == b"\x89PNG"


def test_evaluate_file_by_n_ops_takes_the_reader_meta(logic_run, tmp_path):
    run, folder = logic_run
    sample = tmp_path / "sample.tsv"
    with gzip.open(folder / "test2.gz", "rt") as two, gzip.open(folder / "test9.gz", "rt") as nine:
        sample.write_text(two.read() + nine.read())
    result = invoke("evaluate", run, "--file", sample, "--by", "n_ops", "--device", "cpu")
    assert result.exit_code == 0, result.output
    groups = json.loads(result.stdout.strip().splitlines()[-1])["by"]["groups"]
    assert [(g["group"], g["items"], g["unseen_in_training"]) for g in groups] == [
        ("2", TEST_LINES, False), ("9", TEST_LINES, True)]


def test_evaluate_by_an_unknown_field(logic_run):
    run, _ = logic_run
    result = invoke("evaluate", run, "--split", "test", "--by", "depth", "--device", "cpu")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.strip().splitlines() == [
        "error: --by depth: no item has this field; the items have: n_ops, n_ops_pair, length, source"]
