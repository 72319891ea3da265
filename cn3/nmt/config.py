"""The configuration of an NMT run: data, model (with per-encoder sections) and trainer.

Resolution order (:func:`resolve_nmt_config`): these dataclass defaults <- ``cn3/configs/nmt/small.yaml``
(or ``--config FILE``) <- dedicated CLI flags (``--encoder``, ``--src``/``--tgt``, ``--data``,
``--seed``) <- ``--set section.key=value``. The resolved config is saved in the run directory and in
every checkpoint. Unknown keys and wrong types raise :class:`cn3.config.ConfigError` naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cn3.config import CONFIG_DIR, ConfigError, from_dict, resolve
from cn3.encoders.options import with_encoder_options
from cn3.train.config import LoopConfig

DEFAULT_CONFIG = CONFIG_DIR / "nmt" / "small.yaml"



@dataclass
class NMTDataConfig:
    """Where the parallel text comes from and how it is cut into subwords.

    Args:
        corpus: ``multi30k`` (the staged ``multi30k/raw`` files under the data root) or ``files``
            (``train_src``/``train_tgt``, from ``--src``/``--tgt``).
        data: data root for ``multi30k``; ``None`` = ``$CN3_DATA`` or ``../shared/data``.
        src_lang, tgt_lang: file suffixes of the Multi30k files (``en``, ``de``).
        train_src, train_tgt: line-aligned training files (``corpus: files``).
        valid_src, valid_tgt: a dev pair (``corpus: files``); without them ``valid_size`` training
            pairs, chosen with ``train.seed``, are held out as the dev split.
        test_src, test_tgt: an optional test pair (``corpus: files``).
        valid_size: pairs held out when no dev files are given.
        vocab_size: sentencepiece BPE vocabulary (a soft limit: tiny corpora get fewer pieces).
        joint_vocab: one BPE model for both languages (needed for ``model.tie: all``).
        max_len: training pairs with more subwords than this on either side are skipped.
        character_coverage: sentencepiece ``character_coverage``.
    """

    corpus: Literal["multi30k", "files"] = "multi30k"
    data: Path | None = None
    src_lang: str = "en"
    tgt_lang: str = "de"
    train_src: Path | None = None
    train_tgt: Path | None = None
    valid_src: Path | None = None
    valid_tgt: Path | None = None
    test_src: Path | None = None
    test_tgt: Path | None = None
    valid_size: int = 500
    vocab_size: int = 8000
    joint_vocab: bool = True
    max_len: int = 100
    character_coverage: float = 1.0

    def validate(self) -> None:
        if self.corpus == "files" and (self.train_src is None or self.train_tgt is None):
            raise ConfigError("data.corpus 'files' needs data.train_src and data.train_tgt (--src FILE --tgt FILE)")
        for a, b in (("valid_src", "valid_tgt"), ("test_src", "test_tgt")):
            if (getattr(self, a) is None) != (getattr(self, b) is None):
                raise ConfigError(f"data.{a} and data.{b} must be given together")
        if self.vocab_size < 8:
            raise ConfigError(f"data.vocab_size must be >= 8, got {self.vocab_size}")
        if self.max_len < 1 or self.valid_size < 1:
            raise ConfigError("data.max_len and data.valid_size must be >= 1")


@dataclass
@with_encoder_options()
class NMTModelConfig:
    """The encoder-decoder Transformer; ``encoder`` picks the source encoder from the zoo
    (``cn3 encoders``: every encoder that serves translation, CN3 included).

    Args:
        encoder: a registry name, e.g. ``transformer | hybrid | local | onlstm_san | lstm_san | cn3``.
        d_model: the model width (embeddings, every encoder and decoder layer).
        heads: attention heads per layer.
        ff: the feed-forward sublayer's hidden width.
        encoder_layers: the encoder's depth (for ``onlstm_san``/``lstm_san``: ``rnn.layers``
            recurrent + the rest self-attention layers).
        norm: ``pre`` (LayerNorm before each sublayer, final LayerNorm) or ``post`` (Vaswani et al.).
        decoder_layers: the decoder's depth.
        dropout: on embeddings and sublayer outputs.
        attention_dropout: on attention weights.
        max_positions: the sinusoidal position table's first length (a longer input grows it).
        tie: ``none``; ``decoder`` (target embedding = output projection); ``all`` (also the source
            embedding; needs ``data.joint_vocab``).
        hybrid, rnn, selfatt, cnn, cn3: the options of those encoder families
            (:mod:`cn3.encoders.options`).
    """

    encoder: str = "transformer"
    d_model: int = 256
    heads: int = 4
    ff: int = 1024
    encoder_layers: int = 3
    decoder_layers: int = 3
    dropout: float = 0.1
    attention_dropout: float = 0.1
    norm: Literal["pre", "post"] = "pre"
    tie: Literal["none", "decoder", "all"] = "all"
    max_positions: int = 1024
    # the family sections hybrid, rnn, selfatt, cnn, cn3 follow (with_encoder_options)

    def validate(self) -> None:
        from cn3.encoders import check_options, check_serves

        check_serves(self.encoder, "translation", has_trees=False, where="translation (subword text)")
        if self.d_model < 1 or self.heads < 1 or self.d_model % self.heads:
            raise ConfigError(f"model.d_model ({self.d_model}) must be a positive multiple of model.heads "
                              f"({self.heads})")
        if self.encoder_layers < 1 or self.decoder_layers < 1 or self.ff < 1:
            raise ConfigError("model.encoder_layers, model.decoder_layers and model.ff must be >= 1")
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"model.{name} must be in [0, 1), got {getattr(self, name)}")
        if self.cn3.parse_loss > 0:
            raise ConfigError("model.cn3.parse_loss needs dependency parses of the source, which translation "
                              "data does not have (subword text): leave it at 0")
        check_options(self.encoder, self.encoder_args())  # the family's own check, before any data is read

    def encoder_args(self):
        """The :class:`cn3.encoders.EncoderArgs` of the source encoder: ``d_model`` wide, ``encoder_layers``
        deep, on embeddings that already carry their positions."""
        from cn3.encoders import EncoderArgs

        return EncoderArgs.from_config(self, in_dim=self.d_model, d=self.d_model, layers=self.encoder_layers,
                                       level="translation", positions=False)


@dataclass
class NMTTrainConfig(LoopConfig):
    """The trainer: the loop's settings (:class:`cn3.train.config.LoopConfig`; here one evaluation per
    epoch by default, no clipping, a log line every 100 updates) and Adam (0.9, 0.98, 1e-9) with a
    linear warm-up to ``lr`` then inverse-sqrt decay.

    Args:
        max_tokens: padded tokens per batch (``rows * longest side``).
        warmup: updates of the linear warm-up to ``lr``, after which the rate decays as the inverse
            square root of the update.
        eval_batch_size: sentences per batch when translating for evaluation.
        l2: L2 penalty (Adam ``weight_decay``).
        label_smoothing: 0.1 as in Vaswani et al.
        eval_beam: beam for the per-evaluation dev BLEU (1 = greedy, the fast default on CPU).
        final_beam, alpha: beam size and length penalty for the final scores in ``results.json``.
        final_splits: splits scored with the best checkpoint at the end.
    """

    epochs: int = 30
    clip: float = 0.0
    log_every: int = 100
    lr: float = 1e-3
    warmup: int = 1000
    max_tokens: int = 4096
    l2: float = 0.0
    label_smoothing: float = 0.1
    eval_beam: int = 1
    eval_batch_size: int = 128
    final_beam: int = 5
    alpha: float = 0.6
    final_splits: list[str] = field(default_factory=lambda: ["val", "test2016"])

    def validate(self) -> None:
        super().validate()
        if self.lr <= 0 or self.warmup < 0:
            raise ConfigError("train.lr must be positive and train.warmup >= 0")
        if self.max_tokens < 1:
            raise ConfigError("train.max_tokens must be >= 1")
        if self.eval_beam < 1 or self.final_beam < 1:
            raise ConfigError("train.eval_beam and train.final_beam must be >= 1")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(f"train.label_smoothing must be in [0, 1), got {self.label_smoothing}")


@dataclass
class NMTConfig:
    data: NMTDataConfig = field(default_factory=NMTDataConfig)
    model: NMTModelConfig = field(default_factory=NMTModelConfig)
    train: NMTTrainConfig = field(default_factory=NMTTrainConfig)

    def validate(self) -> None:
        if self.model.tie == "all" and not self.data.joint_vocab:
            raise ConfigError("model.tie 'all' shares the source and target embeddings and needs "
                              "data.joint_vocab: true (or use model.tie: decoder)")


def resolve_nmt_config(config_file: Path | None, flags: dict, overrides: list[str]) -> NMTConfig:
    """Build a translation run's config with :func:`cn3.config.resolve` (module docstring).

    Args:
        config_file: ``--config``; ``None`` = ``cn3/configs/nmt/small.yaml`` (its absence is an error,
            never a fall back to the dataclass defaults).
        flags: dotted keys from dedicated CLI flags, e.g. ``{"model.encoder": "hybrid"}``;
            ``None`` values are ignored.
        overrides: ``--set key=value`` strings, applied last.
    """
    if config_file is None:
        if not DEFAULT_CONFIG.is_file():
            raise ConfigError(f"the default NMT config is missing: {DEFAULT_CONFIG} "
                              "(reinstall cn3, or pass --config FILE)")
        config_file = DEFAULT_CONFIG
    return resolve(NMTConfig, config_file, flags, overrides)


def config_from_dict(data: dict) -> NMTConfig:
    """The config saved in a checkpoint or run directory."""
    return from_dict(NMTConfig, data)
