"""The task registry: specs, options handling, the custom task, label inventories on the real data."""

from __future__ import annotations

import pytest

from cn3.util.errors import DataError
from data_prep.tasks import TASKS, custom_spec, get_task, load_task
from data_prep.taskspec import TaskOptions

NAMES = [
    "snli", "sick", "trec", "mr", "subj", "cr", "mpqa", "sst2", "sst5", "imdb",
    "conll2003", "conll2000", "ud_pos", "ptb_pos", "logic",
    "probe_sentlen", "probe_wc", "probe_bshift", "probe_tense", "probe_subjnum", "probe_objnum", "probe_somo",
    "probe_coordinv", "probe_treedepth", "probe_topconst",
]  # fmt: skip
PAIR_TASKS = {"snli", "sick", "logic"}
TAGGING_TASKS = {"conll2003", "conll2000", "ud_pos", "ptb_pos"}
#: Annotations the staged files carry: POS columns (CoNLL), POS and trees (the treebanks), trees from
#: the brackets (the logic formulas).
GOLD = {"conll2003": {"pos"}, "conll2000": {"pos"}, "ud_pos": {"pos", "deps"}, "ptb_pos": {"pos", "deps"},
        "logic": {"deps"}}


def test_registry_names():
    assert list(TASKS) == NAMES
    assert all(spec.name == name for name, spec in TASKS.items())


@pytest.mark.parametrize("name", NAMES)
def test_spec_fields(name, data_root):
    spec = TASKS[name]
    level = "pair" if name in PAIR_TASKS else "node" if name in TAGGING_TASKS else "graph"
    assert spec.level == level and spec.description and callable(spec.load)
    assert spec.gold == GOLD.get(name, set())
    assert spec.files and all((data_root / f).is_file() for f in spec.files), spec.files
    assert spec.cv == (name in {"mr", "subj", "cr", "mpqa"})
    assert (spec.tag_scheme == "BIOES") == (name in {"conll2003", "conll2000"})
    assert spec.label_is_pos == (name in {"ud_pos", "ptb_pos"})
    if spec.label_is_pos:
        assert spec.gold == {"pos", "deps"} and spec.labels
    # WC's classes are target words, TopConst's the commonest constituent sequences: both from the data
    if spec.level != "node" and name not in {"probe_wc", "probe_topconst"}:
        assert spec.labels and len(set(spec.labels)) == len(spec.labels)


def test_fixed_inventories():
    assert TASKS["snli"].labels == TASKS["sick"].labels == ("entailment", "neutral", "contradiction")
    assert len(TASKS["trec"].labels) == 6 and len(TASKS["logic"].labels) == 7
    assert len(TASKS["sst5"].labels) == 5 and len(TASKS["ud_pos"].labels) == 17 and len(TASKS["ptb_pos"].labels) == 45
    assert TASKS["conll2003"].labels is None and TASKS["conll2000"].labels is None
    assert TASKS["imdb"].max_len == 400
    assert "Shen" in TASKS["logic"].notes and "158" in TASKS["snli"].notes


@pytest.mark.parametrize("name", [n for n in NAMES if TASKS[n].labels is not None])
def test_real_labels_within_inventory(name, load_real):
    spec = TASKS[name]
    data = load_real(name)
    if spec.level == "node":
        found = {t for split in data.values() for e in split for t in e.sentences[0].tags}
    else:
        found = {e.label for split in data.values() for e in split}
    assert found == set(spec.labels)  # every label of the inventory occurs, and nothing else


@pytest.mark.parametrize("name", ["conll2003", "conll2000"])
def test_tag_scheme_of_real_tags(name, load_real):
    tags = {t for split in load_real(name).values() for e in split for t in e.sentences[0].tags}
    assert {t[0] for t in tags} == set("OBIES")


def test_unknown_task():
    with pytest.raises(DataError) as err:
        get_task("nope")
    assert "unknown task 'nope'; known: snli, sick" in str(err.value) and "custom" in str(err.value)


def test_options_adjust_spec():
    assert get_task("trec").labels == TASKS["trec"].labels
    assert get_task("trec", TaskOptions(fine=True)).labels is None
    assert get_task("conll2000", TaskOptions(tag_scheme="iob2")).tag_scheme == "IOB2"
    with pytest.raises(DataError, match="unknown tag scheme 'IOB1'"):
        get_task("conll2003", TaskOptions(tag_scheme="IOB1"))
    with pytest.raises(DataError, match=r"--fold must be in \[0, 10\), got 10"):
        get_task("mr", TaskOptions(fold=10))
    get_task("mr", TaskOptions(fold=9))


def test_trec_fine_load(data_root):
    data = load_task("trec", data_root, TaskOptions(fine=True))
    fine = {e.label for e in data["test"]}
    assert len(fine) == 42 and data["test"][0].label == "NUM:dist"
    assert {label.split(":")[0] for label in fine} == set(TASKS["trec"].labels)  # COARSE:fine


def test_missing_data_root(tmp_path):
    with pytest.raises(DataError) as err:
        load_task("snli", tmp_path / "nowhere")
    message = str(err.value)
    assert str(tmp_path / "nowhere") in message and "--data" in message and "CN3_DATA" in message
    with pytest.raises(DataError, match="CN3_DATA"):
        load_task("snli", None)


def test_custom_spec(tmp_path):
    pair = tmp_path / "train.tsv"
    pair.write_text("id\ttext_a\ttext_b\tlabel\n1\ta\tb\tyes\n")
    spec = custom_spec(TaskOptions(files={"train": pair}))
    assert spec.level == "pair" and spec.name == "custom" and spec.files == (str(pair),) and spec.labels is None
    graph = tmp_path / "train.jsonl"
    graph.write_text('{"text": "a b", "label": "x"}\n')
    dev = tmp_path / "dev.jsonl"
    dev.write_text('{"text": "c", "label": "x"}\n')
    options = TaskOptions(files={"train": graph, "dev": dev})
    spec = get_task("custom", options)
    assert spec.level == "graph" and spec.files == (str(graph), str(dev))
    assert [len(v) for v in spec.load(None, options).values()] == [1, 1]
    conll = tmp_path / "data.txt"
    conll.write_text("a DT 2 B-NP\nb NN 0 I-NP\n")
    options = TaskOptions(files={"train": conll}, format="conll", columns="word,upos,head,tag")
    spec = custom_spec(options)
    assert spec.level == "node" and spec.gold == {"pos", "deps"}
    with pytest.raises(DataError, match="unknown custom format 'csv'"):
        custom_spec(TaskOptions(files={"train": conll}, format="csv"))
    with pytest.raises(DataError, match="needs a train file"):
        get_task("custom", TaskOptions())


def test_custom_level_errors(tmp_path):
    bad = tmp_path / "train.tsv"
    bad.write_text("sentence\tlabel\na\tb\n")
    with pytest.raises(DataError, match=r"train.tsv, line 1: no 'text' field") as err:
        custom_spec(TaskOptions(files={"train": bad}))
    assert err.value.path == bad and err.value.line == 1
