"""The encoder registry: ``transformer | hybrid | local | onlstm | lstm``.

Every encoder maps embedded source tokens ``x (B, N, d)`` and ``mask (B, N)`` (True at real
tokens) to ``(H (B, N, d), infos)``, ``infos`` holding one entry per self-attention layer, bottom
first (``{"gate": (B, G, N)}`` for a gated hybrid layer, else ``None``).

* ``transformer``: ``encoder_layers`` vanilla self-attention layers.
* ``hybrid``: the lowest ``hybrid.layers`` layers use gated local/global attention (Xu et al.,
  2019; ``hybrid.combine: concat`` for the concatenation ablation), the rest are vanilla.
* ``local``: the same layers use local attention only (the paper's ablation).
* ``onlstm``: ``rnn.layers = K`` ON-LSTM layers and ``encoder_layers - K`` self-attention layers,
  ``H = H_onlstm + H_san`` (Hao et al., 2019, eq. 10); ``rnn.order: san_first`` swaps the stacks.
* ``lstm``: the same with plain LSTM layers.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn
from torch.nn import functional as F

from cn3.config import ConfigError
from cn3.nmt.config import NMTModelConfig
from cn3.nmt.hybrid_attention import HybridSelfAttention
from cn3.nmt.layers import EncoderLayer, MultiHeadAttention
from cn3.nmt.onlstm import RecurrentStack

ENCODERS: dict[str, Callable[[NMTModelConfig], nn.Module]] = {}


def register(name: str):
    def wrap(fn):
        ENCODERS[name] = fn
        return fn
    return wrap


def build_encoder(cfg: NMTModelConfig) -> nn.Module:
    if cfg.encoder not in ENCODERS:
        raise ConfigError(f"unknown encoder '{cfg.encoder}'; known: {', '.join(ENCODERS)}")
    return ENCODERS[cfg.encoder](cfg)


def has_gates(cfg: NMTModelConfig) -> bool:
    """Whether the encoder has hybrid gates to analyse (``cn3 nmt gates``)."""
    return cfg.encoder == "hybrid" and cfg.hybrid.combine == "gate" and cfg.hybrid.layers > 0


class SANEncoder(nn.Module):
    """A stack of encoder layers over the given attention modules (bottom first)."""

    def __init__(self, attns: list[nn.Module], cfg: NMTModelConfig):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(a, cfg.d_model, cfg.ff, cfg.dropout, cfg.norm) for a in attns)
        self.final_norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()

    def forward(self, x: Tensor, mask: Tensor) -> tuple[Tensor, list]:
        infos = []
        for layer in self.layers:
            x, info = layer(x, mask)
            infos.append(info)
        return self.final_norm(x), infos


class RecurrentSANEncoder(nn.Module):
    """(ON-)LSTM layers and self-attention layers with the short-cut ``H = H_rnn + H_san``."""

    def __init__(self, rnn: RecurrentStack, san: SANEncoder, order: str, shortcut: bool, dropout: float):
        super().__init__()
        self.rnn, self.san = rnn, san
        self.order, self.shortcut, self.dropout = order, shortcut, dropout

    def forward(self, x: Tensor, mask: Tensor) -> tuple[Tensor, list]:
        if self.order == "rnn_first":
            h_rnn = self.rnn(x, mask)
            h_san, infos = self.san(F.dropout(h_rnn, self.dropout, self.training), mask)
        else:
            h_san, infos = self.san(x, mask)
            h_rnn = self.rnn(h_san, mask)
        return (h_rnn + h_san if self.shortcut else h_rnn if self.order == "san_first" else h_san), infos


def _vanilla(cfg: NMTModelConfig) -> MultiHeadAttention:
    return MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attention_dropout)


@register("transformer")
def _transformer(cfg: NMTModelConfig) -> nn.Module:
    return SANEncoder([_vanilla(cfg) for _ in range(cfg.encoder_layers)], cfg)


def _windowed(cfg: NMTModelConfig, mode: str) -> nn.Module:
    h = cfg.hybrid
    attns = [HybridSelfAttention(cfg.d_model, cfg.heads, cfg.attention_dropout, h.window, mode, h.gate_per_head)
             if i < h.layers else _vanilla(cfg) for i in range(cfg.encoder_layers)]
    return SANEncoder(attns, cfg)


@register("hybrid")
def _hybrid(cfg: NMTModelConfig) -> nn.Module:
    return _windowed(cfg, "hybrid" if cfg.hybrid.combine == "gate" else "concat")


@register("local")
def _local(cfg: NMTModelConfig) -> nn.Module:
    return _windowed(cfg, "local")


def _recurrent(cfg: NMTModelConfig, cell: str) -> nn.Module:
    r = cfg.rnn
    rnn = RecurrentStack(cfg.d_model, r.layers, cell, r.chunk_size, r.bidirectional, cfg.dropout)
    san = SANEncoder([_vanilla(cfg) for _ in range(cfg.encoder_layers - r.layers)], cfg)
    return RecurrentSANEncoder(rnn, san, r.order, r.shortcut, cfg.dropout)


@register("onlstm")
def _onlstm(cfg: NMTModelConfig) -> nn.Module:
    return _recurrent(cfg, "onlstm")


@register("lstm")
def _lstm(cfg: NMTModelConfig) -> nn.Module:
    return _recurrent(cfg, "lstm")
