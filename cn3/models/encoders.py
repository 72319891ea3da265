"""Sentence encoders, looked up by name (``model.encoder``): CN3 and the paper's baselines.

Every encoder maps node vectors to contextual node states under the same interface, so the heads
and the trainer do not care which one runs:

    forward(x (B, N, d_in), v (B, N, a) | None, mask (B, N), edge_type (B, N, N) | None)
        -> h (B, N, out_dim), info: dict  (``alphas``/``gates`` per layer where the encoder has them)
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch_geometric.nn import DenseGCNConv

from cn3.config import ConfigError
from cn3.layers import DynamicGraphEncoder
from cn3.models.context import BiLSTMContext, CNNContext
from cn3.run_config import ModelConfig


def make_context(cfg: ModelConfig, in_dim: int) -> nn.Module | None:
    if cfg.context == "lstm":
        return BiLSTMContext(in_dim, cfg.hidden, cfg.context_layers, cfg.dropout)
    if cfg.context == "cnn":
        return CNNContext(in_dim, cfg.hidden, cfg.context_layers, dropout=cfg.dropout)
    return None


class CN3Encoder(nn.Module):
    """Context layer (local bias: BiLSTM by default, the paper's CN3_LSTM) then ``graph_layers``
    dynamic graph layers that learn the sentence's structure (paper eq. 1-6)."""

    def __init__(self, cfg: ModelConfig, in_dim: int, attr_dim: int, n_edge_types: int):
        super().__init__()
        self.context = make_context(cfg, in_dim)
        hidden = self.context.out_dim if self.context is not None else in_dim
        self.graph = DynamicGraphEncoder(
            num_layers=cfg.graph_layers, hidden=hidden, attr_dim=attr_dim,
            n_edge_types=n_edge_types if cfg.edge_attrs else 0,
            edge_dim=cfg.edge_dim, energy_dim=cfg.energy_dim,
        )
        self.out_dim = hidden
        self.edge_attrs = cfg.edge_attrs
        if cfg.edge_attrs and not n_edge_types:
            raise ConfigError("model.edge_attrs needs dependency trees: prepare the task with an annotator "
                             "that parses (gold trees, spacy or stanza)")

    def forward(self, x, v, mask, edge_type):
        h = self.context(x, mask) if self.context is not None else x
        h, alphas, gates = self.graph(h, mask, v, edge_type if self.edge_attrs else None)
        return h, {"alphas": alphas, "gates": gates}


class ContextEncoder(nn.Module):
    """The context layer alone: ``bilstm`` (CN3's ablation without the graph) or ``cnn``."""

    def __init__(self, cfg: ModelConfig, in_dim: int, kind: str):
        super().__init__()
        layer_cfg = ModelConfig(**{**cfg.__dict__, "context": kind})
        self.context = make_context(layer_cfg, in_dim)
        self.out_dim = self.context.out_dim

    def forward(self, x, v, mask, edge_type):
        return self.context(x, mask), {}


class NBOWEncoder(nn.Module):
    """Neural bag of words: the node vectors themselves (mean-pooled by the head)."""

    def __init__(self, cfg: ModelConfig, in_dim: int):
        super().__init__()
        self.out_dim = in_dim

    def forward(self, x, v, mask, edge_type):
        return x, {}


def sinusoidal_positions(n: int, dim: int, device) -> Tensor:
    """``(N, dim)`` sinusoidal position encodings (Vaswani et al., 2017)."""
    position = torch.arange(n, device=device, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim))
    pe = torch.zeros(n, dim, device=device)
    pe[:, 0::2] = torch.sin(position * freq)
    pe[:, 1::2] = torch.cos(position * freq[: dim // 2])
    return pe


class TransformerSentenceEncoder(nn.Module):
    """Projection + sinusoidal positions + ``graph_layers`` Transformer encoder layers."""

    def __init__(self, cfg: ModelConfig, in_dim: int):
        super().__init__()
        d = 2 * cfg.hidden
        if d % cfg.heads:
            raise ConfigError(f"model.heads: 2 * model.hidden ({d}) must be divisible by heads ({cfg.heads})")
        self.proj = nn.Linear(in_dim, d)
        layer = nn.TransformerEncoderLayer(d, cfg.heads, 2 * d, cfg.dropout, batch_first=True)
        self.layers = nn.TransformerEncoder(layer, cfg.graph_layers, enable_nested_tensor=False)
        self.out_dim = d

    def forward(self, x, v, mask, edge_type):
        h = self.proj(x) + sinusoidal_positions(x.shape[1], self.out_dim, x.device)
        h = self.layers(h, src_key_padding_mask=~mask)
        return h.masked_fill(~mask.unsqueeze(-1), 0.0), {}


class GCNEncoder(nn.Module):
    """Context layer, then graph convolutions over the dependency tree (undirected, self-loops):
    the fixed-structure baseline that CN3's learned structure is compared with."""

    def __init__(self, cfg: ModelConfig, in_dim: int, n_edge_types: int):
        super().__init__()
        if not n_edge_types:
            raise ConfigError("the gcn encoder needs dependency trees: prepare the task with an annotator "
                              "that parses (gold trees, spacy or stanza)")
        self.context = make_context(cfg, in_dim)
        hidden = self.context.out_dim if self.context is not None else in_dim
        self.convs = nn.ModuleList(DenseGCNConv(hidden, hidden) for _ in range(cfg.graph_layers))
        self.dropout = nn.Dropout(cfg.dropout)
        self.out_dim = hidden

    def forward(self, x, v, mask, edge_type):
        h = self.context(x, mask) if self.context is not None else x
        adj = (edge_type > 0).to(h.dtype)  # (B, N, N), both directions are stored
        for conv in self.convs:
            h = h + self.dropout(conv(h, adj, mask).relu())
        return h.masked_fill(~mask.unsqueeze(-1), 0.0), {}


def make_encoder(cfg: ModelConfig, in_dim: int, attr_dim: int, n_edge_types: int) -> nn.Module:
    """The encoder named by ``cfg.encoder``."""
    if cfg.encoder == "cn3":
        return CN3Encoder(cfg, in_dim, attr_dim, n_edge_types)
    if cfg.encoder == "bilstm":
        return ContextEncoder(cfg, in_dim, "lstm")
    if cfg.encoder == "cnn":
        return ContextEncoder(cfg, in_dim, "cnn")
    if cfg.encoder == "nbow":
        return NBOWEncoder(cfg, in_dim)
    if cfg.encoder == "transformer":
        return TransformerSentenceEncoder(cfg, in_dim)
    if cfg.encoder == "gcn":
        return GCNEncoder(cfg, in_dim, n_edge_types)
    raise ConfigError(f"unknown encoder {cfg.encoder!r}")
