"""The encoder-decoder Transformer (Vaswani et al., 2017) with a pluggable encoder stack.

* Embeddings scaled by ``sqrt(d)`` plus sinusoidal positions, then dropout.
* ``tie``: ``decoder`` shares the target embedding with the output projection, ``all`` also the
  source embedding (one joint subword vocabulary).
* ``norm``: pre-norm (LayerNorm before each sublayer and a final LayerNorm) or post-norm.
* Loss: label-smoothed cross-entropy summed over real target tokens (Szegedy et al.; 0.1 in
  Vaswani et al.).
* Incremental decoding for search: :meth:`Seq2Seq.start` / :meth:`Seq2Seq.step` /
  :meth:`Seq2Seq.reorder` with cached keys and values per decoder layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from cn3.config import ConfigError
from cn3.encoders import build_encoder
from cn3.layers.transformer import DecoderLayer, sinusoidal_positions
from cn3.nmt.config import NMTModelConfig
from cn3.nmt.data import BOS, EOS, PAD


@dataclass
class ModelArgs:
    """What the vocabulary fixes about the network (saved in checkpoints)."""

    src_vocab: int
    tgt_vocab: int
    pad: int = PAD
    bos: int = BOS
    eos: int = EOS


def causal_mask(n: int, device=None) -> Tensor:
    """``(n, n)`` bool, True where key ``j <= i`` (a decoder position sees itself and the past)."""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


class Seq2Seq(nn.Module):
    def __init__(self, cfg: NMTModelConfig, args: ModelArgs):
        super().__init__()
        self.cfg, self.args = cfg, args
        d = cfg.d_model
        self.src_embed = nn.Embedding(args.src_vocab, d, padding_idx=args.pad)
        if cfg.tie == "all":
            if args.src_vocab != args.tgt_vocab:
                raise ConfigError("model.tie 'all' needs one joint vocabulary (data.joint_vocab: true)")
            self.tgt_embed = self.src_embed
        else:
            self.tgt_embed = nn.Embedding(args.tgt_vocab, d, padding_idx=args.pad)
        for emb in {id(self.src_embed): self.src_embed, id(self.tgt_embed): self.tgt_embed}.values():
            nn.init.normal_(emb.weight, 0.0, d ** -0.5)
            with torch.no_grad():
                emb.weight[args.pad].zero_()
        self.output = nn.Linear(d, args.tgt_vocab, bias=False)
        if cfg.tie != "none":
            self.output.weight = self.tgt_embed.weight
        else:
            nn.init.normal_(self.output.weight, 0.0, d ** -0.5)
        self.register_buffer("positions", sinusoidal_positions(cfg.max_positions, d), persistent=False)
        self.encoder = build_encoder(cfg.encoder, cfg.encoder_args())
        # encoders whose width is not d_model (Kim's CNN feature maps) are projected to it
        self.encoder_proj = nn.Linear(self.encoder.out_dim, d) if self.encoder.out_dim != d else None
        self.decoder = nn.ModuleList(
            DecoderLayer(d, cfg.heads, cfg.ff, cfg.dropout, cfg.attention_dropout, cfg.norm)
            for _ in range(cfg.decoder_layers))
        self.decoder_norm = nn.LayerNorm(d) if cfg.norm == "pre" else nn.Identity()
        self.scale = math.sqrt(d)

    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def _embed(self, emb: nn.Embedding, tokens: Tensor, offset: int = 0) -> Tensor:
        n = tokens.shape[1]
        if offset + n > self.positions.shape[0]:  # longer than max_positions: grow the table
            self.positions = sinusoidal_positions(2 * (offset + n), self.cfg.d_model,
                                                  self.positions.device).to(self.positions.dtype)
        x = emb(tokens) * self.scale + self.positions[offset : offset + n]
        return F.dropout(x, self.cfg.dropout, self.training)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor, dict]:
        """``src (B, S)`` -> ``(memory (B, S, d), mask (B, S), info)`` (the encoder's ``info``: see
        :mod:`cn3.encoders.registry`)."""
        mask = src != self.args.pad
        memory, info = self.encoder(self._embed(self.src_embed, src), mask)
        if self.encoder_proj is not None:
            memory = self.encoder_proj(memory)
        return memory, mask, info

    def decode(self, tgt_in: Tensor, memory: Tensor, mask: Tensor) -> Tensor:
        """Teacher forcing: ``tgt_in (B, T)`` -> logits ``(B, T, V)``."""
        x = self._embed(self.tgt_embed, tgt_in)
        causal = causal_mask(tgt_in.shape[1], tgt_in.device)
        for layer in self.decoder:
            x = layer(x, memory, mask, causal)
        return self.output(self.decoder_norm(x))

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        memory, mask, _ = self.encode(src)
        return self.decode(tgt_in, memory, mask)

    def loss(self, logits: Tensor, tgt_out: Tensor, smoothing: float = 0.1) -> tuple[Tensor, Tensor]:
        """``(label-smoothed loss, nll)``, both summed over real target tokens.

        ``loss = (1 - eps) * nll + eps * mean_v(-log p_v)`` (uniform smoothing over the vocabulary,
        as ``torch.nn.functional.cross_entropy(label_smoothing=eps)``).
        """
        lprobs = F.log_softmax(logits.float(), dim=-1)
        real = tgt_out != self.args.pad
        nll = -lprobs.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)
        smooth = -lprobs.mean(-1)
        loss = (1.0 - smoothing) * nll + smoothing * smooth
        return loss.masked_select(real).sum(), nll.masked_select(real).sum()

    # ------------------------------------------------------------------ incremental decoding

    def start(self, memory: Tensor, mask: Tensor) -> dict:
        """Decoder state for :meth:`step`, over encoder output ``memory (B, S, d)``."""
        return {"memory": memory, "mask": mask, "caches": [{} for _ in self.decoder], "step": 0}

    def step(self, tokens: Tensor, state: dict) -> Tensor:
        """Feed ``tokens (B,)`` at position ``state["step"]``; returns log-probabilities ``(B, V)``."""
        x = self._embed(self.tgt_embed, tokens.unsqueeze(1), state["step"])
        for layer, cache in zip(self.decoder, state["caches"]):
            x = layer(x, state["memory"], state["mask"], None, cache)
        state["step"] += 1
        return F.log_softmax(self.output(self.decoder_norm(x[:, 0])).float(), dim=-1)

    @staticmethod
    def reorder(state: dict, index: Tensor) -> None:
        """Keep rows ``index`` of every cached tensor (beam search)."""
        state["memory"] = state["memory"].index_select(0, index)
        state["mask"] = state["mask"].index_select(0, index)
        for cache in state["caches"]:
            for key, value in cache.items():
                cache[key] = value.index_select(0, index)
