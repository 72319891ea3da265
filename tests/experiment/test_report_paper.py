"""The experiment report sets the paper beside every cell (its number, cn3 - paper, where the grid
differs from it), names a split that selected the checkpoint, and gives, beside a test that found
nothing, the difference it could have found."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from cn3.config import ConfigError
from cn3.experiment.report.collect import TaskColumn
from cn3.experiment.report.render import _p_text, render, rows, split_label
from cn3.experiment.spec import SPEC_DIR, load_spec

TABLES = Path(__file__).resolve().parents[3] / "shared" / "papers" / "tables.md"


def write_spec(path: Path, **fields) -> Path:
    spec = {"name": "tiny", "tasks": ["trec", "sst2"], "baseline": "lstm", "seeds": [1, 2],
            "variants": {"lstm": {"model.encoder": "lstm"}, "cn3": {"model.encoder": "cn3"}}}
    spec.update(fields)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.mark.parametrize("fields, message", [
    ({"references": {"snli": {"lstm": 77.6}}}, "references.snli: not a task of the spec"),
    ({"references": {"trec": {"lstm": "91.3"}}}, "references.trec.lstm: expected a number or null"),
    ({"differs": "50-d GloVe"}, "differs: expected a list of lines of text"),
    ({"budgets": {"cpu": {"differs": [1]}}}, "budgets.cpu.differs: expected a list of lines of text"),
    ({"paper": ["Liu"]}, "paper: expected a line of text"),
])
def test_bad_paper_fields_name_the_key(tmp_path, fields, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_spec(write_spec(tmp_path / "s.yaml", **fields))


def test_every_cell_has_the_paper_beside_it_and_the_differences_under_the_table(tmp_path):
    spec = load_spec(write_spec(tmp_path / "s.yaml", paper="Liu et al. (2019), Table 3",
                                references={"trec": {"lstm": 91.3, "cn3": 94.2}, "sst2": {"cn3": 87.5}},
                                differs=["GloVe 6B 50-d, not 840B 300-d"],
                                budgets={"cpu": {"differs": ["10 epochs"]}}))
    assert spec.differences("cpu") == ["GloVe 6B 50-d, not 840B 300-d", "10 epochs"]
    assert spec.differences(None) == ["GloVe 6B 50-d, not 840B 300-d"]
    assert all(c.budget == "cpu" for c in spec.cells(tmp_path, "cpu"))
    columns = {"trec": TaskColumn("trec", "test", "accuracy", {"lstm": {1: 90.0, 2: 92.0}, "cn3": {1: 93.0, 2: 95.0}}),
               "sst2": TaskColumn("sst2", "dev", "accuracy", {"lstm": {1: 82.0, 2: 83.0}, "cn3": {1: 83.0, 2: 84.0}})}
    md = render(spec, columns, "md", "cpu")
    assert "| trec (accuracy, test) | sst2 (accuracy, dev: selects the checkpoint) |" in md
    assert "| lstm | 91.00 ± 1.41 (2) [91.3, -0.30] | 82.50 ± 0.71 (2) [×] |" in md
    assert "| cn3 | **94.00 ± 1.41 (2)** [94.2, -0.20] | **83.50 ± 0.71 (2)** [87.5, -4.00] |" in md
    assert "Paper: Liu et al. (2019), Table 3." in md
    assert "Differs from the paper:\n- GloVe 6B 50-d, not 840B 300-d\n- 10 epochs" in md
    assert "the paper's numbers are test scores" in md  # a selection split is in the table
    records = {(r["variant"], r["task"]): r for r in rows(spec, columns)}
    assert records["cn3", "trec"]["minus_paper"] == pytest.approx(-0.2)
    assert records["lstm", "sst2"]["minus_paper"] is None and records["lstm", "sst2"]["selects_checkpoint"]
    tex = render(spec, columns, "latex", "cpu")
    assert "[94.2, -0.20]" in tex and "% - 10 epochs" in tex and "±" not in tex
    csv_lines = render(spec, columns, "csv").splitlines()
    assert csv_lines[0].startswith("variant,task,split,metric,mean,std,n,paper,minus_paper,")
    assert csv_lines[0].endswith(",detectable_paired,p_welch,detectable_welch,selects_checkpoint")


def test_a_selection_split_is_named_so():
    assert split_label("dev") == "dev: selects the checkpoint" == split_label("val").replace("val", "dev")
    assert split_label("test") == "test" and split_label("test2016") == "test2016" and split_label(None) == "-"


def test_a_test_that_found_nothing_says_what_it_could_have_found():
    test = {"difference": 0.61, "ci95": [-0.03, 1.25], "p": 0.055, "p_holm": 0.055, "detectable": 0.9,
            "welch_p": 0.39, "welch_detectable": 4.76}
    assert _p_text(test) == "+0.61 [-0.03, +1.25] p 0.055 (Holm 0.055; detectable 0.90), Welch 0.39 (detectable 4.76)"
    significant = {**test, "p": 0.0001, "p_holm": 0.0001, "welch_p": 0.01}
    assert _p_text(significant) == "+0.61 [-0.03, +1.25] p 0.00010 (Holm 0.00010)*, Welch 0.010"
    no_spread = {**test, "welch_detectable": None}
    assert _p_text(no_spread).endswith("Welch 0.39")


def test_the_shipped_specs_carry_the_papers_numbers():
    liu = load_spec("liu-table3")
    assert liu.references["trec"]["cn3"] == 94.2 and liu.references["sst2"]["lstm"] == 85.8
    assert liu.references["conll2003"]["cn3+char+spell"] == 91.10 and liu.references["ptb_pos"]["lstm"] == 97.55
    assert "treelstm" not in liu.references["imdb"] and "pdgraph" not in liu.references["conll2000"]  # x and -
    assert load_spec("xu-table1").references == {"multi30k": {"transformer": 27.67, "local": 28.13,
                                                              "hybrid-concat": 28.15, "hybrid-gate": 28.31}}
    # Table 2's rows are without the short-cut; with it, ON-LSTM first is Table 1's 28.37, SAN first has none
    assert load_spec("hao-table2").references == {"multi30k": {"onlstm-first": 28.37, "onlstm-first-noshortcut": 28.21,
                                                               "san-first-noshortcut": 27.39}}
    assert load_spec("hao-table1").references["multi30k"]["san"] == 27.31
    window = load_spec("xu-window")
    assert not window.references and "no numbers" in window.paper
    for name in ("liu-table3", "xu-table1", "xu-window", "hao-table1", "hao-table2"):
        spec = load_spec(name)
        assert spec.paper and spec.differs, name


@pytest.mark.skipif(not TABLES.is_file(), reason="../shared/papers/tables.md is not staged here")
def test_every_reference_is_printed_in_the_papers_tables():
    text = TABLES.read_text(encoding="utf-8")
    printed = {float(x) for x in re.findall(r"\b\d+\.\d+\b", text)}
    for path in SPEC_DIR.glob("*.yaml"):
        for task, row in load_spec(path).references.items():
            for variant, number in row.items():
                assert number is None or float(number) in printed, (path.stem, task, variant, number)
