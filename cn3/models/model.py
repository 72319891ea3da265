"""The whole network: node encoder -> sentence encoder -> task head.

One class covers the three task levels of the CN3 paper: tagging (CRF over node states),
sentence classification (mean-pool + softmax) and sentence-pair matching (both sentences through
the same encoder, then ``[u, v, |u-v|, u*v]`` + MLP + softmax).
"""

from __future__ import annotations

from dataclasses import dataclass, field


from torch import Tensor, nn

from cn3.batching import GraphBatch
from cn3.models.encoders import make_encoder
from cn3.models.heads import CRFHead, PairClassifier, PooledClassifier
from cn3.models.node_encoder import NodeEncoder, NodeEncoderSizes
from cn3.run_config import ModelConfig


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
    pred: Tensor  # (B,) classes or (B, N) tags
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
        sizes = NodeEncoderSizes(args.n_words, args.n_chars, args.n_upos, args.n_spell)
        word_dim = pretrained.shape[1] if pretrained is not None else cfg.word_dim
        self.nodes = NodeEncoder(sizes, word_dim, pretrained, cfg.freeze_embeddings, cfg.char, cfg.char_dim,
                                 cfg.char_out, cfg.pos_dim if args.n_upos else 0, cfg.spell_dim, cfg.dropout,
                                 cfg.word_dropout)
        self.encoder = make_encoder(cfg, self.nodes.out_dim, self.nodes.attr_dim, args.n_edge_types)
        self.dropout = nn.Dropout(cfg.dropout)
        d = self.encoder.out_dim
        if args.level == "node":
            self.head = CRFHead(d, args.n_labels)
        elif args.level == "pair":
            self.head = PairClassifier(d, args.n_labels, cfg.mlp_hidden, cfg.dropout, cfg.pool)
        else:
            self.head = PooledClassifier(d, args.n_labels, cfg.mlp_hidden, cfg.dropout, cfg.pool)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform in [-init_range, init_range] (the paper: 0.1), then the word vectors."""
        for module in (self.encoder, self.head):
            for p in module.parameters():
                nn.init.uniform_(p, -self.cfg.init_range, self.cfg.init_range)
        self.nodes.reset_parameters()

    def encode(self, side) -> tuple[Tensor, dict]:
        x, v = self.nodes(side)
        h, info = self.encoder(x, v, side.mask, side.edge_type)
        return self.dropout(h), info

    def forward(self, batch: GraphBatch, with_loss: bool = True) -> ModelOutput:
        y = batch.y if with_loss else None
        ha, info_a = self.encode(batch.a)
        if self.args.level == "node":
            loss, pred = self.head(ha, batch.a.mask, y)
            return ModelOutput(loss, pred, None, {"a": info_a})
        if self.args.level == "pair":
            hb, info_b = self.encode(batch.b)
            loss, pred, logits = self.head.forward_pair(ha, batch.a.mask, hb, batch.b.mask, y)
            return ModelOutput(loss, pred, logits, {"a": info_a, "b": info_b})
        loss, pred, logits = self.head(ha, batch.a.mask, y)
        return ModelOutput(loss, pred, logits, {"a": info_a})

    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


def model_args_from_dataset(ds) -> ModelArgs:
    """Sizes from a :class:`data_prep.dataset.PreparedDataset`."""
    from data_prep.spelling import SPELL_FEATURES

    v = ds.vocabs
    return ModelArgs(level=ds.level, n_labels=len(v["labels"]), n_words=len(v["lower"]), n_chars=len(v["chars"]),
                     n_upos=len(v["upos"]) if "upos" in v else 0, n_spell=len(SPELL_FEATURES),
                     n_edge_types=int(ds.manifest.get("n_edge_types", 0)))


