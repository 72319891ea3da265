"""What the registry says of each encoder (:class:`cn3.encoders.EncoderSpec`) is what the encoder does:
the facts the analysis, visualisation, probing and config checks read live there and nowhere else."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from cn3.config import ConfigError
from cn3.encoders import ENCODERS, EncoderArgs, build_encoder
from cn3.encoders.options import FAMILIES, CN3Options, HybridOptions, RecurrentOptions, execution_options
from cn3.layers import DynamicGraphLayer
from cn3.layers.onlstm import ONLSTM
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


#: values other than the base's (below) for every family option but the execution options, valid at the base sizes
ALTERNATIVES = {
    "hybrid.layers": [1], "hybrid.window": [2], "hybrid.combine": ["concat"], "hybrid.gate_per_head": [True],
    "rnn.layers": [1], "rnn.chunk_size": [2], "rnn.order": ["san_first"], "rnn.bidirectional": [True, False],
    "rnn.shortcut": [False], "rnn.residual": [True],
    "selfatt.hops": [2], "selfatt.att_hidden": [6], "selfatt.penalty": [0.5],
    "cnn.widths": [[2]], "cnn.filters": [6], "cnn.window": [3],
    "cn3.context": ["cnn", "none"], "cn3.context_layers": [2], "cn3.energy_dim": [6], "cn3.edge_attrs": [False],
    "cn3.edge_dim": [4], "cn3.init_range": [0.2], "cn3.energy_heads": [2], "cn3.relative_positions": [2],
    "cn3.edge_weights": ["sparsemax", "entmax15", "tree"], "cn3.energy_form": ["centered"], "cn3.parse_loss": [0.5],
    "cn3.hub_penalty": [0.5],
}

#: every execution option (:func:`cn3.encoders.options.execution_options`): values other than ``auto`` that
#: run on this CPU, and the layer attribute each sets (the code path, not the function computed)
EXECUTION = {
    "cn3.attention_impl": (["blockwise", "dense"], DynamicGraphLayer, "impl"),
    "rnn.onlstm_kernel": (["scan"], ONLSTM, "kernel"),
}


def _base(level: str) -> EncoderArgs:
    """Sizes where every option can show: two recurrent layers under one SAN layer (a residual needs a
    second layer), CN3's dependency edges on (their width needs them), dropout on (its draws seeded)."""
    return EncoderArgs(in_dim=8, d=8, layers=3, heads=2, ff=16, dropout=0.1, attention_dropout=0.1, attr_dim=3,
                       n_edge_types=5, level=level, rnn=RecurrentOptions(layers=2), cn3=CN3Options(edge_attrs=True))


def _with(args: EncoderArgs, option: str, value) -> EncoderArgs:
    family, key = option.split(".")
    return dataclasses.replace(args, **{family: dataclasses.replace(getattr(args, family), **{key: value})})


def _outcome(name: str, args: EncoderArgs) -> list[torch.Tensor]:
    """Every parameter after the encoder's own init, its output and every tensor of its info (attention,
    gates, Lin et al.'s penalty), from the same seeds in training mode."""
    torch.manual_seed(0)
    encoder = build_encoder(name, args).train()
    inputs = torch.Generator().manual_seed(1)
    batch, n = 2, 5
    x, v = torch.randn(batch, n, 8, generator=inputs), torch.randn(batch, n, 3, generator=inputs)
    mask = torch.ones(batch, n, dtype=torch.bool)
    mask[1, 3:] = False
    torch.manual_seed(2)
    h, info = encoder(x, mask, v=v, edge_type=chain_tree(batch, n))
    values = [*encoder.state_dict().values(), h]
    for item in info.values():
        values.extend(item if isinstance(item, list) else [item])
    return [t.detach() for t in values if isinstance(t, torch.Tensor)]


def _differs(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) != len(b) or any(x.shape != y.shape or not torch.equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("name", list(ENCODERS))
def test_an_encoder_reads_the_family_options_it_declares_and_no_other(name):
    """``EncoderSpec.options`` is what ``cn3 encoders`` lists and the train commands warn from
    (:func:`cn3.encoders.ignored_options`): each declared option changes the parameters, the output or
    the info at some task level the encoder serves; every other family option changes nothing at any.
    Execution options are checked apart (the next test): they change nothing computed, by design."""
    every = {f"{family}.{f.name}" for family, cls in FAMILIES.items() for f in dataclasses.fields(cls)}
    assert set(ALTERNATIVES) | set(EXECUTION) == every, "give the new option an alternative value"
    assert set(EXECUTION) == set(execution_options()) and not set(EXECUTION) & set(ALTERNATIVES)
    spec = ENCODERS[name]
    changing = set()
    for level in spec.levels:
        base = _outcome(name, _base(level))
        assert not _differs(base, _outcome(name, _base(level))), "the outcome is not reproducible"
        changing |= {option for option, values in ALTERNATIVES.items()
                     if any(_differs(base, _outcome(name, _with(_base(level), option, value))) for value in values)}
    declared = set(spec.options) - set(EXECUTION)
    assert changing == declared, (sorted(changing - declared), sorted(declared - changing))


@pytest.mark.parametrize("name", list(ENCODERS))
def test_an_execution_option_reaches_the_layers_of_the_encoders_that_declare_it_and_changes_no_result(name):
    """An execution option picks a layer's code path: an encoder declares it exactly when it has such
    layers, every one of them takes the configured value, and the parameters, output and info stay
    those of ``auto`` up to rounding (the paths compute one function)."""
    spec = ENCODERS[name]
    for option, (values, layer_type, attribute) in EXECUTION.items():
        for level in spec.levels:
            base = _outcome(name, _base(level))
            for value in values:
                args = _with(_base(level), option, value)
                torch.manual_seed(0)
                layers = [m for m in build_encoder(name, args).modules() if isinstance(m, layer_type)]
                assert bool(layers) == (option in spec.options), (option, level)
                assert all(getattr(layer, attribute) == value for layer in layers), (option, value)
                got = _outcome(name, args)
                assert len(got) == len(base)
                for a, b in zip(got, base):
                    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_ignored_overrides_name_what_the_encoder_does_not_read_as_the_user_spelled_it():
    from cn3.encoders import ignored_overrides
    from cn3.nmt.config import NMTModelConfig
    from cn3.sentence.config import ModelConfig

    sets = ["model.rnn.residual=true", "model.hybrid.window=3", "model.cnn={filters: 3}", "model.hidden=20",
            "train.lr=0.1", "model.energy_dim=50", "model.cn3.energy_dim=50"]
    # execution options: read (no warning) by the encoders whose layers they switch, ignored by the others
    assert ignored_overrides(ModelConfig(encoder="cn3"), ["model.attention_impl=dense"]) == []
    assert ignored_overrides(ModelConfig(encoder="lstm"), ["model.attention_impl=dense", "model.rnn.onlstm_kernel=scan"]
                             ) == ["model.attention_impl", "model.rnn.onlstm_kernel"]
    assert ignored_overrides(ModelConfig(encoder="onlstm"), ["model.rnn.onlstm_kernel=scan"]) == []
    assert ignored_overrides(NMTModelConfig(encoder="cn3"), ["model.cn3.attention_impl=fused"]) == []
    assert ignored_overrides(NMTModelConfig(encoder="onlstm_san"), ["model.rnn.onlstm_kernel=triton",
                                                                     "model.cn3.attention_impl=fused"]) == [
        "model.cn3.attention_impl"]
    assert ignored_overrides(NMTModelConfig(encoder="lstm_san"), ["model.rnn.onlstm_kernel=triton"]) == [
        "model.rnn.onlstm_kernel"]
    # sentence side: CN3's options are flat model.* keys; model.cn3.* is no key there (from_dict refuses it)
    assert ignored_overrides(ModelConfig(encoder="lstm"), sets[:6]) == [
        "model.hybrid.window", "model.cnn", "model.energy_dim"]
    assert ignored_overrides(ModelConfig(encoder="cn3"), sets[:6]) == ["model.rnn.residual", "model.hybrid.window",
                                                                       "model.cnn"]
    assert ignored_overrides(NMTModelConfig(encoder="hybrid"), [sets[0], *sets[2:5], sets[6]]) == [
        "model.rnn.residual", "model.cnn", "model.cn3.energy_dim"]
    assert ignored_overrides(NMTModelConfig(encoder="onlstm_san"), sets) == [
        "model.hybrid.window", "model.cnn", "model.cn3.energy_dim"]
