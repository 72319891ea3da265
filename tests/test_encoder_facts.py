"""What the registry says of each encoder (:class:`cn3.encoders.EncoderSpec`) is what the encoder does:
the facts the analysis, visualisation, probing and config checks read live there and nowhere else."""

from __future__ import annotations

import pytest
import torch

from cn3.config import ConfigError
from cn3.encoders import ENCODERS, EncoderArgs, build_encoder
from cn3.encoders.options import HybridOptions, RecurrentOptions
from tests.references import chain_tree

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("name", list(ENCODERS))
def test_attention_facts_match_what_the_encoder_returns(name):
    spec = ENCODERS[name]
    torch.manual_seed(0)
    batch, n, dim = 2, 5, 8
    encoder = build_encoder(name, EncoderArgs(in_dim=dim, d=dim, layers=2, heads=2, ff=16, level="graph",
                                              n_edge_types=5, rnn=RecurrentOptions(layers=1))).eval()
    mask = torch.ones(batch, n, dtype=torch.bool)
    mask[1, 3:] = False
    extra = {"edge_type": chain_tree(batch, n)} if spec.needs_trees else {}
    _, info = encoder(torch.randn(batch, n, dim), mask, **extra)
    alphas = info.get("alphas") or []
    assert bool(alphas) == (spec.attention is not None), name
    # word i over words k (graph: every real word; causal: the words before i, none for the first)
    first = 1 if spec.attention == "causal" else 0
    if spec.attention in ("graph", "causal"):  # rows of a real word sum to 1 over the real words
        for alpha in alphas:
            assert alpha.shape == (batch, n, n)
            torch.testing.assert_close(alpha[0, first:].sum(-1), torch.ones(n - first))
            torch.testing.assert_close(alpha[1, first:3, :3].sum(-1), torch.ones(3 - first))
    if spec.attention == "causal":
        assert all(torch.triu(alpha[0]).abs().max() == 0 for alpha in alphas)  # k < i only
    assert spec.learns_edges == (name == "cn3")
    assert (spec.split_stack is not None) == name.endswith("_san")


@pytest.mark.parametrize("level", ["graph", "translation"])
def test_a_family_check_runs_whatever_builds_it(level):
    """onlstm_san needs a self-attention layer above its recurrent ones, on every side."""
    with pytest.raises(ConfigError, match=r"model.rnn.layers \(3\) must be below the encoder depth \(3\)"):
        build_encoder("onlstm_san", EncoderArgs(in_dim=8, d=8, layers=3, heads=2, level=level,
                                                rnn=RecurrentOptions(layers=3)))


def test_the_translation_config_checks_the_family_before_any_data():
    from cn3.nmt.config import NMTModelConfig

    with pytest.raises(ConfigError, match=r"model.hybrid.layers \(4\) exceeds model.encoder_layers \(3\)"):
        NMTModelConfig(encoder="hybrid", encoder_layers=3, hybrid=HybridOptions(layers=4)).validate()
    with pytest.raises(ConfigError, match=r"model.rnn.layers \(3\) must be below the encoder depth \(3\)"):
        NMTModelConfig(encoder="lstm_san", encoder_layers=3, rnn=RecurrentOptions(layers=3)).validate()
    # a sentence config caps the hybrid layers at its depth instead (HybridOptions' docstring)
    build_encoder("hybrid", EncoderArgs(in_dim=8, d=8, layers=1, heads=2, hybrid=HybridOptions(layers=2)))
