"""cn3.stats.claims and cn3.stats.forest on constructed records: a report whose baseline is either side
of the claim, Holm within a family, the paper's numbers and a sign-only claim, a claim waiting for its
cells, the row as printed, the markers of the page, and the forest plot byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from scipy import stats

from cn3.stats import claims, forest, holm


def report(baseline: str, tests: dict[str, dict], seeds: dict[str, list[float]], paper: dict[str, float]) -> dict:
    rows = []
    for variant, scores in seeds.items():
        mean = sum(scores) / len(scores) if scores else None
        row = {"variant": variant, "task": "trec", "split": "test", "mean": mean,
               "seeds": {str(i + 1): s for i, s in enumerate(scores)}, "paper": paper.get(variant)}
        if variant in tests:
            row["test"] = tests[variant]
        rows.append(row)
    return {"baseline": baseline, "rows": rows}


def paired(difference, low, high, p, n_seeds=3):
    return {"seeds": list(range(1, n_seeds + 1)), "difference": difference, "ci95": [low, high], "p": p,
            "items": 500, "detectable": 0.9}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    seeds = {"lstm": [90.0, 91.0, 90.5], "cn3": [93.0, 94.0, 93.2], "rnn": [90.4, 91.6, 89.9], "tree": []}
    # baseline lstm: cn3 and rnn are tested against it
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "report.json").write_text(json.dumps(report(
        "lstm", {"cn3": paired(2.9, 1.9, 3.9, 0.001), "rnn": paired(0.1, -0.5, 0.7, 0.7)}, seeds,
        {"lstm": 91.3, "cn3": 94.2, "rnn": 90.2})))
    # baseline cn3: lstm against cn3, so "cn3 > lstm" is the test flipped
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "report.json").write_text(json.dumps(report(
        "cn3", {"lstm": paired(-2.9, -3.9, -1.9, 0.001)}, seeds, {"lstm": 91.3, "cn3": 94.2})))
    entries = [
        {"paper": "Liu", "ref": "T3", "claim": "CN3 > LSTM", "family": "f", "report": "a/report.json", "a": "cn3",
         "b": "lstm", "task": "trec", "setup": "s", "command": "A"},
        {"paper": "Liu", "ref": "T3", "claim": "RNN < LSTM", "family": "f", "report": "a/report.json", "a": "rnn",
         "b": "lstm", "task": "trec", "setup": "s", "command": "A"},
        {"paper": "Liu", "ref": "T3", "claim": "CN3 > LSTM, flipped", "family": "g", "report": "b/report.json",
         "a": "cn3", "b": "lstm", "task": "trec", "sign": 1, "setup": "s", "command": "B"},
        {"paper": "Xu", "ref": "T1", "claim": "tree waits", "family": "h", "report": "a/report.json", "a": "tree",
         "b": "lstm", "task": "trec", "effect": 1.0, "setup": "s", "command": "C"},
    ]
    (tmp_path / "claims.yaml").write_text(yaml.safe_dump({"setups": {"s": "small (paper big)"}, "claims": entries}))
    return tmp_path


def test_the_claims_are_read_and_judged(root):
    cn3, rnn, flipped, waiting = claims.judged(root, Path("claims.yaml"))
    assert cn3.paper == pytest.approx(2.9) and cn3.paper_text == "+2.9 (94.2 vs 91.3)"
    assert rnn.paper == pytest.approx(-1.1)
    # Holm within family f at both levels
    assert (cn3.item.p_holm, rnn.item.p_holm) == pytest.approx(tuple(holm([0.001, 0.7])))
    welch_cn3 = stats.ttest_ind([93.0, 94.0, 93.2], [90.0, 91.0, 90.5], equal_var=False).pvalue
    welch_rnn = stats.ttest_ind([90.4, 91.6, 89.9], [90.0, 91.0, 90.5], equal_var=False).pvalue
    assert (cn3.seed.p_holm, rnn.seed.p_holm) == pytest.approx(tuple(holm([welch_cn3, welch_rnn])))
    assert cn3.seed.p_paired == pytest.approx(stats.ttest_rel([93.0, 94.0, 93.2], [90.0, 91.0, 90.5]).pvalue)
    assert cn3.verdict.verdict == "holds"
    assert rnn.verdict.verdict == "does not hold on items"  # -1.1 outside [-0.5, +0.7]; seeds contain it
    # the report's test is lstm - cn3: the claim reads it the other way round
    assert flipped.item.difference == pytest.approx(2.9) and flipped.item.ci == pytest.approx((1.9, 3.9))
    assert flipped.paper is None and flipped.verdict.verdict == "holds"
    assert waiting.verdict.verdict == "waits" and waiting.item is None


def test_the_row_and_the_counts(root):
    block = claims.table(root, Path("claims.yaml"))
    assert block.startswith(claims.BEGIN) and block.endswith(claims.END)
    assert "- Liu et al. 2019 (CN3): 3 sub-claims: 2 holds, 1 does not hold on items" in block
    row = next(line for line in block.splitlines() if "| CN3 > LSTM |" in line)
    assert row.startswith("| Liu T3 | CN3 > LSTM | +2.9 (94.2 vs 91.3) | +2.90 [+1.90, +3.90] · [+")
    assert row.endswith("| 3 | small (paper big) | **holds** | A |")
    assert "| tree waits | +1.00 | waits for its cells | – / – | – | small (paper big) | **waits** | C |" in block
    rnn = next(line for line in block.splitlines() if "RNN < LSTM" in line)
    assert "+0.10 [\u22120.50, +0.70]" in rnn


def test_splice_replaces_between_the_markers_and_names_missing_ones():
    page = f"intro\n{claims.BEGIN}\nold\n{claims.END}\nafter\n"
    new = f"{claims.BEGIN}\nnew\n{claims.END}"
    assert claims.splice(page, new) == f"intro\n{new}\nafter\n"
    with pytest.raises(ValueError, match="markers"):
        claims.splice("no table here", "x")


def test_signed_prints_a_minus_sign_and_no_negative_zero():
    assert [claims.signed(x) for x in (1.234, -0.5, -0.001, 0.0)] == ["+1.23", "\u22120.50", "+0.00", "+0.00"]


def test_the_forest_plot_is_byte_for_byte_and_undated(root, tmp_path):
    judged = claims.judged(root, Path("claims.yaml"))
    one, two = tmp_path / "one.png", tmp_path / "two.png"
    forest.draw(judged, "constructed", one)
    forest.draw(judged, "constructed", two)
    data = one.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data == two.read_bytes()
    assert b"Software" not in data and b"matplotlib" not in data.lower()
    low, high = forest.limits(judged)
    assert low < -1.1 and high > 3.9  # every item interval and paper's effect is in range
