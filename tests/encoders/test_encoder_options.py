"""An encoder option is one declaration: a field of its family's dataclass in
``cn3/encoders/options.py`` reaches the sentence config (``model.*``), the NMT config
(``model.<family>.*``), ``--set`` with its "did you mean", the saved config and the encoder's
:class:`cn3.encoders.EncoderArgs`, which both kinds of run fill through one function."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import typing
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from cn3.config import ConfigError, from_dict, to_dict
from cn3.encoders import EncoderArgs
from cn3.encoders.options import FAMILIES, CN3Options, RecurrentOptions, family_options, with_encoder_options
from cn3.encoders.registry import SHARED_KEYS
from cn3.nmt.config import NMTModelConfig, resolve_nmt_config
from cn3.sentence.config import ModelConfig, RunConfig
from cn3.sentence.resolve import resolve_config

REPO = Path(__file__).resolve().parents[2]

#: one non-default value for every family and for CN3's flat sentence keys (valid together)
FAMILY_SETS = ["hybrid.window=3", "hybrid.combine=concat", "rnn.chunk_size=4", "rnn.order=san_first",
               "rnn.onlstm_kernel=scan", "selfatt.hops=2", "cnn.widths=[2, 3]", "cnn.window=3"]
CN3_VALUES = {"context": "cnn", "context_layers": 2, "energy_dim": 40, "edge_attrs": True, "edge_dim": 8,
              "init_range": 0.05, "energy_heads": 2, "relative_positions": 3, "attention_impl": "dense",
              "edge_weights": "tree", "energy_form": "centered", "hub_penalty": 0.5,
              "parse_loss": 0.0}  # parse_loss > 0 is refused on translation (no parses): tested below


def test_every_family_reaches_encoder_args_from_both_configs():
    assert set(CN3_VALUES) == {f.name for f in dataclasses.fields(CN3Options)}  # every CN3 option, set
    sentence = resolve_config("trec", None, {}, [f"model.{s}" for s in FAMILY_SETS] +
                              [f"model.{k}={json.dumps(v)}" for k, v in CN3_VALUES.items()]).model
    nmt = resolve_nmt_config(None, {}, [f"model.{s}" for s in FAMILY_SETS] +
                             [f"model.cn3.{k}={json.dumps(v)}" for k, v in CN3_VALUES.items()]).model
    for cfg, args in ((sentence, sentence.encoder_args(in_dim=7, level="node", attr_dim=3, n_edge_types=5)),
                      (nmt, nmt.encoder_args())):
        for name in FAMILIES:  # the config's own options object (a section), or CN3's flat keys gathered
            assert getattr(args, name) == family_options(cfg)[name], name
        assert args.cn3 == CN3Options(**CN3_VALUES)
        assert (args.hybrid.window, args.rnn.chunk_size, args.selfatt.hops, args.cnn.widths) == (3, 4, 2, [2, 3])
        assert args.rnn.onlstm_kernel == "scan"
        assert all(getattr(args, key) == getattr(cfg, key) for key in SHARED_KEYS)
    assert (sentence.encoder_args(7, "node", 3, 5).d, nmt.encoder_args().d) == (2 * sentence.hidden, nmt.d_model)
    assert sentence.encoder_args(7, "node", 3, 5) == EncoderArgs.from_config(
        sentence, in_dim=7, d=2 * sentence.hidden, layers=sentence.layers, level="node", attr_dim=3, n_edge_types=5)
    assert nmt.encoder_args() == EncoderArgs(
        in_dim=nmt.d_model, d=nmt.d_model, layers=nmt.encoder_layers, heads=nmt.heads, ff=nmt.ff,
        dropout=nmt.dropout, attention_dropout=nmt.attention_dropout, norm=nmt.norm, level="translation",
        positions=False, hybrid=nmt.hybrid, rnn=nmt.rnn, selfatt=nmt.selfatt, cnn=nmt.cnn, cn3=nmt.cn3)


def test_parse_loss_needs_parses_so_translation_refuses_it():
    assert resolve_config("trec", None, {}, ["model.parse_loss=0.5"]).model.parse_loss == 0.5
    with pytest.raises(ConfigError, match="model.cn3.parse_loss needs dependency parses"):
        resolve_nmt_config(None, {}, ["model.encoder=cn3", "model.cn3.parse_loss=0.5"])
    with pytest.raises(ConfigError, match="configure the cn3 encoder's graph"):
        resolve_config("trec", None, {}, ["model.encoder=lstm", "model.edge_weights=tree"])
    with pytest.raises(ConfigError, match="hub_penalty must be >= 0"):
        resolve_config("trec", None, {}, ["model.hub_penalty=-1"])


def test_the_saved_layout_of_both_model_sections_is_unchanged():
    """The key order of a run's ``config.yaml`` (written with ``sort_keys=False``) as before the
    families' fields were added by :func:`with_encoder_options`: the flat CN3 keys where they were
    (``attention_impl``, added since, declared beside them), the sections last."""
    assert [f.name for f in dataclasses.fields(ModelConfig)] == [
        "encoder", "word_dim", "freeze_embeddings", "char", "char_dim", "char_out", "pos_dim", "spell_dim",
        "context", "context_layers", "hidden", "graph_layers", "energy_dim", "edge_attrs", "edge_dim", "energy_heads",
        "relative_positions", "attention_impl", "edge_weights", "energy_form", "parse_loss", "hub_penalty",
        "position_dim", "heads", "ff", "attention_dropout", "norm",
        "mlp_hidden", "pool", "dropout", "word_dropout", "init_range", "hybrid", "rnn", "selfatt", "cnn"]
    assert [f.name for f in dataclasses.fields(NMTModelConfig)] == [
        "encoder", "d_model", "heads", "ff", "encoder_layers", "decoder_layers", "dropout", "attention_dropout",
        "norm", "tie", "max_positions", "hybrid", "rnn", "selfatt", "cnn", "cn3"]
    hints = typing.get_type_hints(ModelConfig)
    assert all(hints[name] is family for name, family in FAMILIES.items() if name != "cn3")
    assert list(to_dict(RunConfig())["model"]["hybrid"]) == ["layers", "window", "combine", "gate_per_head"]


def test_execution_options_reach_the_layers_and_the_saved_config():
    """``model.attention_impl`` (sentence) / ``model.cn3.attention_impl`` (translation) become every CN3
    layer's ``impl``, ``model.rnn.onlstm_kernel`` every ON-LSTM layer's ``kernel``; the resolved config
    (what a run saves as ``config.yaml``) records them, ``auto`` by default; a bad value is a
    ConfigError naming the key."""
    from cn3.layers import DynamicGraphLayer
    from cn3.layers.dynamic_graph import choose_impl
    from cn3.layers.onlstm import ONLSTM
    from cn3.nmt.transformer import ModelArgs as NMTArgs
    from cn3.nmt.transformer import Seq2Seq
    from cn3.sentence.model import ModelArgs, SentenceGraphModel

    defaults = to_dict(resolve_config("trec", None, {}, []))["model"]
    assert (defaults["attention_impl"], defaults["rnn"]["onlstm_kernel"]) == ("auto", "auto")
    assert to_dict(resolve_nmt_config(None, {}, []))["model"]["cn3"]["attention_impl"] == "auto"

    run = resolve_config("trec", None, {}, ["model.attention_impl=dense", "model.graph_layers=2", "model.hidden=8"])
    assert to_dict(run)["model"]["attention_impl"] == "dense"
    model = SentenceGraphModel(run.model, ModelArgs("graph", 3, 40, 5, 6, 11, 0))
    layers = [m for m in model.modules() if isinstance(m, DynamicGraphLayer)]
    assert len(layers) == 2 and all(layer.impl == "dense" for layer in layers)
    assert choose_impl(layers[0].impl, torch.device("cpu")) == "dense"  # not auto's blockwise

    for encoder, overrides in (("cn3", ["model.cn3.attention_impl=blockwise"]),
                               ("onlstm_san", ["model.rnn.onlstm_kernel=scan"])):
        translation = resolve_nmt_config(None, {"model.encoder": encoder}, overrides)
        saved = to_dict(translation)["model"]
        assert (saved["cn3"]["attention_impl"], saved["rnn"]["onlstm_kernel"]) == (
            ("blockwise", "auto") if encoder == "cn3" else ("auto", "scan"))
        model = Seq2Seq(translation.model, NMTArgs(30, 30))
        kinds = {type(m): getattr(m, "impl", None) or getattr(m, "kernel", None) for m in model.modules()
                 if isinstance(m, (DynamicGraphLayer, ONLSTM))}
        assert kinds == ({DynamicGraphLayer: "blockwise"} if encoder == "cn3" else {ONLSTM: "scan"})

    for resolve, key in ((lambda o: resolve_config("trec", None, {}, o), "model.attention_impl"),
                         (lambda o: resolve_nmt_config(None, {}, o), "model.cn3.attention_impl"),
                         (lambda o: resolve_config("trec", None, {}, o), "model.rnn.onlstm_kernel"),
                         (lambda o: resolve_nmt_config(None, {}, o), "model.rnn.onlstm_kernel")):
        with pytest.raises(ConfigError, match=rf"{key}: 'fast' is not one of 'auto'"):
            resolve([f"{key}=fast"])
    with pytest.raises(ConfigError, match=r"model\.attention_impl: 'fast' is not one of"):  # built in code
        ModelConfig(attention_impl="fast").validate()
    with pytest.raises(ConfigError, match=r"model\.rnn\.onlstm_kernel: 'fast' is not one of"):
        RecurrentOptions(onlstm_kernel="fast").validate()


def test_the_execution_options_values_are_the_layers():
    from cn3.layers.dynamic_graph import IMPLS
    from cn3.layers.onlstm import KERNELS

    hints = {name: typing.get_type_hints(family) for name, family in FAMILIES.items()}
    assert typing.get_args(hints["cn3"]["attention_impl"]) == IMPLS
    assert typing.get_args(hints["rnn"]["onlstm_kernel"]) == KERNELS
    assert typing.get_type_hints(ModelConfig)["attention_impl"] == hints["cn3"]["attention_impl"]


def test_unknown_option_keys_name_the_section_and_suggest():
    with pytest.raises(ConfigError, match=r"unknown key 'model\.hybrid\.windw'; did you mean 'model\.hybrid\.window'"):
        resolve_config("trec", None, {}, ["model.hybrid.windw=2"])
    with pytest.raises(ConfigError,
                       match=r"unknown key 'model\.cn3\.energy_head'; did you mean 'model\.cn3\.energy_heads'"):
        resolve_nmt_config(None, {}, ["model.cn3.energy_head=2"])
    with pytest.raises(ConfigError, match=r"unknown key 'model\.energy_head'; did you mean 'model\.energy_heads'"):
        resolve_config("trec", None, {}, ["model.energy_head=2"])
    with pytest.raises(ConfigError, match=r"unknown key 'model\.cn3'"):  # CN3's options are flat keys here
        resolve_config("trec", None, {}, ["model.cn3.energy_heads=2"])


def test_the_registry_checks_the_chosen_family_when_either_config_is_read():
    """:attr:`EncoderSpec.check` runs at config time on both sides (the sentence side too, before any
    data is prepared), through :func:`cn3.encoders.check_options`."""
    message = r"model.rnn.layers \(2\) must be below the encoder depth \(2\)"
    with pytest.raises(ConfigError, match=message):
        from_dict(RunConfig, {"model": {"encoder": "onlstm_san", "graph_layers": 2, "rnn": {"layers": 2}}})
    with pytest.raises(ConfigError, match=message):
        from_dict(NMTModelConfig, {"encoder": "lstm_san", "encoder_layers": 2, "rnn": {"layers": 2}})
    # a family's check does not run for another encoder; a family's ranges are its dataclass's validate
    assert from_dict(ModelConfig, {"encoder": "lstm", "graph_layers": 2, "rnn": {"layers": 2}}).rnn.layers == 2
    with pytest.raises(ConfigError, match=r"model\.hybrid\.layers and model\.hybrid\.window must be >= 0"):
        from_dict(NMTModelConfig, {"hybrid": {"window": -1}})
    with pytest.raises(ConfigError, match=r"model\.relative_positions must be >= 0"):  # flat CN3 keys: model.*
        from_dict(ModelConfig, {"relative_positions": -1})


def test_a_class_cannot_redeclare_what_the_families_declare():
    with pytest.raises(TypeError, match=r"Section\.energy_dim must be declared as CN3Options\.energy_dim is"):
        @dataclass
        @with_encoder_options(flat=("cn3",))
        class Section:
            energy_dim: int = 99  # CN3Options says 100

    with pytest.raises(TypeError, match="Section.hybrid: the family sections are added"):
        @dataclass
        @with_encoder_options()
        class Section:  # noqa: F811
            hybrid: int = 0

    @dataclass
    @with_encoder_options(flat=("cn3",))
    class Flat:
        width: int = 4
        energy_dim: int = 100  # declared: keeps its place

    assert [f.name for f in dataclasses.fields(Flat)][:3] == ["width", "energy_dim", "context"]
    assert family_options(Flat(energy_dim=20))["cn3"] == CN3Options(energy_dim=20)


# A throwaway option on an existing family (CN3's, flat on the sentence side; the hybrid section) and a
# throwaway family, each written once into a copy of cn3/encoders/options.py that is imported in place of
# the real one, and a throwaway encoder that reads them: nothing else of cn3 changes.
_SCRIPT = r'''
import importlib.util, json, sys
from pathlib import Path

source = Path("cn3/encoders/options.py").read_text(encoding="utf-8")
source = source.replace("    relative_positions: int = 0\n", "    relative_positions: int = 0\n    toy_scale: float = 1.0\n", 1)
source = source.replace("    gate_per_head: bool = False\n", "    gate_per_head: bool = False\n    toy_flag: bool = False\n", 1)
assert source.count("toy_") == 2
source += """

@dataclass
class ToyOptions:
    knob: int = 3

    def validate(self, prefix: str = "model.toy.") -> None:
        if self.knob < 0:
            raise ConfigError(f"{prefix}knob must be >= 0, got {self.knob}")


FAMILIES["toy"] = ToyOptions
"""
spec = importlib.util.spec_from_loader("cn3.encoders.options", loader=None)
options = importlib.util.module_from_spec(spec)
sys.modules["cn3.encoders.options"] = options
exec(compile(source, "cn3/encoders/options.py (with the throwaway options)", "exec"), options.__dict__)

from torch import nn

from cn3.config import ConfigError, to_dict
from cn3.encoders.registry import LEVELS, register
from cn3.nmt.config import resolve_nmt_config
from cn3.nmt.transformer import ModelArgs as NMTArgs, Seq2Seq
from cn3.sentence.model import ModelArgs, SentenceGraphModel
from cn3.sentence.resolve import resolve_config

seen = []


class Toy(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.out_dim, self.proj = a.d, nn.Linear(a.in_dim, a.d)

    def reset_parameters(self):
        self.proj.reset_parameters()

    def forward(self, x, mask, v=None, edge_type=None):
        return self.proj(x), {}


def check(a):
    if a.toy.knob > 10 * a.layers:
        raise ConfigError(f"model.toy.knob ({a.toy.knob}) exceeds ten per layer ({a.layers})")


@register("toy", "a throwaway encoder", levels=LEVELS, check=check)
def build(a):
    seen.append(a)
    return Toy(a)


def read(args):
    return {"knob": args.toy.knob, "scale": args.cn3.toy_scale, "flag": args.hybrid.toy_flag, "level": args.level}


def error(resolve, *overrides):
    try:
        resolve(list(overrides))
    except ConfigError as err:
        return str(err)
    return None


sentence = lambda overrides: resolve_config("trec", None, {}, ["model.encoder=toy", *overrides])
nmt = lambda overrides: resolve_nmt_config(None, {"model.encoder": "toy"}, overrides)
run = sentence(["model.toy.knob=7", "model.toy_scale=0.5", "model.hybrid.toy_flag=true"])
SentenceGraphModel(run.model, ModelArgs("graph", 3, 40, 5, 6, 11, 0))
translation = nmt(["model.toy.knob=9", "model.cn3.toy_scale=0.25", "model.hybrid.toy_flag=true"])
Seq2Seq(translation.model, NMTArgs(30, 30))
print(json.dumps({
    "sentence": read(seen[0]), "translation": read(seen[1]),
    "sentence_keys": list(to_dict(run)["model"]), "translation_keys": list(to_dict(translation)["model"]),
    "sentence_hybrid_keys": list(to_dict(run)["model"]["hybrid"]),
    "defaults": read(resolve_config("trec", None, {}, []).model.encoder_args(8, "graph")),
    "errors": [error(sentence, "model.toy.knbo=1"), error(sentence, "model.toy_scal=1"),
               error(nmt, "model.cn3.toy_scal=1"), error(nmt, "model.hybrid.toy_flg=true"),
               error(sentence, "model.toy.knob=-1"), error(nmt, "model.toy.knob=-1"),
               error(sentence, "model.toy.knob=11"), error(nmt, "model.toy.knob=31")],
}))
'''  # noqa: E501 (two lines of the script replace whole source lines)


@pytest.mark.slow
def test_a_new_option_or_family_is_one_declaration():
    """Run in a fresh interpreter, so the configs and ``EncoderArgs`` are built from the copy of
    ``options.py`` with the throwaway declarations (what a contributor would write there)."""
    result = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.splitlines()[-1])
    assert out["sentence"] == {"knob": 7, "scale": 0.5, "flag": True, "level": "graph"}
    assert out["translation"] == {"knob": 9, "scale": 0.25, "flag": True, "level": "translation"}
    assert out["defaults"] == {"knob": 3, "scale": 1.0, "flag": False, "level": "graph"}
    # the sentence config spells CN3's new option flat, after the declared keys and before the sections
    assert out["sentence_keys"][-7:] == ["init_range", "toy_scale", "hybrid", "rnn", "selfatt", "cnn", "toy"]
    assert out["translation_keys"][-6:] == ["hybrid", "rnn", "selfatt", "cnn", "cn3", "toy"]
    assert out["sentence_hybrid_keys"][-1] == "toy_flag"
    knbo, scal, cn3_scal, flg, negative, nmt_negative, too_big, nmt_too_big = out["errors"]
    assert "unknown key 'model.toy.knbo'; did you mean 'model.toy.knob'?" in knbo
    assert "unknown key 'model.toy_scal'; did you mean 'model.toy_scale'?" in scal
    assert "unknown key 'model.cn3.toy_scal'; did you mean 'model.cn3.toy_scale'?" in cn3_scal
    assert "unknown key 'model.hybrid.toy_flg'; did you mean 'model.hybrid.toy_flag'?" in flg
    assert "model.toy.knob must be >= 0, got -1" in negative and "model.toy.knob must be >= 0" in nmt_negative
    assert "model.toy.knob (11) exceeds ten per layer (1)" in too_big  # the registry's check, at config time
    assert "model.toy.knob (31) exceeds ten per layer (3)" in nmt_too_big
