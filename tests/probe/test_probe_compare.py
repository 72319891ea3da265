"""``cn3 compare-probes``: paired tests between probe records, on hand-made records with known answers
(the pooled paired test equals :func:`cn3.stats.paired_test` on the concatenated items; Welch and
Holm as :mod:`cn3.stats` computes them), and the command's table, JSON and errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cli.main import app
from cn3.config import ConfigError
from cn3.probe.compare import compare_probes, probe_side
from cn3.stats import holm, paired_test, welch
from tests.nmt.test_nmt_cli import assert_clean_error

runner = CliRunner()
GOLD = {"probe_sentlen": list("abcabcabcabcabcabcab"), "probe_tense": list("xyxyxyxyxyxyxyxyxyxy")}


def record(correct: dict[str, int], features=("encoder",), predictions: bool = True) -> dict:
    """A probe record whose classifier gets the first ``correct[task]`` test items right and the rest wrong."""
    tasks = []
    for name, gold in GOLD.items():
        pred = gold[:correct[name]] + ["?"] * (len(gold) - correct[name])
        fit = {"test_accuracy": correct[name] / len(gold)}
        if predictions:
            fit["test_predictions"] = pred
        task = {"task": name, "group": "surface" if name == "probe_sentlen" else "semantic",
                "features": {f: dict(fit) for f in features}}
        if predictions:
            task["test_gold"] = gold
        tasks.append(task)
    return {"feature_sets": {f: "" for f in features}, "tasks": tasks}


def write(tmp_path, name: str, rec: dict):
    (tmp_path / name).mkdir()
    (tmp_path / name / "probe.json").write_text(json.dumps(rec))
    return tmp_path / name


def test_matched_probes_are_pooled_and_tested_per_task(tmp_path):
    a = [write(tmp_path, "a1", record({"probe_sentlen": 18, "probe_tense": 10})),
         write(tmp_path, "a2", record({"probe_sentlen": 16, "probe_tense": 11}))]
    b = [write(tmp_path, "b1", record({"probe_sentlen": 9, "probe_tense": 10})),
         write(tmp_path, "b2", record({"probe_sentlen": 7, "probe_tense": 12}))]
    result = compare_probes(probe_side(a, None), probe_side(b, None), resamples=2000)
    sentlen, tense = result["tasks"]
    assert sentlen["a"] == [90.0, 80.0] and sentlen["mean_b"] == pytest.approx(40.0)
    gold = GOLD["probe_sentlen"] * 2
    pred_a = record({"probe_sentlen": 18, "probe_tense": 0})["tasks"][0]["features"]["encoder"]["test_predictions"] \
        + record({"probe_sentlen": 16, "probe_tense": 0})["tasks"][0]["features"]["encoder"]["test_predictions"]
    pred_b = GOLD["probe_sentlen"][:9] + ["?"] * 11 + GOLD["probe_sentlen"][:7] + ["?"] * 13
    expected = paired_test(gold, pred_a, pred_b, "accuracy", resamples=2000)
    assert sentlen["paired"]["items"] == 40 and sentlen["paired"]["pairs"] == [1, 2]
    assert sentlen["paired"]["difference"] == pytest.approx(45.0) == pytest.approx(expected.difference)
    assert sentlen["paired"]["p"] == expected.p_value < 0.01
    assert sentlen["welch_p"] == pytest.approx(welch([90, 80], [45, 35]).p)
    ps = [sentlen["paired"]["p"], tense["paired"]["p"]]
    assert [sentlen["paired"]["p_holm"], tense["paired"]["p_holm"]] == holm(ps)
    assert tense["paired"]["difference"] == pytest.approx(-2.5) and tense["paired"]["p"] > 0.5


def test_old_probes_without_predictions_count_for_welch_only(tmp_path):
    a = [write(tmp_path, "a1", record({"probe_sentlen": 18, "probe_tense": 10}, predictions=False)),
         write(tmp_path, "a2", record({"probe_sentlen": 16, "probe_tense": 11}))]
    b = [write(tmp_path, "b1", record({"probe_sentlen": 9, "probe_tense": 10})),
         write(tmp_path, "b2", record({"probe_sentlen": 7, "probe_tense": 12}))]
    sentlen = compare_probes(probe_side(a, None), probe_side(b, None), resamples=500)["tasks"][0]
    assert sentlen["paired"]["pairs"] == [2] and sentlen["paired"]["items"] == 20
    assert sentlen["paired"]["difference"] == pytest.approx(45.0)
    assert "welch_p" in sentlen and sentlen["mean_a"] == pytest.approx(85.0)
    old = write(tmp_path, "old", record({"probe_sentlen": 18, "probe_tense": 10}, predictions=False))
    result = runner.invoke(app, ["compare-probes", str(old), "-b", str(b[0]), "--resamples", "100"])
    assert result.exit_code == 0 and "no pair of probes kept per-item predictions" in result.output


def test_two_feature_sets_of_the_same_probe(tmp_path):
    rec = record({"probe_sentlen": 15, "probe_tense": 10}, features=("H_onlstm", "H_san"))
    rec["tasks"][0]["features"]["H_san"]["test_predictions"] = GOLD["probe_sentlen"][:5] + ["?"] * 15
    path = write(tmp_path, "p", rec)
    result = compare_probes(probe_side([path], "H_onlstm"), probe_side([path], "H_san"), resamples=500)
    assert result["tasks"][0]["paired"]["difference"] == pytest.approx(50.0)
    assert "welch_p" not in result["tasks"][0]  # one run per side
    with pytest.raises(ConfigError, match="nothing to compare"):
        compare_probes(probe_side([path], "H_san"), probe_side([path], "H_san"))
    with pytest.raises(ConfigError, match="no feature set 'encoder'"):
        probe_side([path], "encoder")


def test_mismatched_probes_are_refused(tmp_path):
    a = write(tmp_path, "a", record({"probe_sentlen": 18, "probe_tense": 10}))
    other = record({"probe_sentlen": 9, "probe_tense": 10})
    other["tasks"][1]["test_gold"] = list(reversed(GOLD["probe_tense"]))
    b = write(tmp_path, "b", other)
    with pytest.raises(ConfigError, match="probe_tense: .* scored different test items"):
        compare_probes(probe_side([a], None), probe_side([b], None))
    with pytest.raises(ConfigError, match="A has 2 probes and B 1"):
        compare_probes(probe_side([a, a], None), probe_side([b], None))


def test_compare_probes_command(tmp_path):
    a = write(tmp_path, "a", record({"probe_sentlen": 18, "probe_tense": 10}))
    b = write(tmp_path, "b", record({"probe_sentlen": 9, "probe_tense": 10}))
    result = runner.invoke(app, ["compare-probes", str(a), "-b", str(b), "--resamples", "500",
                                 "--out", str(tmp_path / "out.json")])
    assert result.exit_code == 0, result.output
    assert "sentlen" in result.output and "+45.0" in result.output and "Holm" in result.output
    saved = json.loads((tmp_path / "out.json").read_text())
    assert saved["tasks"][0]["paired"]["difference"] == pytest.approx(45.0)
    assert_clean_error(runner.invoke(app, ["compare-probes", str(tmp_path / "nope"), "-b", str(b)]),
                       "no probe.json")
    (tmp_path / "bad.json").write_text("{")
    assert_clean_error(runner.invoke(app, ["compare-probes", str(tmp_path / "bad.json"), "-b", str(b)]),
                       "not a readable probe record")
