"""Encoders registry, padding invariance, the model's loss and incremental decoding, search."""

from __future__ import annotations

import pytest
import torch

from cn3.config import ConfigError, from_dict
from cn3.encoders import ENCODERS
from cn3.nmt.analysis import has_gates
from cn3.nmt.config import NMTModelConfig
from cn3.nmt.data import EOS, PAD
from cn3.nmt.search import beam_search, greedy_search, translate_ids
from cn3.nmt.transformer import ModelArgs, Seq2Seq

pytestmark = pytest.mark.usefixtures("one_thread")

V = 30
TINY = {"d_model": 16, "heads": 2, "ff": 32, "encoder_layers": 3, "decoder_layers": 2, "dropout": 0.1,
        "rnn": {"layers": 1, "chunk_size": 4}, "hybrid": {"layers": 2, "window": 1}}

VARIANTS = [
    ("transformer", {}), ("hybrid", {}), ("local", {}), ("onlstm_san", {}), ("lstm_san", {}),
    ("onlstm", {}), ("lstm", {}), ("rnn", {}), ("nbow", {}), ("cnn", {}), ("selfatt1", {}), ("selfatt2", {}),
    ("cn3", {}),
    ("hybrid", {"hybrid": {"layers": 3, "window": 2, "combine": "concat"}}),
    ("hybrid", {"norm": "post", "hybrid": {"layers": 1, "window": 0, "gate_per_head": True}}),
    ("onlstm_san", {"rnn": {"layers": 2, "chunk_size": 2, "order": "san_first", "bidirectional": True}}),
    ("lstm_san", {"rnn": {"layers": 1, "bidirectional": True, "shortcut": False}}),
]


def config(encoder: str, extra: dict | None = None) -> NMTModelConfig:
    data = {**TINY, "encoder": encoder}
    for key, value in (extra or {}).items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    return from_dict(NMTModelConfig, data)


def model(encoder: str, extra: dict | None = None, seed: int = 0, tie: str = "all") -> Seq2Seq:
    torch.manual_seed(seed)
    cfg = config(encoder, {**(extra or {}), "tie": tie})
    return Seq2Seq(cfg, ModelArgs(V, V)).eval()


def sources(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    rows = [torch.randint(4, V, (n - 1,), generator=g).tolist() + [EOS] for n in lengths]
    out = torch.full((len(rows), max(lengths)), PAD)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r)
    return out


def test_every_encoder_but_the_tree_ones_serves_translation():
    serving = {name for name, spec in ENCODERS.items() if "translation" in spec.levels}
    assert serving == set(ENCODERS) - {"treelstm", "pdgraph"}
    assert {name for name, _ in VARIANTS} == serving  # and each is tested below
    assert has_gates(config("hybrid")) and not has_gates(config("local"))
    assert not has_gates(config("hybrid", {"hybrid": {"combine": "concat"}}))
    with pytest.raises(ConfigError, match="model.rnn.layers"):
        config("onlstm_san", {"rnn": {"layers": 3}})
    with pytest.raises(ConfigError, match="does not serve translation"):
        config("treelstm")


@pytest.mark.parametrize("encoder,extra", VARIANTS, ids=[f"{e}-{i}" for i, (e, _) in enumerate(VARIANTS)])
def test_encoders_are_padding_invariant(encoder, extra):
    m = model(encoder, extra)
    lengths = [7, 3, 5, 1]
    src = sources(lengths)
    memory, mask, info = m.encode(src)
    assert memory.shape == (4, 7, 16)
    for row, n in enumerate(lengths):
        alone, _, _ = m.encode(src[row : row + 1, :n])
        torch.testing.assert_close(memory[row, :n], alone[0], atol=1e-5, rtol=1e-4)


def test_hybrid_layers_report_gates_bottom_first():
    m = model("hybrid")
    _, _, info = m.encode(sources([5, 2]))
    assert [g is not None for g in info["gates"]] == [True, True, False]
    assert info["gates"][0].shape == (2, 1, 5)  # the paper's one gate per token


@pytest.mark.parametrize("encoder", ["transformer", "onlstm_san", "cn3"])
@pytest.mark.parametrize("tie", ["all", "decoder", "none"])
def test_incremental_decoding_equals_teacher_forcing(encoder, tie):
    m = model(encoder, tie=tie, seed=1)
    src = sources([6, 4], seed=1)
    tgt = torch.randint(4, V, (2, 5))
    full = torch.log_softmax(m(src, tgt), -1)
    memory, mask, _ = m.encode(src)
    state = m.start(memory, mask)
    steps = torch.stack([m.step(tgt[:, t], state) for t in range(5)], 1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-4)


def test_tying_shares_weights():
    m = model("transformer", tie="all")
    assert m.src_embed.weight is m.tgt_embed.weight is m.output.weight
    m = model("transformer", tie="none")
    assert m.output.weight is not m.tgt_embed.weight


def test_loss_ignores_padding_and_smooths():
    m = model("transformer")
    logits = torch.randn(2, 3, V)
    tgt = torch.tensor([[5, 6, PAD], [7, PAD, PAD]])
    loss, nll = m.loss(logits, tgt, smoothing=0.0)
    expected = torch.nn.functional.cross_entropy(logits.view(-1, V), tgt.view(-1), ignore_index=PAD, reduction="sum")
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(nll, expected)
    smoothed, _ = m.loss(logits, tgt, smoothing=0.1)
    ref = torch.nn.functional.cross_entropy(logits.view(-1, V), tgt.view(-1), ignore_index=PAD, reduction="sum",
                                            label_smoothing=0.1)
    torch.testing.assert_close(smoothed, ref)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("encoder", ["transformer", "hybrid", "onlstm_san"])
def test_beam_one_equals_greedy(encoder, seed):
    m = model(encoder, seed=seed)
    src = sources([6, 3, 8, 1, 5], seed=seed)
    assert beam_search(m, src, beam=1, alpha=0.6) == greedy_search(m, src)


def test_beam_search_respects_the_length_limit_and_returns_clean_tokens():
    m = model("transformer", seed=3)
    src = sources([4, 2], seed=3)
    out = beam_search(m, src, beam=4, max_len_a=1.0, max_len_b=2)
    assert len(out) == 2
    for hyp, n in zip(out, [4, 2]):
        assert len(hyp) <= n + 2
        assert all(t not in (PAD, EOS, 2) for t in hyp)


def test_beam_search_batched_equals_one_by_one():
    m = model("hybrid", seed=4)
    src = sources([6, 3, 5], seed=4)
    together = beam_search(m, src, beam=3)
    alone = [beam_search(m, src[i : i + 1, : n], beam=3)[0] for i, n in enumerate([6, 3, 5])]
    assert together == alone


def test_translate_ids_keeps_input_order():
    m = model("transformer", seed=5)
    seqs = [[5, 6, 7, EOS], [8, EOS], [9, 10, EOS]]
    batched = translate_ids(m, seqs, beam=2, batch_size=4)
    single = [translate_ids(m, [s], beam=2)[0] for s in seqs]
    assert batched == single
