"""The columnar store: subsets keep every item (and its sidecar record) intact, for all three task levels."""

from __future__ import annotations

import json

import pytest
import torch

from data_prep.example import Example, Sentence
from data_prep.store import GraphDataset, encode_split, write_sidecar
from data_prep.vocab import Vocab

WORDS = "the a cat dog sat ran on mat it was good bad".split()


def _sentence(i: int, tagged: bool) -> Sentence:
    n = 2 + i % 4  # lengths vary, so node offsets differ from item offsets
    tokens = [WORDS[(i + k) % len(WORDS)] for k in range(n)]
    return Sentence(tokens, upos=["NOUN"] * n, heads=[0] + [1] * (n - 1), deprels=["root"] + ["dep"] * (n - 1),
                    tags=["B" if k == 0 else "O" for k in range(n)] if tagged else None)


def _dataset(level: str, tmp_path, n: int = 12) -> GraphDataset:
    sides = 2 if level == "pair" else 1
    # sorted by label like the IMDB files: the first half is all "neg"
    examples = [Example([_sentence(i + 5 * s, level == "node") for s in range(sides)],
                        label=None if level == "node" else ("neg" if i < n // 2 else "pos"), line=i + 1, source="f")
                for i in range(n)]
    vocabs = {"word": Vocab(WORDS), "lower": Vocab(WORDS), "chars": Vocab(sorted(set("".join(WORDS)))),
              "upos": Vocab(["NOUN"]), "rel": Vocab(["root", "dep"]),
              "labels": Vocab(["B", "O"] if level == "node" else ["neg", "pos"], specials=False)}
    tensors = encode_split(examples, level, vocabs, char_len=5, use_pos=True, use_deps=True)
    write_sidecar(tmp_path / f"{level}.jsonl", examples)
    return GraphDataset(tensors, level, sidecar=tmp_path / f"{level}.jsonl")


def _same(a, b) -> bool:
    a, b = a.to_dict(), b.to_dict()
    return a.keys() == b.keys() and all(
        torch.equal(a[k], b[k]) if torch.is_tensor(a[k]) else a[k] == b[k] for k in a)


@pytest.mark.parametrize("level", ["graph", "pair", "node"])
def test_subset_items_equal_the_originals(level, tmp_path):
    ds = _dataset(level, tmp_path)
    picked = [7, 0, 11, 3, 3]
    sub = ds.subset(picked)
    assert len(sub) == len(picked)
    for j, i in enumerate(picked):
        assert _same(sub[j], ds[i])
        assert sub.record(j) == ds.record(i)
    nested = sub.subset([2, 0])  # a subset of a subset still finds its sidecar lines
    assert _same(nested[0], ds[11]) and nested.record(1)["line"] == 8


def test_spread_takes_both_ends_and_both_classes_of_a_sorted_split(tmp_path):
    ds = _dataset("graph", tmp_path)
    sub = ds.spread(4)
    assert [sub.record(j)["line"] for j in range(4)] == [1, 5, 8, 12]
    assert set(sub.t["y"].tolist()) == {0, 1}
    assert ds.spread(100) is ds


def test_sidecar_lines_are_json(tmp_path):
    _dataset("pair", tmp_path)
    records = [json.loads(line) for line in open(tmp_path / "pair.jsonl", encoding="utf-8")]
    assert len(records) == 12 and len(records[0]["tokens"]) == 2
