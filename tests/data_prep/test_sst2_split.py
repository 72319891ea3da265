"""SST-2's test split: train sentences held out, seeded, their phrases out of train, written in the
manifest; no scored split decides anything at prepare time."""

from __future__ import annotations

import json

import pytest

from data_prep.example import Example, Sentence
from data_prep.readers.sst import _spans, hold_out_sentences

SENTENCES = [f"sentence {i} is rather good" for i in range(20)] + [f"film {i} was dull and long" for i in range(20)]


def _phrases() -> list[Example]:
    """Each sentence with a few of its phrases (one shared by many sentences), file order shuffled."""
    texts = []
    for text in SENTENCES:
        words = text.split()
        texts += [text, " ".join(words[:2]), " ".join(words[-2:])]
    texts = list(dict.fromkeys(texts))  # SST lists each distinct phrase once
    return [Example([Sentence(t.split())], "positive" if "good" in t else "negative", n, "train")
            for n, t in enumerate(reversed(texts), 1)]


def test_whole_sentences_are_held_out_with_their_phrases():
    phrases = _phrases()
    train, test, record = hold_out_sentences(phrases, seed=13, fraction=0.25)
    held = {tuple(e.sentences[0].tokens) for e in test}
    assert len(test) == record["test_sentences"] == 10 and record["sentences"] == 40
    assert held <= {tuple(s.split()) for s in SENTENCES}  # only whole sentences
    inside = set().union(*(_spans(t) for t in held))
    assert not any(tuple(e.sentences[0].tokens) in inside for e in train)  # no part of a test sentence trains
    assert len(train) + len(test) + record["train_phrases_dropped"] == len(phrases)
    assert ("rather", "good") not in {tuple(e.sentences[0].tokens) for e in train}  # shared with a test one: gone
    assert [e.line for e in test] == sorted(e.line for e in test)  # file order
    again = hold_out_sentences(_phrases(), seed=13, fraction=0.25)
    assert [e.sentences[0].tokens for e in again[1]] == [e.sentences[0].tokens for e in test]  # seeded
    other = hold_out_sentences(_phrases(), seed=14, fraction=0.25)
    assert {tuple(e.sentences[0].tokens) for e in other[1]} != held
    assert record["fraction"] == 0.25 and record["seed"] == 13 and "seeded 25%" in record["rule"]


def test_prepare_writes_the_held_out_record_and_builds_the_vocabulary_from_train(tmp_path):
    from data_prep.prepare import PrepareSettings, prepare

    root = tmp_path / "data" / "sst" / "binary"
    root.mkdir(parents=True)
    lines = [f"{' '.join(e.sentences[0].tokens)} \t{1 if e.label == 'positive' else 0}" for e in _phrases()]
    lines.append("zebra sentence only in one place is rather good \t1")  # a word found in no other phrase
    (root / "sentiment-train").write_text("\n".join(lines) + "\n")
    (root / "sentiment-dev").write_text("a dull film \t0\na good sentence \t1\n")
    result = prepare(PrepareSettings(task="sst2", data=tmp_path / "data", out=tmp_path / "sst2", annotator="none"))
    manifest = json.loads((tmp_path / "sst2" / "manifest.json").read_text())
    assert manifest["held_out"]["split"] == "test" and manifest["held_out"]["seed"] == 13
    assert manifest["held_out"]["fraction"] == 0.1 and manifest["counts"]["test"]["examples"] == 4
    assert set(manifest["counts"]) == {"train", "dev", "test"}
    train_words = {w for line in (tmp_path / "sst2" / "train.jsonl").read_text().splitlines()
                   for w in json.loads(line)["tokens"][0]}
    words = json.loads((tmp_path / "sst2" / "vocab.json").read_text())["word"]
    assert set(words["itos"]) - {"<pad>", "<unk>"} <= train_words  # the vocabulary is train's alone
    assert not result.up_to_date


@pytest.mark.parametrize("task", ["sst5", "trec"])
def test_other_tasks_keep_their_splits(task, load_real):
    data = load_real(task)
    assert not hasattr(data, "held_out")
