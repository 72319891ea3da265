"""One registry of sentence encoders, looked up by name from the config (fairseq style).

Every encoder maps node vectors to contextual states under one interface, whatever the task level
(a sentence, a sentence pair, tagging or the source side of translation)::

    enc = build_encoder(name, EncoderArgs(...))          # explicit sizes, as PyG layers take them
    h, info = enc(x, mask, v=None, edge_type=None)
    # x (B, N, in_dim), mask (B, N) True at real tokens, v (B, N, attr_dim) node attributes,
    # edge_type (B, N, N) dependency arc types (0 = no arc; see data_prep.graphs)
    # h (B, N, enc.out_dim), zero at padding; info: {"alphas": [...], "gates": [...]} per layer where
    # the model has them, "loss": an auxiliary loss term already weighted (Lin et al.'s penalty)

Optionally an encoder has its own sentence vector (``enc.pool(h, mask, info) -> (B, enc.pool_dim)``:
Tai et al. read the root, Lin et al. the flattened annotation matrix); otherwise heads pool ``h``.
``reset_parameters()`` owns each encoder's initialisation (its paper's, or the standard one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from torch import nn

from cn3.config import ConfigError, parse_override
from cn3.encoders.options import FAMILIES, family_options, with_encoder_options
from cn3.util.encoder_names import LEVEL_NAMES, LEVELS, SENTENCE_LEVELS  # noqa: F401  (re-exported)

#: The self-attention settings both model sections (sentence and translation) spell as EncoderArgs does
SHARED_KEYS = ("heads", "ff", "dropout", "attention_dropout", "norm")


@dataclass
@with_encoder_options()
class EncoderArgs:
    """What a builder may read: sizes fixed by the data and the config, resolved by each side.

    Args:
        in_dim: width of ``x``.
        d: the model width; every encoder but ``nbow`` (and the CNNs' feature maps) outputs it.
        layers: depth (graph layers of CN3, self-attention layers, recurrent layers, ...).
        heads, ff: self-attention heads and feed-forward width.
        dropout, attention_dropout: rates.
        norm: ``pre`` or ``post`` LayerNorm in self-attention layers.
        attr_dim: node attribute width (0 = none); n_edge_types: dependency arc types (0 = no trees).
        level: ``graph | pair | node | translation``.
        positions: add sinusoidal positions before position-blind encoders (the translation model
            adds them to its embeddings itself).
        hybrid, rnn, selfatt, cnn, cn3: each family's options (:data:`cn3.encoders.options.FAMILIES`).
    """

    in_dim: int
    d: int
    layers: int = 1
    heads: int = 4
    ff: int = 0
    dropout: float = 0.0
    attention_dropout: float = 0.0
    norm: str = "pre"
    attr_dim: int = 0
    n_edge_types: int = 0
    level: str = "graph"
    positions: bool = True

    @property
    def ff_width(self) -> int:
        return self.ff or 2 * self.d

    @classmethod
    def from_config(cls, model, **sizes) -> EncoderArgs:
        """The :data:`SHARED_KEYS` and every family's options from ``model`` (a model section of either
        config), plus ``sizes``, which each kind of run derives itself (``in_dim``, ``d``, ``layers``, ...)."""
        return cls(**{key: getattr(model, key) for key in SHARED_KEYS}, **family_options(model), **sizes)


@dataclass(frozen=True)
class EncoderSpec:
    """A registry entry.

    Args:
        name: the config value (``model.encoder``).
        paper: the model's source, as cited in ``cn3 encoders``.
        build: ``EncoderArgs -> nn.Module``.
        needs_trees: reads ``edge_type`` (dependency trees): serves only data prepared with them.
        uses_attrs: reads the node attributes ``v`` (POS, characters, spelling) when given.
        levels: the task levels it serves.
        default_layers: depth when the config leaves it unset.
        paper_uniform_init: the whole model (head included) takes the paper's ``U(-r, r)`` init (CN3).
        attention: how ``info["alphas"]`` rows read (:mod:`cn3.analysis.collect`): ``graph`` (word i over
            words k), ``causal`` (over the words before i), ``annotation`` (hops, not words); None =
            the encoder returns no attention weights.
        multi_head: its per-layer weights are the mean over attention heads.
        learns_edges: its layers learn edge weights ``alpha_ik`` that ``cn3 visualize edges`` draws (CN3).
        split_stack: the name of its lower (recurrent) stack's states, probed apart from the whole
            (``cn3 probe``; Hao et al.'s ``H_onlstm``), or None.
        table_order: its row in ``cn3 encoders`` (the CN3 paper's Table 3 rows first).
        check: the family's own config check on the resolved :class:`EncoderArgs` (raises a
            ConfigError naming the keys), or None; run by :func:`check_options`.
        options: the family options (``family.key``, e.g. ``rnn.residual``) it reads at some level it
            serves; it ignores every other (:func:`ignored_options`). Each changes what it builds or
            computes, except execution options, which change the outputs only to rounding.
    """

    name: str
    paper: str
    build: Callable[[EncoderArgs], nn.Module]
    needs_trees: bool = False
    uses_attrs: bool = False
    levels: tuple[str, ...] = LEVELS
    default_layers: int = 1
    paper_uniform_init: bool = False
    attention: str | None = None
    multi_head: bool = False
    learns_edges: bool = False
    split_stack: str | None = None
    table_order: int = 100
    check: Callable[[EncoderArgs], None] | None = None
    options: tuple[str, ...] = ()


ENCODERS: dict[str, EncoderSpec] = {}


def register(name: str, paper: str, **kwargs):
    """Decorator registering ``build(args) -> nn.Module`` under ``name``; the registry stays in
    ``table_order``."""

    def wrap(build: Callable[[EncoderArgs], nn.Module]):
        if name in ENCODERS:
            raise ValueError(f"encoder {name!r} registered twice")
        ENCODERS[name] = EncoderSpec(name, paper, build, **kwargs)
        ordered = sorted(ENCODERS.values(), key=lambda spec: spec.table_order)  # stable: ties keep their order
        ENCODERS.clear()
        ENCODERS.update((spec.name, spec) for spec in ordered)
        return build

    return wrap


def get_spec(name: str) -> EncoderSpec:
    """The entry for ``name``; a ConfigError listing the known names otherwise."""
    if name not in ENCODERS:
        import difflib

        close = difflib.get_close_matches(name, ENCODERS, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ConfigError(f"unknown encoder '{name}'{hint} (known: {', '.join(ENCODERS)}; see `cn3 encoders`)")
    return ENCODERS[name]


def ignored_options(name: str, keys) -> list[str]:
    """The family options among ``keys`` (``family.key``, or a whole ``family`` section) that encoder
    ``name`` does not read: setting them changes nothing it builds (the CLI warns of a ``--set`` one).
    Keys outside the families are not its to judge and are left out."""
    read = get_spec(name).options
    ignored = []
    for key in keys:
        family = key.split(".")[0]
        if family not in FAMILIES:
            continue
        # one option, or a whole section: read if the encoder reads any option of it
        reads = key in read if "." in key else any(option.startswith(family + ".") for option in read)
        if not reads:
            ignored.append(key)
    return ignored


def ignored_overrides(model, overrides: list[str]) -> list[str]:
    """The ``--set`` keys among ``overrides`` (``key=value`` texts), as spelled, that name a family
    option of ``model`` (a model section of either config) which ``model.encoder`` ignores: accepted,
    but changing nothing (the CLI warns)."""
    flat = {f.name: family for family in getattr(type(model), "_flat_families", ())
            for f in fields(FAMILIES[family])}
    ignored = []
    for text in overrides:
        path, _ = parse_override(text)
        if path[0] != "model" or len(path) < 2:
            continue
        key = f"{flat[path[1]]}.{path[1]}" if path[1] in flat else ".".join(path[1:3])
        if ignored_options(model.encoder, [key]):
            ignored.append(".".join(path))
    return ignored


def check_serves(name: str, level: str, has_trees: bool, where: str = "the data") -> EncoderSpec:
    """Fail at config time when ``name`` cannot serve ``level`` or needs trees ``where`` lacks."""
    spec = get_spec(name)
    if level not in spec.levels:
        served = ", ".join(LEVEL_NAMES[lv] for lv in spec.levels)
        raise ConfigError(f"encoder '{name}' does not serve {LEVEL_NAMES[level]} tasks (it serves: {served})")
    if spec.needs_trees and not has_trees:
        raise ConfigError(f"encoder '{name}' needs dependency trees, but {where} has none: prepare the task with "
                          "an annotator that parses (--annotator gold where the files carry trees, spacy or "
                          "stanza), or pick an encoder that does not need trees (`cn3 encoders`)")
    return spec


def check_options(name: str, args: EncoderArgs) -> EncoderSpec:
    """Run ``name``'s family check (:attr:`EncoderSpec.check`) on ``args``; returns its spec."""
    spec = get_spec(name)
    if spec.check is not None:
        spec.check(args)
    return spec


def build_encoder(name: str, args: EncoderArgs) -> nn.Module:
    """Build encoder ``name`` (see the module docstring for the interface), after its family's check."""
    spec = check_options(name, args)
    encoder = spec.build(args)
    if not hasattr(encoder, "out_dim"):
        raise TypeError(f"encoder {name!r} does not declare out_dim")
    return encoder
