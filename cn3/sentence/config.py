"""The configuration of a training run: data, model and trainer sections.

``cn3/configs/<task>.yaml`` holds the tuned values per task; anything not given takes the defaults
below; ``--set section.key=value`` overrides either. The resolved config is saved in the run
directory and in every checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cn3.config import ConfigError
from cn3.encoders.options import CN3Options, family_options, with_encoder_options
from cn3.train.config import LoopConfig


@dataclass
class DataConfig:
    """Which prepared dataset to train on (prepared on the fly when missing or stale).

    Args:
        task: registry name (``cn3 tasks``).
        prepared: a prepared directory; ``None`` = ``prepared/<task>[-fold<k>]``.
        data: data root; ``None`` = ``$CN3_DATA`` or ``../shared/data``.
        annotator: ``None`` = the task's default.
        embeddings: word vectors file (GloVe text), absolute, relative to the working directory or
            relative to the data root; ``None`` = random initialisation. The vocabulary comes from
            the train split alone; words outside it keep their pretrained vector when scored.
        max_len: truncation (``None`` = the task's default).
        fold: test fold of cross-validated tasks.
        fine: TREC fine labels.
        min_freq: rarer train words become ``<unk>``.
        limit: use only ``limit`` evenly spaced items of every split (0 = all): quick experiments.
    """

    task: str = "snli"
    prepared: Path | None = None
    data: Path | None = None
    annotator: str | None = None
    embeddings: Path | None = None
    max_len: int | None = None
    fold: int = 0
    fine: bool = False
    min_freq: int = 1
    limit: int = 0


@dataclass
@with_encoder_options(flat=("cn3",))
class ModelConfig:
    """The network: node attributes -> an encoder of the zoo (``cn3 encoders``) -> the task head.

    Table 3 of the CN3 paper names the variants; each is a setting here:

    * ``CN3``: ``encoder: cn3``, ``context: lstm``;
    * ``+POS``: ``pos_dim > 0``; ``+char``: ``char: cnn``; ``+char+Spell``: also ``spell_dim > 0``;
    * ``Dep``: ``edge_attrs: true`` (dependency relation and direction as ``e_ik``).

    Beyond the paper (CN3's learned graphs are stars: RESULTS.md, "Why the graphs collapse"), all off by default:

    * ``edge_weights``, ``energy_form``, ``parse_loss``, ``hub_penalty``: how CN3's energies
      become edge weights and the graph regularisers (:class:`cn3.encoders.options.CN3Options`), cn3 only.
    * ``energy_heads``, ``relative_positions``: cn3 only, as in :class:`cn3.encoders.options.CN3Options`;
      ``energy_heads`` must divide ``energy_dim`` and ``2 * hidden``. ``info["alphas"]`` holds the
      mean over the heads, ``info["head_alphas"]`` each head's.
    * ``position_dim``: embeds each word's position in its sentence (``min(i, 100)``) as a node
      attribute, like ``pos_dim``: it joins ``x`` for every encoder and ``v`` for CN3's energy.

    ``attention_impl`` and ``rnn.onlstm_kernel`` are execution options (:mod:`cn3.encoders.options`).

    The baselines are the zoo's other encoders behind the same heads and trainer.

    Sizes: ``hidden`` is the width per direction of a bidirectional encoder, so every encoder's
    model width is ``d = 2 * hidden``; ``graph_layers`` is the encoder's depth (``None`` = its
    default, shown by ``cn3 encoders``); ``heads``, ``ff`` (0 = ``2 d``), ``attention_dropout`` and
    ``norm`` configure self-attention layers; the sections ``hybrid``, ``rnn``, ``selfatt`` and
    ``cnn`` are those of the NMT config; CN3's options (``model.cn3`` there) are plain ``model.*`` keys.

    ``pool``: how classification heads reduce the nodes to one vector, for encoders without a
    sentence vector of their own (``cnn``: max over time, ``treelstm``: the root, ``selfatt1``: the
    annotation matrix): ``mean`` (the paper) or ``max`` (element-wise, as InferSent's BiLSTM-max).

    ``word_dropout``: training-time probability of replacing a word by ``<unk>`` (trains the
    ``<unk>`` vector that unseen test words without a pretrained vector fall back to).

    ``init_range``: CN3's own init, ``U(-init_range, init_range)`` for the encoder and the head (the
    paper's 0.1); every other encoder and its head take their published or standard init.

    Args:
        encoder: the encoder, a name of the zoo (``cn3 encoders`` lists them with their levels).
        word_dim: word embedding width without pretrained vectors (with them, their width).
        freeze_embeddings: keep the word embeddings fixed during training.
        char: the character encoder of each word (``cnn``, the paper's +char; ``lstm``; ``none``).
        char_dim: character embedding width.
        char_out: the character encoder's output width per word.
        spell_dim: width of the projected spelling features, the word's shape as binary features
            (:mod:`data_prep.spelling`; 0 = none; the paper's +Spell).
        context: CN3's context layer under its graph layers, the local bias: ``lstm`` (a BiLSTM, the
            paper), ``cnn`` or ``none``.
        context_layers: the context layer's depth.
        edge_attrs: CN3's edge attribute ``e_ik`` from the parse (dependency relation and direction),
            the paper's Dep variant; needs an annotator that parses.
        edge_dim: width of the edge attribute embedding.
        mlp_hidden: the classification and pair heads' hidden width.
        dropout: on the node attributes, inside the encoder and before the head.
    """

    encoder: str = "cn3"
    word_dim: int = 50
    freeze_embeddings: bool = False
    char: Literal["none", "cnn", "lstm"] = "none"
    char_dim: int = 30
    char_out: int = 50
    pos_dim: int = 0
    spell_dim: int = 0
    context: Literal["lstm", "cnn", "none"] = "lstm"
    context_layers: int = 1
    hidden: int = 150
    graph_layers: int | None = None
    energy_dim: int = 100
    edge_attrs: bool = False
    edge_dim: int = 32
    energy_heads: int = 1
    relative_positions: int = 0
    attention_impl: Literal["auto", "blockwise", "dense", "fused"] = "auto"
    edge_weights: Literal["softmax", "sparsemax", "entmax15", "tree"] = "softmax"
    energy_form: Literal["additive", "centered"] = "additive"
    parse_loss: float = 0.0
    hub_penalty: float = 0.0
    position_dim: int = 0
    heads: int = 4
    ff: int = 0
    attention_dropout: float = 0.1
    norm: Literal["pre", "post"] = "pre"
    mlp_hidden: int = 300
    pool: Literal["mean", "max"] = "mean"
    dropout: float = 0.3
    word_dropout: float = 0.0
    init_range: float = 0.1
    # the family sections hybrid, rnn, selfatt, cnn follow (with_encoder_options)

    def validate(self) -> None:
        from cn3.encoders import check_options, get_spec

        get_spec(self.encoder)  # a bad name fails here, listing the known ones
        for name in ("word_dim", "hidden", "energy_dim", "mlp_hidden"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"model.{name} must be positive, got {getattr(self, name)}")
        for name in ("dropout", "word_dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"model.{name} must be in [0, 1), got {getattr(self, name)}")
        if self.graph_layers is not None and self.graph_layers < 1:
            raise ConfigError(f"model.graph_layers must be >= 1, got {self.graph_layers}")
        if self.position_dim < 0:
            raise ConfigError(f"model.position_dim must be >= 0 (0 = off), got {self.position_dim}")
        family_options(self)["cn3"].validate(prefix="model.")  # the sections validated themselves
        if self.encoder != "cn3" and (self.energy_heads != 1 or self.relative_positions):
            raise ConfigError(f"model.energy_heads and model.relative_positions configure the cn3 encoder's "
                              f"energy; model.encoder is '{self.encoder}' (leave them at 1 and 0)")
        paper = CN3Options()
        changed = [f"model.{key}" for key in ("edge_weights", "energy_form", "parse_loss", "hub_penalty")
                   if getattr(self, key) != getattr(paper, key)]
        if self.encoder != "cn3" and changed:
            raise ConfigError(f"{', '.join(changed)} configure the cn3 encoder's graph; model.encoder is "
                              f"'{self.encoder}' (leave them at their defaults)")
        if self.context != "none" and (2 * self.hidden) % self.energy_heads:
            raise ConfigError(f"model.energy_heads ({self.energy_heads}) must divide the model width "
                              f"2 * model.hidden ({2 * self.hidden}): each head attends over a slice of it")
        # the family's own check, before any data is read (the task level is the data's: "graph" here;
        # building the encoder checks again with the real one)
        check_options(self.encoder, self.encoder_args(in_dim=2 * self.hidden, level="graph"))

    def encoder_args(self, in_dim: int, level: str, attr_dim: int = 0, n_edge_types: int = 0):
        """The :class:`cn3.encoders.EncoderArgs` of a sentence model: width ``d = 2 * hidden``, depth
        :attr:`layers`, sinusoidal positions for position-blind encoders; ``in_dim``, ``level``,
        ``attr_dim`` and ``n_edge_types`` come from the node encoder and the data."""
        from cn3.encoders import EncoderArgs

        return EncoderArgs.from_config(self, in_dim=in_dim, d=2 * self.hidden, layers=self.layers, level=level,
                                       attr_dim=attr_dim, n_edge_types=n_edge_types, positions=True)

    @property
    def layers(self) -> int:
        """The encoder's depth: ``graph_layers``, else the encoder's default."""
        from cn3.encoders import get_spec

        return self.graph_layers if self.graph_layers is not None else get_spec(self.encoder).default_layers


@dataclass
class TrainConfig(LoopConfig):
    """The trainer: the loop's settings (:class:`cn3.train.config.LoopConfig`: seed, epochs, max_steps,
    patience, clip, evals_per_epoch, checkpoint_every, log_every, num_threads, tensorboard, precision,
    loader_workers) and these.

    AdaDelta is the paper's optimiser (lr 1.0, rho 0.95); Adam and SGD are selectable.
    ``max_tokens``: cap on ``rows * longest item`` per batch (long documents get smaller batches).
    ``lr_decay``: epoch ``e`` (from 0) trains with ``lr * lr_decay ** e`` (1.0 = constant, the paper);
    it damps the late epochs of small, noisy tasks.
    ``warmup``: the rate rises linearly from ``lr / warmup`` to ``lr`` over the first ``warmup``
    updates (0 = off, the paper); Transformers are usually trained with one (Vaswani et al. 2017).
    ``ema``: decay of an exponential moving average of the weights, which dev evaluation and
    ``best.pt`` use (0 = off; :mod:`cn3.train.averaging`).
    ``adversarial``: adds the loss of each batch with its word vectors moved against the model by
    this fraction of each sentence's embedding norm (Miyato et al., 2017; 0 = off;
    :mod:`cn3.train.adversarial`). Doubles the cost of an update.

    Args:
        optimizer: ``adadelta`` (the paper), ``adam`` or ``sgd``, with learning rate ``lr``.
        weight_decay: L2 penalty, the optimizer's ``weight_decay``.
        batch_size: training items per batch (``max_tokens`` may make it smaller).
        eval_batch_size: items per batch when evaluating and predicting.
    """

    optimizer: Literal["adadelta", "adam", "sgd"] = "adadelta"
    lr: float = 1.0
    lr_decay: float = 1.0
    warmup: int = 0
    weight_decay: float = 0.0
    ema: float = 0.0
    adversarial: float = 0.0
    batch_size: int = 32
    eval_batch_size: int = 128
    max_tokens: int = 0

    def validate(self) -> None:
        super().validate()
        if self.lr <= 0:
            raise ConfigError(f"train.lr must be positive, got {self.lr}")
        if not 0.0 < self.lr_decay <= 1.0:
            raise ConfigError(f"train.lr_decay must be in (0, 1], got {self.lr_decay}")
        if self.warmup < 0:
            raise ConfigError(f"train.warmup must be >= 0 updates, got {self.warmup}")
        if not 0.0 <= self.ema < 1.0:
            raise ConfigError(f"train.ema must be in [0, 1), got {self.ema}")
        if self.adversarial < 0:
            raise ConfigError(f"train.adversarial must be >= 0, got {self.adversarial}")
        if self.batch_size < 1:
            raise ConfigError("train.batch_size must be >= 1")


@dataclass
class RunConfig:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
