"""The assembled model: every encoder x level runs, padding never changes real outputs."""

import pytest
import torch

from cn3.config import ConfigError
from cn3.encoders import ENCODERS as REGISTRY
from cn3.sentence.batching import make_batch
from cn3.sentence.config import ModelConfig
from cn3.sentence.model import ModelArgs, SentenceGraphModel
from tests.references import collate
from tests.sentence.test_batching import small_dataset

ENCODERS = sorted(REGISTRY)


def make(level, encoder, **overrides):
    torch.manual_seed(0)
    cfg = ModelConfig(encoder=encoder, word_dim=8, hidden=8, energy_dim=6, mlp_hidden=8, heads=2, char="cnn",
                      char_dim=4, char_out=6, pos_dim=3, spell_dim=3, dropout=0.0, **overrides)
    args = ModelArgs(level=level, n_labels=2, n_words=20, n_chars=15, n_upos=3, n_spell=11,
                     n_edge_types=9)  # 1 + 2 * |{pad, unk, d, root}|
    return SentenceGraphModel(cfg, args).double().eval()


def as_double(batch):
    batch.a.spell = batch.a.spell.double()
    if batch.b is not None:
        batch.b.spell = batch.b.spell.double()
    return batch


@pytest.mark.parametrize("encoder", ENCODERS)
@pytest.mark.parametrize("level", ["graph", "node", "pair"])
def test_padding_does_not_change_outputs(level, encoder):
    ds = small_dataset(level)
    model = make(level, encoder, edge_attrs=encoder == "cn3")
    alone = as_double(make_batch(ds, [1]))
    padded = as_double(make_batch(ds, [1, 2]))  # item 2 is longer: item 1 gets padding
    out1, out2 = model(alone), model(padded)
    if level == "node":
        n = int(alone.a.mask.sum())
        assert torch.equal(out1.pred[0, :n], out2.pred[0, :n])
        h1, _ = model.encode(alone.a)
        h2, _ = model.encode(padded.a)
        assert torch.allclose(h1[0, :n], h2[0, :n], atol=1e-10)
    else:
        assert torch.allclose(out1.logits[0], out2.logits[0], atol=1e-10)
    out2.loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_cn3_returns_alphas_and_gates_per_layer():
    ds = small_dataset("graph")
    model = make("graph", "cn3", graph_layers=2)
    out = model(as_double(collate([ds[0], ds[2]])))
    alphas, gates = out.info["a"]["alphas"], out.info["a"]["gates"]
    assert len(alphas) == 2 and alphas[0].shape == (2, 5, 5) and gates[0].shape[:2] == (2, 5)
    row_sums = alphas[0][0, :3].sum(-1)
    assert torch.allclose(row_sums, torch.ones(3, dtype=row_sums.dtype))
    assert (alphas[0][0, :, 3:] == 0).all()  # no weight on padding


def test_paper_initialisation_is_uniform_0_1():
    model = make("graph", "cn3")
    for name, p in model.named_parameters():
        assert p.abs().max() <= 0.1 + 1e-12, name


def test_pretrained_vectors_are_loaded_and_can_be_frozen():
    vectors = torch.zeros(20, 8)
    vectors[5] = torch.arange(8.0)
    cfg = ModelConfig(encoder="nbow", word_dim=8, freeze_embeddings=True)
    args = ModelArgs("graph", 2, 20, 15, 0, 11, 0)
    model = SentenceGraphModel(cfg, args, vectors)
    assert torch.equal(model.nodes.word.weight[5], torch.arange(8.0))
    assert not model.nodes.word.weight.requires_grad
    assert model.nodes.word.weight[0].abs().sum() == 0


def test_word_dropout_turns_words_into_unk_in_training_only():
    model = make("graph", "nbow", word_dropout=0.5)
    ids = torch.tensor([[5, 6, 7, 8] * 500 + [0] * 100])  # 2,000 words, then padding
    torch.manual_seed(1)
    model.train()
    dropped = model.nodes._drop_words(ids)
    assert set(dropped.unique().tolist()) <= {0, 1, 5, 6, 7, 8}
    assert (dropped[0, 2000:] == 0).all()  # padding stays padding
    assert 900 < int((dropped == 1).sum()) < 1100
    model.eval()
    assert torch.equal(model.nodes._drop_words(ids), ids)
    with pytest.raises(ConfigError, match="word_dropout"):
        ModelConfig(word_dropout=1.0).validate()


@pytest.mark.parametrize("cfg", [ModelConfig(encoder="cn3", edge_attrs=True), ModelConfig(encoder="pdgraph"),
                                 ModelConfig(encoder="treelstm")])
def test_tree_encoders_and_edge_attrs_need_trees(cfg):
    with pytest.raises(ConfigError, match="trees"):
        SentenceGraphModel(cfg, ModelArgs("graph", 2, 20, 15, 0, 11, 0))


def test_unknown_encoder_fails_at_config_time_with_a_suggestion():
    with pytest.raises(ConfigError, match="did you mean 'lstm'"):
        ModelConfig(encoder="lstn").validate()


def test_each_encoder_keeps_its_own_initialisation():
    """CN3 (and its head) take the paper's U(-0.1, 0.1); the Transformer keeps LayerNorm gains at 1
    and its head torch's standard init (a bound of 1/sqrt(fan_in), not 0.1)."""
    cn3 = make("graph", "cn3")
    assert all(p.abs().max() <= 0.1 + 1e-12 for p in cn3.head.parameters())
    san = make("graph", "transformer")
    norms = [m for m in san.encoder.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert norms and all(torch.equal(m.weight, torch.ones_like(m.weight)) for m in norms)
    first = san.head.mlp[1]  # Linear(d, mlp_hidden): d = 16 -> bound 0.25
    assert first.weight.abs().max() > 0.1
    assert first.weight.abs().max() <= first.weight.shape[1] ** -0.5 + 1e-12


def test_dropout_is_applied_once_before_the_classifier():
    """The node states reach the head undropped; the head drops the sentence vector once."""
    torch.manual_seed(0)
    cfg = ModelConfig(encoder="nbow", word_dim=8, hidden=8, mlp_hidden=8, dropout=0.5)
    model = SentenceGraphModel(cfg, ModelArgs("graph", 2, 20, 15, 0, 11, 0)).double().train()
    drops = [m for m in model.modules() if isinstance(m, torch.nn.Dropout) and m.p > 0]
    # the node encoder's dropout on x, and the MLP's two (input, hidden); none between encoder and head
    assert len(drops) == 3
    assert not any(isinstance(m, torch.nn.Dropout) for m in model._modules.values())


def test_crf_training_step_does_not_decode(monkeypatch):
    ds = small_dataset("node")
    model = make("node", "lstm").train()
    calls = []
    monkeypatch.setattr(model.head.crf, "decode", lambda *a, **k: calls.append(1) or [[0]])
    out = model(as_double(make_batch(ds, [0])))
    assert out.loss is not None and out.pred is None and not calls
    model.eval()
    monkeypatch.undo()
    assert model(as_double(make_batch(ds, [0]))).pred is not None
