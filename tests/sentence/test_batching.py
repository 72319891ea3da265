"""Collation to dense tensors and length-bucketed batch orders."""

from collections import Counter

import pytest
import torch

from cn3.sentence.batching import make_batch
from cn3.train.bucketing import bucketed_batches
from data_prep.example import Example, Sentence
from data_prep.store import GraphDataset, encode_split
from data_prep.vocab import Vocab
from tests.references import collate


def small_dataset(level="graph"):
    sents = [
        Sentence("a b c".split(), upos=["X"] * 3, heads=[2, 0, 2], deprels=["d", "root", "d"], tags=["O", "B", "O"]),
        Sentence("d e".split(), upos=["X"] * 2, heads=[0, 1], deprels=["root", "d"], tags=["B", "O"]),
        Sentence("f g h i j".split(), upos=["X"] * 5, heads=[0, 1, 1, 1, 1], deprels=["root"] + ["d"] * 4,
                 tags=["O"] * 5),
    ]
    words = Counter(t for s in sents for t in s.tokens)
    vocabs = {"word": Vocab.build(words), "lower": Vocab.build(words), "chars": Vocab.build(Counter("abcdefghij")),
              "upos": Vocab.build(Counter(["X"])), "rel": Vocab.build(Counter(["d", "root"])),
              "labels": Vocab(["O", "B"] if level == "node" else ["neg", "pos"], specials=False)}
    if level == "pair":
        examples = [Example([sents[i], sents[(i + 1) % 3]], label="pos") for i in range(3)]
    else:
        examples = [Example([s], label="neg") for s in sents]
    return GraphDataset(encode_split(examples, level, vocabs, 4, True, True), level)


def test_graph_batch_shapes_and_mask():
    ds = small_dataset()
    batch = collate([ds[i] for i in range(3)], [0, 1, 2])
    a = batch.a
    assert a.word.shape == (3, 5) and a.chars.shape == (3, 5, 4) and a.spell.shape[:2] == (3, 5)
    assert a.mask.sum(1).tolist() == [3, 2, 5]
    assert a.edge_type.shape == (3, 5, 5)
    assert (a.edge_type[1, 2:] == 0).all() and (a.edge_type[1, :, 2:] == 0).all()
    assert (a.word[1, 2:] == 0).all()
    assert batch.y.tolist() == [0, 0, 0] and batch.b is None


def test_dense_edges_equal_per_sentence():
    ds = small_dataset()
    batch = collate([ds[i] for i in range(3)])
    for row in range(3):
        item = ds[row]
        for (i, k), t in zip(item.edge_index.t().tolist(), item.edge_type.tolist()):
            assert batch.a.edge_type[row, i, k] == t
        assert int((batch.a.edge_type[row] > 0).sum()) == item.edge_index.shape[1]


def test_tagging_labels_are_padded():
    ds = small_dataset("node")
    batch = collate([ds[i] for i in range(3)], tagging=True)
    assert batch.y.shape == (3, 5)
    assert batch.y[0].tolist() == [0, 1, 0, 0, 0]


def test_pair_batch_has_both_sides():
    ds = small_dataset("pair")
    batch = collate([ds[i] for i in range(3)])
    assert batch.a.mask.sum(1).tolist() == [3, 2, 5]
    assert batch.b.mask.sum(1).tolist() == [2, 5, 3]
    assert batch.b.edge_type.shape == (3, 5, 5)


def test_bucketed_batches_cover_everything_once_and_are_deterministic():
    lengths = [int(x) for x in torch.randint(1, 60, (1000,), generator=torch.Generator().manual_seed(0))]
    one = bucketed_batches(lengths, 32, shuffle=True, seed=5)
    two = bucketed_batches(lengths, 32, shuffle=True, seed=5)
    other = bucketed_batches(lengths, 32, shuffle=True, seed=6)
    assert one == two and one != other
    flat = [i for b in one for i in b]
    assert sorted(flat) == list(range(1000))
    assert all(len(b) <= 32 for b in one)
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in one) / len(one)
    assert spread < 10  # bucketing keeps similar lengths together


def test_max_tokens_caps_rows_times_longest():
    lengths = [100] * 10 + [5] * 50
    for b in bucketed_batches(lengths, 32, shuffle=False, max_tokens=300):
        assert len(b) * max(lengths[i] for i in b) <= 300 or len(b) == 1


def _equal(x, y):
    if x is None or y is None:
        return x is None and y is None
    return x.dtype == y.dtype and torch.equal(x, y)


@pytest.mark.parametrize("level", ["graph", "node", "pair"])
def test_fast_batch_equals_collated_data_objects(level):
    ds = small_dataset(level)
    for indices in ([2, 0, 1], [1], [0, 2]):
        fast = make_batch(ds, indices)
        slow = collate([ds[i] for i in indices], indices, tagging=level == "node")
        assert torch.equal(fast.y, slow.y) and torch.equal(fast.index, slow.index)
        for side in ("a", "b"):
            f, s = getattr(fast, side), getattr(slow, side)
            if s is None:
                assert f is None
                continue
            for name in ("word", "lower", "chars", "spell", "mask", "upos", "edge_type"):
                assert _equal(getattr(f, name), getattr(s, name)), (side, name)


def test_fast_batch_on_real_pairs(data_root, tmp_path):
    from data_prep.prepare import PrepareSettings, prepare
    from data_prep.taskspec import TaskOptions

    rows = "text_a\ttext_b\tlabel\n" + "".join(
        f"w{i} x y{'z' * (i % 3)}\t{'a ' * (1 + i % 4)}b\t{'yes' if i % 2 else 'no'}\n" for i in range(40))
    (tmp_path / "t.tsv").write_text(rows)
    options = TaskOptions(files={"train": tmp_path / "t.tsv"}, format="tsv")
    result = prepare(PrepareSettings(task="custom", out=tmp_path / "p", annotator="spacy", options=options))
    from data_prep.dataset import load_prepared

    ds = load_prepared(result.out).splits["train"]
    indices = list(range(0, 40, 3))
    fast, slow = make_batch(ds, indices), collate([ds[i] for i in indices], indices)
    for side in ("a", "b"):
        for name in ("word", "chars", "spell", "mask", "upos", "edge_type"):
            assert _equal(getattr(getattr(fast, side), name), getattr(getattr(slow, side), name)), (side, name)
