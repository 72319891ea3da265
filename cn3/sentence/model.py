"""The whole network: node encoder -> an encoder of the zoo -> task head.

One class covers the three sentence task levels of the CN3 paper: tagging (CRF over node states),
sentence classification (a sentence vector + MLP + softmax) and sentence-pair matching (both
sentences through the same encoder, then ``[u, v, |u-v|, u*v]`` + MLP + softmax). The encoder is
looked up by name in :mod:`cn3.encoders`; the sentence vector is the encoder's own where it has one
(``pool``: Tree-LSTM root, Lin et al.'s annotation matrix, Kim's max over time), else the mean (or
max) of the node states.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor, nn

from cn3.encoders import build_encoder, check_serves
from cn3.layers.pooling import POOLS
from cn3.sentence.batching import GraphBatch
from cn3.sentence.config import ModelConfig
from cn3.sentence.heads import CRFHead, PairClassifier, PooledClassifier
from cn3.sentence.node_encoder import NodeEncoder, NodeEncoderSizes


@dataclass
class ModelArgs:
    """What a model needs besides its config: sizes from the prepared dataset (saved in checkpoints)."""

    level: str
    n_labels: int
    n_words: int
    n_chars: int
    n_upos: int
    n_spell: int
    n_edge_types: int


@dataclass
class ModelOutput:
    loss: Tensor | None
    pred: Tensor | None  # (B,) classes or (B, N) tags; None for a tagging model's training step
    logits: Tensor | None = None  # (B, K) for classification
    info: dict = field(default_factory=dict)  # per side: {"alphas": [...], "gates": [...]}


class SentenceGraphModel(nn.Module):
    """Args:
        cfg: the model section of the run config.
        args: dataset-dependent sizes.
        pretrained: ``(n_words, word_dim)`` vectors for the lower-cased vocabulary, or ``None``.
    """

    def __init__(self, cfg: ModelConfig, args: ModelArgs, pretrained: Tensor | None = None):
        super().__init__()
        self.cfg, self.args = cfg, args
        self.spec = check_serves(cfg.encoder, args.level, args.n_edge_types > 0, "the prepared dataset")
        sizes = NodeEncoderSizes(args.n_words, args.n_chars, args.n_upos, args.n_spell)
        word_dim = pretrained.shape[1] if pretrained is not None else cfg.word_dim
        self.nodes = NodeEncoder(sizes, word_dim, pretrained, cfg.freeze_embeddings, cfg.char, cfg.char_dim,
                                 cfg.char_out, cfg.pos_dim if args.n_upos else 0, cfg.spell_dim, cfg.dropout,
                                 cfg.word_dropout, cfg.position_dim)
        attr_dim = self.nodes.attr_dim if self.spec.uses_attrs else 0
        self.encoder = build_encoder(cfg.encoder, cfg.encoder_args(self.nodes.out_dim, args.level, attr_dim,
                                                                   args.n_edge_types))
        self.uses_attrs = attr_dim > 0
        d = self.encoder.out_dim
        pooled = getattr(self.encoder, "pool_dim", d)
        if args.level == "node":
            self.head = CRFHead(d, args.n_labels, cfg.dropout)
        elif args.level == "pair":
            self.head = PairClassifier(pooled, args.n_labels, cfg.mlp_hidden, cfg.dropout)
        else:
            self.head = PooledClassifier(pooled, args.n_labels, cfg.mlp_hidden, cfg.dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Each part owns its init: the encoder its published one; the head CN3's ``U(-r, r)``
        when the encoder is CN3 (the paper initialises its whole model so), else the standard one;
        the node encoder ``U(-0.1, 0.1)`` then the pretrained vectors."""
        self.encoder.reset_parameters()
        self.head.reset_parameters(self.cfg.init_range if self.spec.paper_uniform_init else None)
        self.nodes.reset_parameters()

    def encode(self, side) -> tuple[Tensor, dict]:
        """Node states ``(B, N, d)`` and the encoder's ``info`` for one side of a batch."""
        x, v = self.nodes(side)
        return self.encoder(x, side.mask, v=v if self.uses_attrs else None, edge_type=side.edge_type)

    def sentence_vector(self, h: Tensor, mask: Tensor, info: dict) -> Tensor:
        """``(B, pool_dim)``: the encoder's own sentence vector, else ``model.pool`` of the states."""
        if hasattr(self.encoder, "pool"):
            return self.encoder.pool(h, mask, info)
        return POOLS[self.cfg.pool](h, mask)

    def forward(self, batch: GraphBatch, with_loss: bool = True) -> ModelOutput:
        y = batch.y if with_loss else None
        ha, info_a = self.encode(batch.a)
        infos = {"a": info_a}
        if self.args.level == "node":
            loss = self.head.loss(ha, batch.a.mask, y) if y is not None else None
            # Viterbi only when predictions are wanted: training steps need the loss alone
            pred = self.head.decode(ha, batch.a.mask) if (y is None or not self.training) else None
            return ModelOutput(self._with_aux(loss, infos), pred, None, infos)
        u = self.sentence_vector(ha, batch.a.mask, info_a)
        if self.args.level == "pair":
            hb, info_b = self.encode(batch.b)
            infos["b"] = info_b
            logits = self.head.pair_logits(u, self.sentence_vector(hb, batch.b.mask, info_b))
        else:
            logits = self.head.logits(u)
        loss = nn.functional.cross_entropy(logits, y) if y is not None else None
        return ModelOutput(self._with_aux(loss, infos), logits.argmax(-1), logits, infos)

    @staticmethod
    def _with_aux(loss: Tensor | None, infos: dict) -> Tensor | None:
        """Add the encoders' auxiliary losses (Lin et al.'s penalty) of every side."""
        if loss is None:
            return None
        for info in infos.values():
            if info.get("loss") is not None:
                loss = loss + info["loss"]
        return loss

    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


def model_args_from_dataset(ds) -> ModelArgs:
    """Sizes from a :class:`data_prep.dataset.PreparedDataset`."""
    from data_prep.spelling import SPELL_FEATURES

    v = ds.vocabs
    return ModelArgs(level=ds.level, n_labels=len(v["labels"]), n_words=len(v["lower"]), n_chars=len(v["chars"]),
                     n_upos=len(v["upos"]) if "upos" in v else 0, n_spell=len(SPELL_FEATURES),
                     n_edge_types=int(ds.manifest.get("n_edge_types", 0)))
