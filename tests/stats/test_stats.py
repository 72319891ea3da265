"""cn3.stats against known values: brute-force randomization, textbook t-tests, hand-adjusted p-values,
sacreBLEU's own figures, deepsig's documented example, and the predictions contract."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest

from cn3.config import ConfigError
from cn3.metrics import score
from cn3.runs.records import load_predictions
from cn3.stats import PairedResult, aso, bleu_paired_test, bonferroni, check_paired, compare, holm, paired_test, welch
from cn3.util.errors import RunError

# Ten items: A right on 8, B on 4. A alone is right on items 0-4, B alone on item 9; both are right on
# 5-7, and wrong on item 8 with different labels, which changes no score.
GOLD = list("aabbccaabb")
PRED_A = list("aabbccaaca")
PRED_B = list("ccaaacaaab")

# Ten BIOES sentences: A and B tag sentences 0-5 differently; in sentence 5 both miss the one span in
# different ways (the same counts: no true positive, one predicted span, one gold); sentences 6-9 they
# tag alike (the last wrongly).
TAGS_GOLD = [["B-PER", "E-PER", "O", "S-LOC"], ["S-ORG", "O"], ["B-LOC", "I-LOC", "E-LOC"], ["O", "S-PER", "O"],
             ["S-MISC", "S-MISC"], ["S-PER", "O"], ["O", "O"], ["S-LOC"], ["B-ORG", "E-ORG"], ["S-PER", "S-LOC"]]
TAGS_A = [["B-PER", "E-PER", "O", "S-LOC"], ["S-ORG", "O"], ["B-LOC", "E-LOC", "O"], ["O", "S-PER", "O"],
          ["S-MISC", "O"], ["S-LOC", "O"], ["O", "O"], ["S-LOC"], ["B-ORG", "E-ORG"], ["S-PER", "S-PER"]]
TAGS_B = [["S-PER", "O", "O", "S-LOC"], ["S-LOC", "O"], ["B-LOC", "I-LOC", "E-LOC"], ["O", "O", "S-PER"],
          ["S-MISC", "S-MISC"], ["O", "S-PER"], ["O", "O"], ["S-LOC"], ["B-ORG", "E-ORG"], ["S-PER", "S-PER"]]

REFS = ["The cat sat on the mat .", "A dog barked loudly at night .", "He reads books every day .",
        "It is raining today .", "We will meet at the station tomorrow .", "She plays the piano very well ."]
HYPS_A = ["The cat sat on a mat .", "A dog barked at night .", "He reads books every day .", "It rains today .",
          "We meet at the station tomorrow .", "She plays piano very well ."]
HYPS_B = ["A cat is on the mat .", "The dog was barking .", "He read a book .", "It is raining today .",
          "We will see us at station .", "She is playing the piano ."]


def brute_force_p(gold, pred_a, pred_b, metric_score) -> float:
    """Exact two-sided randomization p: over every subset of items whose A and B predictions are swapped,
    the share whose |score(A') - score(B')| reaches the observed |difference|."""
    observed = abs(metric_score(gold, pred_a) - metric_score(gold, pred_b))
    hits = 0
    subsets = list(itertools.product((False, True), repeat=len(gold)))
    for swap in subsets:
        a = [pb if s else pa for s, pa, pb in zip(swap, pred_a, pred_b)]
        b = [pa if s else pb for s, pa, pb in zip(swap, pred_a, pred_b)]
        # 1e-9 points absorbs float noise between equal F1s reached by different sums.
        hits += abs(metric_score(gold, a) - metric_score(gold, b)) >= observed - 1e-9
    return hits / len(subsets)


def accuracy_points(gold, pred) -> float:
    return score("graph", None, gold, pred)["score"]


def test_exact_randomization_on_accuracy_equals_brute_force():
    result = paired_test(GOLD, PRED_A, PRED_B, "accuracy")
    assert (result.score_a, result.score_b) == (80.0, 40.0)  # cn3.metrics' figures
    assert result.difference == pytest.approx(40.0)
    # Six items scored differently, five for A: the swapped difference is 10 points times a sum of six
    # signs; |sum| >= 4 for 2 * (C(6,0) + C(6,1)) = 14 of the 2**6 sign patterns.
    assert result.method == "exact randomization" and result.resamples == 2 ** 6 and result.items_differ == 6
    assert result.p_value == pytest.approx(14 / 64)
    assert result.p_value == pytest.approx(brute_force_p(GOLD, PRED_A, PRED_B, accuracy_points))


def test_exact_randomization_on_span_f1_equals_brute_force():
    from functools import lru_cache

    @lru_cache(maxsize=None)
    def f1(pred: tuple) -> float:  # cn3's span F1, once per distinct prediction (1,024 subsets, 64 distinct)
        return score("node", "BIOES", TAGS_GOLD, [list(tags) for tags in pred])["score"]

    def f1_points(gold, pred) -> float:
        return f1(tuple(tuple(tags) for tags in pred))

    result = paired_test(TAGS_GOLD, TAGS_A, TAGS_B, "span_f1", tag_scheme="BIOES")
    assert result.score_a == pytest.approx(f1_points(TAGS_GOLD, TAGS_A), abs=1e-9)
    assert result.score_b == pytest.approx(f1_points(TAGS_GOLD, TAGS_B), abs=1e-9)
    assert result.method == "exact randomization" and result.items_differ == 5  # sentence 5: same counts
    assert result.p_value == pytest.approx(brute_force_p(TAGS_GOLD, TAGS_A, TAGS_B, f1_points))
    assert 0 < result.p_value < 1


def test_approximate_randomization_is_near_the_exact_p():
    # Fourteen items, A alone right on 11, B alone on 3: the swapped difference is a sum of 14 signs,
    # observed 11 - 3 = 8; |sum| >= 8 for 2 * (C(14,0) + C(14,1) + C(14,2) + C(14,3)) = 940 of 2**14.
    gold, pred_a, pred_b = [0] * 14, [0] * 11 + [1] * 3, [1] * 11 + [0] * 3
    exact = 940 / 2 ** 14
    result = paired_test(gold, pred_a, pred_b, "accuracy", resamples=4000)
    assert result.method == "approximate randomization" and result.resamples == 4000  # 2**14 > 4000
    assert abs(result.p_value - exact) < 4 * np.sqrt(exact * (1 - exact) / 4000)


def test_identical_systems_differ_by_zero_with_p_one():
    for gold, pred, metric, scheme in ((GOLD, PRED_A, "accuracy", None), (TAGS_GOLD, TAGS_A, "span_f1", "BIOES"),
                                       (TAGS_GOLD, TAGS_B, "token_accuracy", None)):
        result = paired_test(gold, pred, pred, metric, tag_scheme=scheme)
        assert result.difference == 0 and result.p_value == 1.0 and result.items_differ == 0
        assert result.ci_low == result.ci_high == 0
    long = paired_test(GOLD * 30, PRED_B * 30, PRED_B * 30, "accuracy")  # 300 items: not enumerable
    assert long.difference == 0 and long.p_value == 1.0


def test_one_differing_item_has_p_one():
    """Two swaps, the observed difference and its negation: both reach it (a group of few items in
    `report --by` meets this)."""
    gold, pred_a, pred_b = ["a", "b", "c", "d"], ["a", "b", "c", "d"], ["a", "b", "c", "x"]
    result = paired_test(gold, pred_a, pred_b, "accuracy")
    assert (result.difference, result.p_value, result.items_differ) == (25.0, 1.0, 1)
    assert result.method == "exact randomization" and result.resamples == 2
    assert result.p_value == brute_force_p(gold, pred_a, pred_b, accuracy_points)


def test_token_accuracy_as_cn3_scores_it():
    result = paired_test(TAGS_GOLD, TAGS_A, TAGS_B, "token_accuracy")
    assert result.score_a == pytest.approx(score("node", None, TAGS_GOLD, TAGS_A)["score"])
    assert result.score_b == pytest.approx(score("node", None, TAGS_GOLD, TAGS_B)["score"])


def test_bootstrap_interval_contains_the_difference_and_is_reproducible():
    rng = np.random.default_rng(3)
    gold = rng.integers(0, 4, 400).tolist()
    pred_a = [g if r < 0.85 else 0 for g, r in zip(gold, rng.random(400))]
    pred_b = [g if r < 0.75 else 0 for g, r in zip(gold, rng.random(400))]
    first = paired_test(gold, pred_a, pred_b, "accuracy", resamples=2000, seed=5)
    assert first.ci_low < first.difference < first.ci_high
    assert first == paired_test(gold, pred_a, pred_b, "accuracy", resamples=2000, seed=5)
    other = paired_test(gold, pred_a, pred_b, "accuracy", resamples=2000, seed=6)
    assert (other.ci_low, other.ci_high, other.p_value) != (first.ci_low, first.ci_high, first.p_value)


def test_pooled_seeds_score_the_concatenation():
    # Two matched seeds: their items concatenated; pooled accuracy is the mean of the seeds' accuracies.
    result = paired_test(GOLD + GOLD, PRED_A + PRED_B, PRED_B + PRED_B, "accuracy")
    assert result.n_items == 20 and result.score_a == pytest.approx((80 + 40) / 2)


def test_paired_test_refuses_what_it_cannot_score():
    with pytest.raises(ValueError, match="bleu_paired_test"):
        paired_test(REFS, HYPS_A, HYPS_B, "bleu")
    with pytest.raises(ValueError, match="tag scheme"):
        paired_test(TAGS_GOLD, TAGS_A, TAGS_B, "span_f1")
    with pytest.raises(ValueError, match="not paired"):
        paired_test(GOLD, PRED_A, PRED_B[:-1], "accuracy")
    with pytest.raises(ValueError, match="at least 2 items"):
        paired_test(GOLD[:1], PRED_A[:1], PRED_B[:1], "accuracy")


def test_sentence_in_words():
    result = PairedResult(metric="accuracy", n_items=500, items_differ=40, score_a=94.87, score_b=94.67,
                          difference=0.2, ci_low=-0.8, ci_high=1.2, p_value=0.71,
                          method="approximate randomization", resamples=10_000)
    assert result.sentence("test") == (
        "A scores 94.87 and B 94.67 accuracy on 500 test items: A - B = +0.20 points (95% CI -0.80 to +1.20); "
        "paired approximate randomization (10,000 trials): p = 0.71, not significant at 0.05.")
    exact = paired_test(GOLD, PRED_A, PRED_B, "accuracy").sentence()
    assert "on 10 items" in exact and "(all 64 swaps of the 6 items A and B score differently): p = 0.22," in exact


def test_bleu_paired_test_gives_sacrebleus_own_figures(monkeypatch):
    from sacrebleu import corpus_bleu
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    monkeypatch.delenv("SACREBLEU_SEED", raising=False)  # sacreBLEU's default seed, 12345
    for test in ("ar", "bs"):
        _, direct = PairedTest([("B", HYPS_B), ("A", HYPS_A)], {"BLEU": BLEU()}, [REFS], test_type=test)()
        result = bleu_paired_test(REFS, HYPS_A, HYPS_B, test=test)
        assert result.score_a == corpus_bleu(HYPS_A, [REFS]).score
        assert result.score_b == corpus_bleu(HYPS_B, [REFS]).score
        assert result.p_value == direct["BLEU"][1].p_value
        assert result.resamples == {"ar": 10_000, "bs": 1_000}[test]
        assert result.ci_low <= result.difference <= result.ci_high
    assert "SACREBLEU_SEED" not in os.environ  # the seed was set for the call only


def test_bleu_of_identical_systems_has_p_one():
    result = bleu_paired_test(REFS, HYPS_A, HYPS_A, resamples=1000)
    assert result.difference == 0 and result.p_value == 1.0 and result.items_differ == 0
    with pytest.raises(ValueError, match="positive seed"):
        bleu_paired_test(REFS, HYPS_A, HYPS_B, seed=0)


def test_welch_on_known_values():
    # Wikipedia, "Welch's t-test", example 1: t = -2.46, nu = 24.99, p = 0.021.
    a1 = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
    a2 = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]
    result = welch(a1, a2)
    assert (round(result.t, 2), round(result.df, 2), round(result.p, 3)) == (-2.46, 24.99, 0.021)
    # By hand: A = (1, 3), B = (4, 6): variances 2 and 2, t = -3 / sqrt(2/2 + 2/2) = -3/sqrt(2), and
    # Welch's df = (1 + 1)^2 / (1^2/1 + 1^2/1) = 2, where P(|T| > t) = 1 - t / sqrt(2 + t^2) = 1 - 3/sqrt(13).
    t, p, df, reason = welch([1, 3], [4, 6])
    assert (t, df, reason) == (pytest.approx(-3 / np.sqrt(2)), pytest.approx(2.0), None)
    assert p == pytest.approx(1 - 3 / np.sqrt(13)) == pytest.approx(0.16795, abs=1e-5)


def test_welch_with_one_constant_side_is_quiet_and_exact():
    """Two seeds stuck at the majority class (56.87 twice) against 70 and 72: B's variance 2 alone,
    t = (56.87 - 71) / sqrt(2/2) = -14.13 on Welch's df 1; and no warning from scipy."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t, p, df, reason = welch([56.87, 56.87], [70.0, 72.0])
    assert (t, df, reason) == (pytest.approx(56.87 - 71.0), pytest.approx(1.0), None)
    assert p == pytest.approx(2 * (0.5 - np.arctan(14.13) / np.pi))  # Student's t with 1 df is Cauchy


def test_welch_says_why_it_cannot_run():
    one = welch([80.1], [79.0, 79.5])
    assert one.t is None and one.p is None and "at least 2 scores per side (A has 1, B has 2)" in one.reason
    flat = welch([80.0, 80.0], [79.0, 79.0])
    assert flat.p is None and "no variance" in flat.reason


def test_holm_and_bonferroni_by_hand():
    pvalues = [0.01, 0.04, 0.03, 0.005]
    # Bonferroni: each times m = 4.
    assert bonferroni(pvalues) == pytest.approx([0.04, 0.16, 0.12, 0.02])
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04; running maximum
    # 0.02, 0.03, 0.06, 0.06; back in the given order:
    assert holm(pvalues) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # Capped at 1: sorted 0.4, 0.5 times 2, 1 = 0.8, 0.5; running maximum 0.8, 0.8.
    assert holm([0.5, 0.4]) == pytest.approx([0.8, 0.8]) and bonferroni([0.5, 0.4]) == pytest.approx([1.0, 0.8])
    assert holm([0.2]) == [0.2] and holm([]) == []
    with pytest.raises(ValueError):
        holm([0.2, 1.5])


def test_aso_reproduces_deepsigs_documented_example():
    # deepsig's README, "Scenario 1": min_eps = 0.225 with 1,000 bootstrap iterations; 150 keep the test
    # fast and land within 0.01 of it. (Importing deepsig imports torch, when installed, for its tensor
    # conversions: most of this test's time on a fresh interpreter.)
    state = np.random.RandomState(1234)
    a, b = state.normal(0.9, 0.8, 5), state.normal(0, 1, 5)
    before = np.random.get_state()[1].copy()
    assert aso(a, b, seed=1234, bootstrap_iterations=150) == pytest.approx(0.225, abs=0.01)
    assert np.array_equal(np.random.get_state()[1], before)  # numpy's global generator untouched
    reverse = aso(b, a, seed=3, bootstrap_iterations=30)
    assert reverse > 0.5 and reverse == aso(b, a, seed=3, bootstrap_iterations=30)  # same seed, same result
    assert aso([10, 11, 12, 13, 14], [1, 2, 3, 4, 5], bootstrap_iterations=30) == 0.0  # A better everywhere


# ---------------------------------------------------------------------------------------------------
# The predictions contract.


def write_run(path: Path, split: str, gold: list, pred: list, metric: str, tag_scheme: str | None = None,
              task: str = "trec") -> Path:
    """A run directory as cn3 0.3 leaves it: results.json's "predictions" entry and the JSONL file."""
    (path / "predictions").mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"i": i, "gold": g, "pred": p}) for i, (g, p) in enumerate(zip(gold, pred))]
    (path / "predictions" / f"{split}.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    entry = {"path": f"predictions/{split}.jsonl", "items": len(lines), "metric": metric, "tag_scheme": tag_scheme,
             "task": task}
    results = path / "results.json"
    old = json.loads(results.read_text()) if results.exists() else {"scores": {}, "predictions": {}}
    old["predictions"][split] = entry
    results.write_text(json.dumps(old))
    return path


def test_load_predictions_and_compare(tmp_path):
    a = load_predictions(write_run(tmp_path / "a", "test", TAGS_GOLD, TAGS_A, "span_f1", "BIOES", "conll2003"), "test")
    b = load_predictions(write_run(tmp_path / "b", "test", TAGS_GOLD, TAGS_B, "span_f1", "BIOES", "conll2003"), "test")
    assert (a.metric, a.tag_scheme, a.task, a.gold, a.pred) == ("span_f1", "BIOES", "conll2003", TAGS_GOLD, TAGS_A)
    assert compare(a, b) == paired_test(TAGS_GOLD, TAGS_A, TAGS_B, "span_f1", tag_scheme="BIOES")
    c = load_predictions(write_run(tmp_path / "c", "test", GOLD[:9] + ["c"], PRED_A, "accuracy"), "test")
    d = load_predictions(write_run(tmp_path / "d", "test", GOLD, PRED_B, "accuracy"), "test")
    with pytest.raises(ConfigError, match="not scored on the same test items: item 9"):
        check_paired(c, d)


@pytest.mark.parametrize("metric,tag_scheme,gold,pred", [
    ("accuracy", None, GOLD, PRED_A),
    ("span_f1", "BIOES", TAGS_GOLD, TAGS_A),
    ("bleu", None, ["Ein Mann läuft.", "Zwei Hunde."], ["Ein Mann geht.", ""]),
])
def test_predictions_are_written_as_ids_in_xz_and_read_back(tmp_path, metric, tag_scheme, gold, pred):
    """RunDir writes one xz-compressed JSON per split (labels and tags as ids into a table, sentences as
    they are), the same bytes for the same predictions; a rerun replaces an earlier version's JSONL."""
    import lzma

    from cn3.runs.layout import RunDir
    from cn3.runs.records import PREDICTIONS_FORMAT

    run = RunDir(tmp_path / "run")
    run.predictions.mkdir(parents=True)
    (run.predictions / "test.jsonl.gz").write_bytes(b"left by cn3 0.9")
    entry = run.write_predictions("test", gold, pred, metric, tag_scheme, "task")
    assert entry == {"path": "predictions/test.json.xz", "items": len(gold), "metric": metric,
                     "tag_scheme": tag_scheme, "task": "task"}
    assert [p.name for p in run.predictions.iterdir()] == ["test.json.xz"]
    path = run.path / entry["path"]
    first = path.read_bytes()
    payload = json.loads(lzma.decompress(first))
    assert payload["format"] == PREDICTIONS_FORMAT
    if metric != "bleu":
        assert all(isinstance(i, int) for i in payload["gold"] + payload["pred"])
    run.write_predictions("test", gold, pred, metric, tag_scheme, "task")
    assert path.read_bytes() == first
    (run.path / "results.json").write_text(json.dumps({"scores": {}, "predictions": {"test": entry}}))
    back = load_predictions(run.path, "test")
    assert (back.gold, back.pred, back.metric, back.tag_scheme) == (gold, pred, metric, tag_scheme)


def test_a_large_split_stays_small(tmp_path):
    """The point of ids: SNLI's 9,824 test pairs in about 2 KB (the JSONL of cn3 0.9 took 560 KB)."""
    from cn3.runs.layout import RunDir

    labels = ["entailment", "neutral", "contradiction"]
    rng = np.random.default_rng(0)
    gold = [labels[i] for i in rng.integers(0, 3, 9_824)]
    pred = [g if rng.random() < 0.8 else labels[i] for g, i in zip(gold, rng.integers(0, 3, 9_824))]
    entry = RunDir(tmp_path).write_predictions("test", gold, pred, "accuracy", None, "snli")
    assert (tmp_path / entry["path"]).stat().st_size < 4_000


@pytest.mark.parametrize("change,message", [
    (lambda p: p.update(format="cn3.predictions/9"), "not a cn3 predictions file"),
    (lambda p: p.update(kind="tags"), "holds 'tags' predictions, but its metric scores labels"),
    (lambda p: p["pred"].pop(), '"gold" and "pred" must be lists of one length'),
    (lambda p: p["pred"].__setitem__(0, 99), '"gold" and "pred" must be ids into "labels"'),
])
def test_a_bad_predictions_file_names_itself(tmp_path, change, message):
    import lzma

    from cn3.runs.layout import RunDir

    run = RunDir(tmp_path / "run")
    entry = run.write_predictions("test", GOLD, PRED_A, "accuracy", None, "trec")
    (run.path / "results.json").write_text(json.dumps({"scores": {}, "predictions": {"test": entry}}))
    path = run.path / entry["path"]
    payload = json.loads(lzma.decompress(path.read_bytes()))
    change(payload)
    path.write_bytes(lzma.compress(json.dumps(payload).encode()))
    with pytest.raises(RunError) as err:
        load_predictions(run.path, "test")
    assert str(path) in str(err.value) and message in str(err.value)
    path.write_bytes(b"not xz")
    with pytest.raises(RunError, match="not xz-compressed JSON"):
        load_predictions(run.path, "test")


def test_load_predictions_names_what_is_missing(tmp_path):
    with pytest.raises(RunError, match="run directory not found"):
        load_predictions(tmp_path / "nowhere", "test")
    old = tmp_path / "old"
    old.mkdir()
    with pytest.raises(RunError, match="has no results.json"):
        load_predictions(old, "test")
    (old / "results.json").write_text(json.dumps({"scores": {"test": {"metric": "accuracy", "score": 90.0}}}))
    with pytest.raises(RunError, match="has no predictions for test: it was trained before cn3 0.3 or the split "
                                          "was not scored"):
        load_predictions(old, "test")
    run = write_run(tmp_path / "run", "dev", GOLD, PRED_A, "accuracy")
    with pytest.raises(RunError, match=r"no predictions for test: .*\(it has predictions for: dev\)"):
        load_predictions(run, "test")
    (run / "predictions" / "dev.jsonl").unlink()
    with pytest.raises(RunError, match=r"no predictions for dev: .*dev\.jsonl is missing"):
        load_predictions(run, "dev")


@pytest.mark.parametrize("line,message", [
    ("{not json", "line 3: not JSON"),
    ('{"i": 2, "gold": "a"}', 'line 3: expected an object with "i", "gold" and "pred"'),
    ('{"i": 5, "gold": "a", "pred": "b"}', "line 3: item 5, expected 2"),
    ('{"i": 2, "gold": "a", "pred": ["b"]}', "line 3: gold and pred must be strings"),
])
def test_load_predictions_names_the_bad_line(tmp_path, line, message):
    run = write_run(tmp_path / "run", "test", GOLD, PRED_A, "accuracy")
    path = run / "predictions" / "test.jsonl"
    lines = path.read_text().splitlines()
    lines[2] = line
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RunError) as err:
        load_predictions(run, "test")
    assert str(path) in str(err.value) and message in str(err.value)


def test_load_predictions_checks_the_item_count_and_tags(tmp_path):
    run = write_run(tmp_path / "run", "test", GOLD, PRED_A, "accuracy")
    results = json.loads((run / "results.json").read_text())
    results["predictions"]["test"]["items"] = 11
    (run / "results.json").write_text(json.dumps(results))
    with pytest.raises(RunError, match="10 items, but .*results.json says 11"):
        load_predictions(run, "test")
    tagged = write_run(tmp_path / "tagged", "test", TAGS_GOLD, [t[:-1] for t in TAGS_A], "span_f1", "BIOES")
    with pytest.raises(RunError, match="line 1: 4 gold tags but 3 predicted"):
        load_predictions(tagged, "test")


# ---------------------------------------------------------------- what a comparison could detect


def test_t_test_power_is_the_textbook_figure():
    """R's power.t.test(n = 64, delta = 0.5, sd = 1) gives 0.8014596 (Cohen 1988: 64 a side for d = 0.5)."""
    from cn3.stats import t_test_power

    assert t_test_power(0.5, 1.0, 64, 64) == pytest.approx(0.8014596, abs=1e-6)
    assert t_test_power(0.0, 1.0, 5, 5) == pytest.approx(0.05, abs=1e-9)  # no difference: the level


def test_welch_power_agrees_with_brute_force_simulation():
    """Welch's test with 2-6 runs a side, equal and unequal sides: the quadrature against 100,000
    simulated experiments of scipy's own Welch test; with many runs it is the pooled test's power."""
    from scipy import stats

    from cn3.stats import detectable_welch, t_test_power, welch_power

    rng = np.random.default_rng(0)
    for n_a, n_b, delta in ((2, 2, 6.0), (3, 3, 3.0), (2, 4, 2.0), (6, 6, 1.8)):
        a, b = rng.normal(delta, 1.0, (100_000, n_a)), rng.normal(0.0, 1.0, (100_000, n_b))
        simulated = (stats.ttest_ind(a, b, axis=1, equal_var=False).pvalue < 0.05).mean()
        assert welch_power(delta, 1.0, n_a, n_b) == pytest.approx(simulated, abs=0.005)
    assert welch_power(0.5, 1.0, 64, 64) == pytest.approx(t_test_power(0.5, 1.0, 64, 64), abs=0.001)
    # the detectable difference: power 0.8 there, scaling with the spread
    d = detectable_welch(0.7, 3, 3)
    assert welch_power(d, 0.7, 3, 3) == pytest.approx(0.8, abs=1e-6)
    assert d == pytest.approx(0.7 * detectable_welch(1.0, 3, 3), rel=1e-6)
    assert detectable_welch(1.0, 2, 2) > detectable_welch(1.0, 3, 3) > detectable_welch(1.0, 6, 6) > 1.0
    assert detectable_welch(None, 3, 3) is None and detectable_welch(0.0, 3, 3) is None
    assert detectable_welch(1.0, 1, 3) is None


def test_detectable_across_seeds_pools_the_two_spreads():
    from cn3.stats import detectable_across_seeds, detectable_welch, pooled_std

    a, b = [1.0, 2.0, 3.0], [2.0, 2.0, 2.0, 6.0]  # variances 1 and 4
    assert pooled_std(a, b) == pytest.approx(np.sqrt((2 * 1 + 3 * 4) / 5))
    assert detectable_across_seeds(a, b) == pytest.approx(detectable_welch(pooled_std(a, b), 3, 4))
    assert pooled_std([1.0], b) is None and detectable_across_seeds([1.0], b) is None
    assert detectable_across_seeds([2.0, 2.0], [3.0, 3.0]) is None  # no spread at all: nothing to say


def test_detectable_paired_is_2_8_standard_errors_and_has_power_0_8():
    """The normal approximation, and a simulation of paired items (A right or B right) at that difference."""
    from scipy import stats

    from cn3.stats import detectable_paired

    d = np.array([1.0, -1.0] * 50)  # sd 1.005, n 100
    assert detectable_paired(d) == pytest.approx((1.959964 + 0.841621) * d.std(ddof=1) / 10, rel=1e-6)
    assert detectable_paired([1.0]) is None
    # 400 items, each a difference of +100 (A right, B wrong), -100 or 0 points of accuracy
    rng = np.random.default_rng(0)
    p_plus, p_minus = 0.12, 0.08
    sd = np.sqrt((p_plus + p_minus) - (p_plus - p_minus) ** 2) * 100
    delta = detectable_paired(rng.choice([100.0, -100.0, 0.0], size=400, p=[p_plus, p_minus, 1 - p_plus - p_minus]))
    assert delta == pytest.approx(2.801585 * sd / 20, rel=0.1)
    # items whose expected difference is exactly the detectable one: rejected in about 80% of 4,000 trials
    shift = 2.801585 * sd / 20 / 100
    probs = [p_plus + shift / 2 - (p_plus - p_minus) / 2, p_minus - shift / 2 + (p_plus - p_minus) / 2]
    trials = rng.choice([100.0, -100.0, 0.0], size=(4000, 400), p=[*probs, 1 - sum(probs)])
    rejected = (stats.ttest_1samp(trials, 0.0, axis=1).pvalue < 0.05).mean()
    assert rejected == pytest.approx(0.8, abs=0.03)


def test_item_differences_are_exact_for_accuracy_and_give_the_bootstrap_spread_for_span_f1():
    from cn3.stats import paired_differences
    from cn3.stats.counts import SCORES, item_counts

    d = paired_differences(GOLD, PRED_A, PRED_B, "accuracy")
    right_a = np.array([g == p for g, p in zip(GOLD, PRED_A)], dtype=float)
    right_b = np.array([g == p for g, p in zip(GOLD, PRED_B)], dtype=float)
    assert d - d.mean() == pytest.approx(100 * (right_a - right_b) - 100 * (right_a - right_b).mean(), abs=1e-6)
    # span F1 on 300 sentences: the delta method's standard error against the bootstrap's
    rng = np.random.default_rng(1)
    pick = rng.integers(0, len(TAGS_GOLD), 300)
    gold, a, b = ([tags[i] for i in pick] for tags in (TAGS_GOLD, TAGS_A, TAGS_B))
    se = paired_differences(gold, a, b, "span_f1", tag_scheme="BIOES").std(ddof=1) / np.sqrt(300)
    counts_a, counts_b = item_counts("span_f1", "BIOES", gold, a), item_counts("span_f1", "BIOES", gold, b)
    rows = rng.integers(0, 300, (4000, 300))
    boot = SCORES["span_f1"](counts_a[rows].sum(axis=1)) - SCORES["span_f1"](counts_b[rows].sum(axis=1))
    assert se == pytest.approx(boot.std(), rel=0.1)
    # BLEU: sacreBLEU's sentence statistics, the same way
    bleu_d = paired_differences(REFS * 20, HYPS_A * 20, HYPS_B * 20, "bleu")
    assert bleu_d.shape == (len(REFS) * 20,) and np.isfinite(bleu_d).all() and bleu_d.std() > 0


def test_the_smooth_bleu_of_the_per_item_differences_is_sacrebleus():
    from sacrebleu.metrics import BLEU

    from cn3.stats.power import _smooth_bleu, paired_differences

    bleu = BLEU()
    stats_ = np.array(bleu._extract_corpus_statistics(HYPS_A * 20, [REFS * 20]), dtype=float).sum(axis=0)
    assert _smooth_bleu(stats_) == pytest.approx(bleu._compute_score_from_stats(list(stats_)).score, rel=1e-9)
    assert paired_differences(REFS * 20, HYPS_A * 20, HYPS_B * 20, "bleu").mean() == pytest.approx(0.0, abs=1e-3)
