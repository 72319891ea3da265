"""Graph construction on a hand-checked sentence, and the columnar store round trip."""

from collections import Counter

import pytest
import torch
from torch_geometric.data import Batch

from data_prep.example import Example, Sentence
from data_prep.graphs import dense_edge_types, edge_types_from_heads
from data_prep.spelling import SPELL_FEATURES
from data_prep.store import GraphDataset, encode_split
from data_prep.vocab import Vocab

# UD-style analysis, checked by hand: "birthday" is the root, "What" its nsubj (copular question).
TOKENS = "What is Susan B. Anthony 's birthday ?".split()
UPOS = ["PRON", "AUX", "PROPN", "PROPN", "PROPN", "PART", "NOUN", "PUNCT"]
HEADS = [7, 7, 7, 3, 3, 3, 0, 7]  # 1-based, 0 = root
RELS = ["nsubj", "cop", "nmod:poss", "flat", "flat", "case", "root", "punct"]


def vocabs_for(sentences, labels):
    words = Counter(t for s in sentences for t in s.tokens)
    return {
        "word": Vocab.build(words),
        "lower": Vocab.build(Counter(t.lower() for s in sentences for t in s.tokens)),
        "chars": Vocab.build(Counter(c for s in sentences for t in s.tokens for c in t)),
        "upos": Vocab.build(Counter(p for s in sentences for p in s.upos)),
        "rel": Vocab.build(Counter(r for s in sentences for r in s.deprels)),
        "labels": Vocab(labels, specials=False),
    }


@pytest.fixture
def question():
    sent = Sentence(list(TOKENS), upos=list(UPOS), heads=list(HEADS), deprels=list(RELS))
    vocabs = vocabs_for([sent], ["HUM", "NUM"])
    tensors = encode_split([Example([sent], label="NUM")], "graph", vocabs, char_len=6, use_pos=True, use_deps=True)
    return GraphDataset(tensors, "graph")[0], vocabs


def test_node_attributes(question):
    data, vocabs = question
    assert data.num_nodes == 8
    assert [vocabs["word"].itos[i] for i in data.word] == TOKENS
    assert [vocabs["lower"].itos[i] for i in data.lower] == [t.lower() for t in TOKENS]
    assert [vocabs["upos"].itos[i] for i in data.upos] == UPOS
    assert data.position.tolist() == list(range(8))
    assert data.y.tolist() == [1]
    # characters: padded with 0 and cut at char_len=6
    chars = vocabs["chars"]
    assert "".join(chars.itos[i] for i in data.chars[2] if i) == "Susan"
    assert data.chars.shape == (8, 6) and data.chars[2, 5] == 0


def test_spelling(question):
    data, _ = question
    on = lambda i: {n for n, f in zip(SPELL_FEATURES, data.spell[i].tolist()) if f}  # noqa: E731
    assert on(0) == {"init_cap"}                       # What
    assert on(1) == {"all_lower"}                      # is
    assert on(3) == {"init_cap", "has_punct"}          # B.
    assert on(5) == {"all_lower", "has_punct", "has_apostrophe"}  # 's
    assert on(7) == {"is_punct"}                       # ?


def test_arcs_and_directions(question):
    data, vocabs = question
    rel = vocabs["rel"]
    arcs = {(i, k): int(t) for (i, k), t in zip(data.edge_index.t().tolist(), data.edge_type)}
    assert len(arcs) == 2 * 8 - 1  # each word to its head, each head to its dependent, root self-loop
    assert arcs[(0, 6)] == 1 + 2 * rel.id("nsubj")   # What -> its head birthday ("up")
    assert arcs[(6, 0)] == 2 + 2 * rel.id("nsubj")   # birthday -> its dependent What ("down")
    assert arcs[(3, 2)] == 1 + 2 * rel.id("flat")    # B. -> Susan
    assert arcs[(6, 6)] == 1 + 2 * rel.id("root")    # root self-loop
    assert (5, 2) in arcs and (2, 5) in arcs          # 's <-> Susan (case)
    assert (0, 1) not in arcs                          # What, is: no arc
    assert data.head.tolist() == [h - 1 for h in HEADS]


def test_dense_edge_types_rebuild(question):
    data, _ = question
    batch = Batch.from_data_list([data, data])
    dense = dense_edge_types(batch.edge_index, batch.edge_type, batch.batch)
    assert dense.shape == (2, 8, 8)
    for (i, k), t in zip(data.edge_index.t().tolist(), data.edge_type.tolist()):
        assert dense[1, i, k] == t
    assert int((dense[0] > 0).sum()) == 15


def test_edge_types_from_heads_counts():
    head = torch.tensor([1, -1, 1, 2])
    deprel = torch.tensor([3, 4, 5, 6])
    edge_index, edge_type = edge_types_from_heads(head, deprel)
    assert edge_index.shape == (2, 7)
    assert sorted(map(tuple, edge_index.t().tolist())) == sorted(
        [(0, 1), (1, 1), (2, 1), (3, 2), (1, 0), (1, 2), (2, 3)])


def test_pair_items_batch_with_separate_offsets():
    a = Sentence(["A", "man", "sleeps"], upos=["DET", "NOUN", "VERB"], heads=[2, 3, 0],
                 deprels=["det", "nsubj", "root"])
    b = Sentence(["Nobody", "sleeps"], upos=["PRON", "VERB"], heads=[2, 0], deprels=["nsubj", "root"])
    vocabs = vocabs_for([a, b], ["entailment", "contradiction"])
    tensors = encode_split([Example([a, b], label="contradiction")] * 2, "pair", vocabs, 8, True, True)
    ds = GraphDataset(tensors, "pair")
    item = ds[0]
    assert item.word_a.numel() == 3 and item.word_b.numel() == 2 and item.y.tolist() == [1]
    batch = Batch.from_data_list([ds[0], ds[1]], follow_batch=["word_a", "word_b"])
    assert batch.word_a_batch.tolist() == [0, 0, 0, 1, 1, 1]
    assert batch.word_b_batch.tolist() == [0, 0, 1, 1]
    assert batch.edge_index_a.max() == 5 and batch.edge_index_b.max() == 3
    assert batch.edge_index_b[:, batch.edge_index_b.shape[1] // 2:].min() >= 2  # second pair offset by 2 nodes


def test_tagging_items_carry_tags_and_unknown_words():
    train = Sentence(["EU", "rejects", "German", "call"], tags=["S-ORG", "O", "S-MISC", "O"])
    vocabs = vocabs_for([Sentence(train.tokens, upos=["X"] * 4, deprels=["dep"] * 4)], ["O", "S-ORG", "S-MISC"])
    test = Sentence(["Peter", "rejects"], tags=["O", "O"])
    ds = GraphDataset(encode_split([Example([test])], "node", vocabs, 5, False, False), "node")
    item = ds[0]
    assert item.y.tolist() == [0, 0]
    assert item.word.tolist()[0] == 1  # <unk>
    assert "upos" not in item and "edge_index" not in item
