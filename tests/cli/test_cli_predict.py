"""``cn3 predict`` prints probabilities: class ``probs`` for sentences, CRF tag ``marginals`` for tagging."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from cli.main import app
from data_prep.prepare import PrepareSettings, prepare

# slow: trains the runs it predicts with (`pytest -m "not slow"` is the quick loop)
pytestmark = pytest.mark.slow

runner = CliRunner()
TINY = ["--set", "model.hidden=16", "--set", "model.energy_dim=8", "--set", "model.mlp_hidden=16",
        "--set", "model.char=none", "--set", "model.pos_dim=0", "--set", "model.spell_dim=0",
        "--set", "data.limit=200", "--set", "train.epochs=1", "--set", "train.max_steps=20",
        "--set", "data.embeddings=null", "--set", "train.num_threads=1"]
# Enough CoNLL-2000 updates (a few seconds) for peaked marginals, so the p >= 0.01 cut leaves tags out.
TAGGER = [*TINY, "--set", "data.limit=400", "--set", "train.max_steps=50", "--set", "train.epochs=50",
          "--set", "train.lr=0.03"]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_root, one_thread):
    """The two tiny runs, trained on one torch thread (two stalled each other in OpenMP's barriers on a
    loaded 2-core machine: tests/train/test_trainer.py); ``one_thread`` restores the count after."""
    base = tmp_path_factory.mktemp("predict")
    out = {}
    for task, settings in (("trec", TINY), ("conll2000", TAGGER)):
        prepared = base / task
        prepare(PrepareSettings(task=task, data=data_root, out=prepared, annotator="none"))
        run = base / f"run-{task}"
        result = invoke("train", "--task", task, "--prepared", prepared, "--run-dir", run, "--device", "cpu",
                        *settings)
        assert result.exit_code == 0, result.output
        out[task] = run
    return out


def predict_records(run, *texts):
    result = invoke("predict", run, *texts, "--device", "cpu")
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.strip().splitlines()]


def test_classification_probs(runs):
    records = predict_records(runs["trec"], "Who wrote Hamlet ?", "How far is Denver from Aspen ?")
    classes = {"ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"}
    assert len(records) == 2
    for r in records:
        probs = r["probs"]
        assert set(probs) == classes  # every class, once
        assert sum(probs.values()) == pytest.approx(1.0, abs=1e-3)
        assert all(0.0 <= p <= 1.0 for p in probs.values())
        assert list(probs.values()) == sorted(probs.values(), reverse=True)
        assert r["label"] == next(iter(probs)) and probs[r["label"]] == max(probs.values())


def test_tagging_marginals(runs):
    from cn3.runs.layout import RunDir
    from cn3.sentence.inference import examples_dataset, load_model, predict_with_probabilities, text_examples

    text = "He reckons the current account deficit will narrow to only 1.8 billion in September ."
    (record,) = predict_records(runs["conll2000"], text)
    tokens, tags, marginals = record["tokens"], record["tags"], record["marginals"]
    assert len(tags) == len(marginals) == len(tokens) == 15

    loaded = load_model(RunDir(runs["conll2000"]), torch.device("cpu"))
    labels = loaded.vocabs["labels"].itos
    examples = text_examples([text], loaded.manifest)
    dataset = examples_dataset(examples, loaded.vocabs, loaded.manifest, with_labels=False).dataset
    (pred,), (full,) = predict_with_probabilities(loaded.model, dataset, torch.device("cpu"))
    full = torch.tensor(full, dtype=torch.float64)  # (N, T): every tag at every token
    torch.testing.assert_close(full.sum(-1), torch.ones(len(tokens), dtype=torch.float64), atol=1e-3, rtol=0)
    assert [labels[t] for t in pred] == tags

    for t, m in enumerate(marginals):
        # Printed: the tags with p >= 0.01, most likely first, first key = the argmax of the full row.
        assert list(m.values()) == sorted(m.values(), reverse=True)
        assert next(iter(m)) == labels[int(full[t].argmax())]
        assert set(m) == {labels[j] for j in range(len(labels)) if full[t, j] >= 0.01}
        left_out = 1.0 - sum(m.values())
        assert -1e-3 <= left_out <= 0.01 * (len(labels) - len(m)) + 1e-3
    assert any(len(m) < len(labels) for m in marginals)  # the cut did leave unlikely tags out


def test_pretokenized_keeps_the_tokens_as_given(runs, tmp_path):
    """A CoNLL-2003 line: the task's tokenizer splits "1." in two, so five words get six tags;
    --pretokenized keeps the five words, and a tag for each, from the argument and from --file alike."""
    line = "1. Obama visited Paris ."
    (split,) = predict_records(runs["conll2000"], line)
    assert split["tokens"] == ["1", ".", "Obama", "visited", "Paris", "."]
    (kept,) = predict_records(runs["conll2000"], line, "--pretokenized")
    assert kept["tokens"] == ["1.", "Obama", "visited", "Paris", "."]
    assert len(kept["tags"]) == len(kept["marginals"]) == 5
    text = tmp_path / "lines.txt"
    text.write_text("1.  Obama visited Paris .\nU.S.-based  don't\n", encoding="utf-8")
    from_file, other = predict_records(runs["conll2000"], "--file", text, "--pretokenized")
    assert from_file == kept  # the same words, whatever the whitespace: the same tags
    assert other["tokens"] == ["U.S.-based", "don't"] and len(other["tags"]) == 2


def test_pretokenized_pairs_split_on_the_tab_then_on_whitespace():
    from cn3.sentence.inference import text_examples

    manifest = {"level": "pair", "task": "snli"}
    (example,) = text_examples(["A dog's toy .\tIt isn't"], manifest, pretokenized=True)
    assert [s.tokens for s in example.sentences] == [["A", "dog's", "toy", "."], ["It", "isn't"]]
    (example,) = text_examples(["A dog's toy .\tIt isn't"], manifest)
    assert [s.tokens for s in example.sentences] == [["A", "dog", "'s", "toy", "."], ["It", "is", "n't"]]



def test_pair_record_keeps_both_sentences():
    """Pairs print the same ``probs`` as sentences, with the two token lists (no training needed)."""
    from cn3.sentence.inference import prediction_record
    from data_prep.example import Example, Sentence

    ex = Example([Sentence(["A", "dog", "runs"]), Sentence(["An", "animal", "moves"])], line=1, source="-")
    record = prediction_record(ex, "pair", ["contradiction", "entailment", "neutral"], 1, [0.2, 0.7, 0.1])
    assert record == {"tokens": [["A", "dog", "runs"], ["An", "animal", "moves"]], "label": "entailment",
                      "probs": {"entailment": 0.7, "contradiction": 0.2, "neutral": 0.1}}
    assert list(record["probs"]) == ["entailment", "contradiction", "neutral"]  # dict equality ignores order
