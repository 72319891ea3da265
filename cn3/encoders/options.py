"""Per-family encoder options, shared by the sentence config (``model.*``) and the NMT config.

Each dataclass is a config section (``model.hybrid``, ``model.rnn``, ...) that the same encoder reads
on every task level, so a setting means the same in ``cn3 train`` and ``cn3 nmt train``.
:func:`with_encoder_options` gives a config's model section (and
:class:`cn3.encoders.registry.EncoderArgs`) one field per family of :data:`FAMILIES`;
:func:`family_options` reads them back. A new option is a field of its family's dataclass (checked in
its ``validate``); a new family, a dataclass and a line of :data:`FAMILIES`.

An *execution option* (``metadata=EXECUTION``: ``cn3.attention_impl``, ``rnn.onlstm_kernel``) picks
only how a layer runs, the same function to rounding; it is a config key so that every run's
``config.yaml`` records the code path that ran.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Literal

from cn3.config import ConfigError

#: ``field(metadata=EXECUTION)`` marks an execution option (module docstring).
EXECUTION = {"execution": True}


def _check_choice(options, name: str, prefix: str) -> None:
    """A ConfigError naming ``prefix + name`` unless the field holds one of its ``Literal`` values (the
    config's own coercion checks text; this checks options built in code)."""
    allowed = typing.get_args(typing.get_type_hints(type(options))[name])
    if getattr(options, name) not in allowed:
        raise ConfigError(f"{prefix}{name}: {getattr(options, name)!r} is not one of "
                          f"{', '.join(map(repr, allowed))}")


@dataclass
class HybridOptions:
    """Xu et al. (ACL 2019): local (band ``|i-j| <= window``) and global attention from one energy.

    Args:
        layers: the lowest ``layers`` self-attention layers are hybrid (``k``; the paper's default 2;
            capped at the encoder's depth).
        window: ``m`` of eq. 3 (the paper's default 1).
        combine: ``gate`` (eq. 4-5) or ``concat`` (the paper's ablation: both outputs concatenated
            and projected).
        gate_per_head: one gate per token and head (``W`` maps ``d -> heads``); the default is the
            paper's one scalar per token (``d -> 1``), shared by all heads.
    """

    layers: int = 2
    window: int = 1
    combine: Literal["gate", "concat"] = "gate"
    gate_per_head: bool = False

    def validate(self, prefix: str = "model.hybrid.") -> None:
        if self.layers < 0 or self.window < 0:
            raise ConfigError(f"{prefix}layers and {prefix}window must be >= 0")


@dataclass
class RecurrentOptions:
    """Hao et al. (2019): ``layers`` recurrent layers (ON-LSTM or LSTM) under the self-attention
    layers of ``onlstm_san``/``lstm_san``, joined by ``H = H_rnn + H_san`` (eq. 10).

    Args:
        layers: ``K``, the recurrent layers of ``onlstm_san``/``lstm_san`` (the self-attention layers are
            the encoder's depth minus ``K``).
        chunk_size: ON-LSTM master-gate chunk size ``C`` (must divide the ON-LSTM width and leave two
            chunks or more: with one the cell never writes); ``None`` = the largest such divisor up
            to 8 (Shen et al.'s).
        order: ``rnn_first`` (the paper: recurrent layers below the SAN layers) or ``san_first``.
        bidirectional: two half-width directions concatenated; ``None`` = the level's default
            (sentence tasks: bidirectional, as the CN3 paper's LSTM baseline; translation: left to
            right, as Hao et al.).
        shortcut: add the recurrent stack's output to the SAN stack's output (eq. 10).
        residual: residual connections between the recurrent layers (GNMT), for deep stacks, which
            learn slowly without them (:class:`cn3.layers.onlstm.RecurrentStack`).
        onlstm_kernel: execution option, the kernel of every ON-LSTM layer's recurrence: ``scan``,
            ``triton`` or ``auto`` (:mod:`cn3.layers.onlstm`).
    """

    layers: int = 1
    chunk_size: int | None = None
    order: Literal["rnn_first", "san_first"] = "rnn_first"
    bidirectional: bool | None = None
    shortcut: bool = True
    residual: bool = False
    onlstm_kernel: Literal["auto", "scan", "triton"] = field(default="auto", metadata=EXECUTION)

    def validate(self, prefix: str = "model.rnn.") -> None:
        if self.layers < 1 or (self.chunk_size is not None and self.chunk_size < 1):
            raise ConfigError(f"{prefix}layers and {prefix}chunk_size must be >= 1")
        _check_choice(self, "onlstm_kernel", prefix)


@dataclass
class SelfAttOptions:
    """Lin et al. (ICLR 2017), the structured self-attentive sentence embedding (``selfatt1``).

    Args:
        hops: ``r``, rows of the annotation matrix ``A`` (attention hops over the BiLSTM states).
        att_hidden: ``d_a``, width of ``W_s1``.
        penalty: coefficient of ``||A A^T - I||_F^2`` added to the loss (per sentence, averaged).
    """

    hops: int = 4
    att_hidden: int = 100
    penalty: float = 1.0

    def validate(self, prefix: str = "model.selfatt.") -> None:
        if self.hops < 1 or self.att_hidden < 1 or self.penalty < 0:
            raise ConfigError(f"{prefix}hops and att_hidden must be >= 1 and penalty >= 0")


@dataclass
class CNNOptions:
    """Convolutional baselines: Kim (2014) for sentences, Collobert et al. (2011) for tagging.

    Args:
        widths: filter widths of the sentence CNN (Kim: 3, 4, 5), each with ``filters`` maps,
            max-pooled over time.
        filters: feature maps per width (Kim: 100).
        window: the tagging CNN's window (Collobert et al.: 5 words centred on each word).
    """

    widths: list[int] = field(default_factory=lambda: [3, 4, 5])
    filters: int = 100
    window: int = 5

    def validate(self, prefix: str = "model.cnn.") -> None:
        if not self.widths or min(self.widths) < 1 or self.filters < 1 or self.window < 1 or self.window % 2 == 0:
            raise ConfigError(f"{prefix.rstrip('.')}: widths and filters must be >= 1 and window an odd number >= 1")


@dataclass
class CN3Options:
    """The CN3 layer's settings when it encodes translation sources (``model.cn3`` of the NMT config;
    on sentence tasks the same settings are the flat ``model.*`` keys). See
    :class:`cn3.encoders.cn3_encoder.CN3Encoder`.

    Args:
        context: the context layer under the graph layers: ``lstm`` (a BiLSTM, the paper), ``cnn``
            or ``none``.
        context_layers: the context layer's depth.
        energy_dim: rows of ``W`` in the energy ``u^T tanh(W [h_k, h_i, v_i, v_k, e_ik])``.
        edge_attrs: ``e_ik`` from the parse (dependency relation and direction), the paper's Dep.
        edge_dim: width of the edge attribute embedding.
        init_range: CN3's init, ``U(-init_range, init_range)`` (the paper's 0.1).
        energy_heads: ``H`` energy heads per layer, each with ``energy_dim / H`` rows of ``W``, its own
            ``u``, softmax and ``1/H`` slice of the node states (1 = the paper). Must divide
            ``energy_dim`` and the model width.
        relative_positions: ``C > 0`` adds the clipped offset ``clip(k - i, -C, C)`` to the edge
            attribute ``e_ik`` (0 = off, the paper).
        attention_impl: execution option, the path of every CN3 layer's energy, softmax and messages:
            ``blockwise``, ``dense``, ``fused`` or ``auto`` (:mod:`cn3.layers.dynamic_graph`).
        edge_weights: how energies become edge weights: ``softmax`` (the paper), ``sparsemax`` or
            ``entmax15`` (rows keep a few non-zero edges; the ``entmax`` package) or ``tree`` (the
            marginals of a distribution over dependency trees, matrix-tree theorem; the diagonal holds
            the root's share) (:mod:`cn3.layers.edge_weights`).
        energy_form: ``additive`` (the paper) or ``centered`` (each key's mean energy over the queries
            removed: what is left depends on the query).
        parse_loss: ``lambda`` of the cross-entropy of the first graph layer's first head against the
            parse's heads, added to the training loss (LISA); needs parsed data (0 = off).
        hub_penalty: weight of the penalty on each key's column mass (the queries reading it) above
            :data:`cn3.layers.edge_weights.HUB_BOUND` (0 = off).
    """

    context: Literal["lstm", "cnn", "none"] = "lstm"
    context_layers: int = 1
    energy_dim: int = 100
    edge_attrs: bool = False
    edge_dim: int = 32
    init_range: float = 0.1
    energy_heads: int = 1
    relative_positions: int = 0
    attention_impl: Literal["auto", "blockwise", "dense", "fused"] = field(default="auto", metadata=EXECUTION)
    edge_weights: Literal["softmax", "sparsemax", "entmax15", "tree"] = "softmax"
    energy_form: Literal["additive", "centered"] = "additive"
    parse_loss: float = 0.0
    hub_penalty: float = 0.0

    def validate(self, prefix: str = "model.cn3.") -> None:
        check_cn3_options(self.energy_dim, self.energy_heads, self.relative_positions, prefix)
        for name in ("attention_impl", "edge_weights", "energy_form"):
            _check_choice(self, name, prefix)
        for name in ("parse_loss", "hub_penalty"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{prefix}{name} must be >= 0 (0 = off), got {getattr(self, name)}")


def check_cn3_options(energy_dim: int, energy_heads: int, relative_positions: int, prefix: str = "model.") -> None:
    """Named ConfigErrors for the CN3 layer's energy heads and relative positions."""
    if energy_heads < 1:
        raise ConfigError(f"{prefix}energy_heads must be >= 1, got {energy_heads}")
    if energy_dim % energy_heads:
        raise ConfigError(f"{prefix}energy_dim ({energy_dim}) must be a multiple of {prefix}energy_heads "
                          f"({energy_heads}): each head has energy_dim / energy_heads rows of W")
    if relative_positions < 0:
        raise ConfigError(f"{prefix}relative_positions must be >= 0 (0 = off), got {relative_positions}")


#: Every encoder family's options: the config section (``model.<name>``) and its dataclass, in the order
#: the configs list them. A new family is a dataclass above and a line here.
FAMILIES: dict[str, type] = {
    "hybrid": HybridOptions,
    "rnn": RecurrentOptions,
    "selfatt": SelfAttOptions,
    "cnn": CNNOptions,
    "cn3": CN3Options,
}


def execution_options() -> tuple[str, ...]:
    """Every execution option (module docstring) as ``family.key``, in :data:`FAMILIES` order."""
    return tuple(f"{name}.{f.name}" for name, family in FAMILIES.items() for f in dataclasses.fields(family)
                 if f.metadata.get("execution"))


def with_encoder_options(*, flat: tuple[str, ...] = ()):
    """Class decorator, applied under ``@dataclass``: one field per family of :data:`FAMILIES`.

    A family is a nested section (``model.hybrid.window``), appended after the declared fields. A
    family in ``flat`` (CN3 on the sentence side: plain ``model.*`` keys) lends its fields instead:
    those the class declares stay where they are (the key order of a saved ``config.yaml``), the rest
    are appended before the sections.

    Raises:
        TypeError: a declared flat field differs from the family's type or default, or the class
            declares a family section itself.
    """

    def add(cls):
        own = cls.__dict__.get("__annotations__")
        if own is None:
            own = cls.__annotations__ = {}
        declared = typing.get_type_hints(cls) if flat else {}
        for name in flat:
            family = FAMILIES[name]
            hints = typing.get_type_hints(family)
            for f in dataclasses.fields(family):
                if f.name not in own:
                    own[f.name] = hints[f.name]
                    setattr(cls, f.name, f.default if f.default is not dataclasses.MISSING
                            else field(default_factory=f.default_factory))
                elif declared[f.name] != hints[f.name] or _default(cls.__dict__.get(f.name)) != _default(f):
                    raise TypeError(f"{cls.__name__}.{f.name} must be declared as {family.__name__}.{f.name} is "
                                    "(same type and default), or left out (it is added)")
        for name, family in FAMILIES.items():
            if name not in flat:
                if name in own:
                    raise TypeError(f"{cls.__name__}.{name}: the family sections are added by with_encoder_options")
                own[name] = family
                setattr(cls, name, field(default_factory=family))
        cls._flat_families = tuple(flat)
        return cls

    return add


def _default(value):
    """A field's default value (calling its ``default_factory``), or a class attribute's."""
    if isinstance(value, dataclasses.Field):
        if value.default_factory is not dataclasses.MISSING:
            return value.default_factory()
        return value.default
    return value


def family_options(section) -> dict[str, object]:
    """Each family's options as ``section`` (an instance of a class given :func:`with_encoder_options`)
    holds them: its nested section, or for a flat family the dataclass built from its keys."""
    flat = getattr(type(section), "_flat_families", ())
    return {name: family(**{f.name: getattr(section, f.name) for f in dataclasses.fields(family)})
            if name in flat else getattr(section, name) for name, family in FAMILIES.items()}
