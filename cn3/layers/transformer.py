"""Transformer building blocks: multi-head attention on the shared kernel, feed-forward, layers.

Every attention here computes its scaled dot-product energy ``QK^T / sqrt(d_k)`` of shape
``(B, H, Nq, Nk)`` and hands it to :mod:`cn3.layers.attention` for masking, softmax and the weighted sum.

Encoder self-attention modules share one interface, ``attn(x, mask) -> (out, info)``, so an encoder
layer takes any of them (vanilla here, hybrid/local in :mod:`cn3.layers.hybrid_attention`); ``info``
is ``None`` or a dict (the hybrid gate).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from cn3.layers.attention import attention


class MultiHeadAttention(nn.Module):
    """Vanilla multi-head attention (Vaswani et al., 2017).

    ``forward(x, mask)`` is encoder self-attention; :meth:`attend_heads` is the general form the
    decoder uses (causal band, cached keys, cross-attention).
    """

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0):
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model {d_model} is not a multiple of heads {heads}")
        self.d_model, self.heads, self.d_head = d_model, heads, d_model // heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            nn.init.xavier_uniform_(lin.weight)
            nn.init.zeros_(lin.bias)

    def split(self, x: Tensor) -> Tensor:
        """``(B, N, d) -> (B, H, N, d_k)``."""
        b, n, _ = x.shape
        return x.view(b, n, self.heads, self.d_head).transpose(1, 2)

    def merge(self, x: Tensor) -> Tensor:
        """``(B, H, N, d_k) -> (B, N, H * d_k)``."""
        b, h, n, dk = x.shape
        return x.transpose(1, 2).reshape(b, n, h * dk)

    def query(self, x: Tensor) -> Tensor:
        """Projected, split and pre-scaled by ``1/sqrt(d_k)`` (so ``q @ k^T`` is the energy)."""
        return self.split(self.q_proj(x)) * (1.0 / math.sqrt(self.d_head))

    def keys_values(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return self.split(self.k_proj(x)), self.split(self.v_proj(x))

    def attend_heads(self, q: Tensor, k: Tensor, v: Tensor, key_mask: Tensor | None = None,
                     band: Tensor | None = None, need_weights: bool = False):
        """Split heads in, merged and projected output out: ``(B, Nq, d)``; with ``need_weights``
        also the attention weights averaged over heads ``(B, Nq, Nk)``."""
        energy = q @ k.transpose(-1, -2)  # (B, H, Nq, Nk)
        out, weights = attention(energy, v, key_mask, band, dropout_p=self.dropout, training=self.training)
        out = self.out_proj(self.merge(out))
        return (out, weights.mean(1)) if need_weights else out

    def forward(self, x: Tensor, mask: Tensor | None = None, need_weights: bool = False) -> tuple[Tensor, dict | None]:
        k, v = self.keys_values(x)
        if need_weights:
            out, weights = self.attend_heads(self.query(x), k, v, mask, need_weights=True)
            return out, {"weights": weights}
        return self.attend_heads(self.query(x), k, v, mask), None


class FeedForward(nn.Module):
    def __init__(self, d_model: int, ff: int, dropout: float):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, ff), nn.Linear(ff, d_model)
        self.dropout = dropout
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.fc1, self.fc2):
            nn.init.xavier_uniform_(lin.weight)
            nn.init.zeros_(lin.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(F.dropout(F.relu(self.fc1(x)), self.dropout, self.training))


class EncoderLayer(nn.Module):
    """Self-attention + feed-forward, each with a residual, LayerNorm before (pre) or after (post)."""

    def __init__(self, attn: nn.Module, d_model: int, ff: int, dropout: float, norm: str = "pre"):
        super().__init__()
        self.attn = attn
        self.ffn = FeedForward(d_model, ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout, self.pre = dropout, norm == "pre"

    def forward(self, x: Tensor, mask: Tensor, need_weights: bool = False) -> tuple[Tensor, dict | None]:
        drop = lambda t: F.dropout(t, self.dropout, self.training)  # noqa: E731
        if self.pre:
            a, info = self.attn(self.norm1(x), mask, need_weights)
            x = x + drop(a)
            return x + drop(self.ffn(self.norm2(x))), info
        a, info = self.attn(x, mask, need_weights)
        x = self.norm1(x + drop(a))
        return self.norm2(x + drop(self.ffn(x))), info


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention, feed-forward; incremental with a ``cache`` dict.

    ``cache`` (decoding one position at a time) holds ``self_k``/``self_v`` ``(B, H, t, d_k)`` of
    the positions so far and ``mem_k``/``mem_v`` of the encoder output, projected once.
    """

    def __init__(self, d_model: int, heads: int, ff: int, dropout: float, attention_dropout: float,
                 norm: str = "pre"):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, heads, attention_dropout)
        self.cross_attn = MultiHeadAttention(d_model, heads, attention_dropout)
        self.ffn = FeedForward(d_model, ff, dropout)
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(3))
        self.dropout, self.pre = dropout, norm == "pre"

    def _sublayer(self, x: Tensor, i: int, fn) -> Tensor:
        if self.pre:
            return x + F.dropout(fn(self.norms[i](x)), self.dropout, self.training)
        return self.norms[i](x + F.dropout(fn(x), self.dropout, self.training))

    def forward(self, x: Tensor, memory: Tensor | None, mem_mask: Tensor, causal: Tensor | None,
                cache: dict | None = None) -> Tensor:
        def self_attention(h: Tensor) -> Tensor:
            k, v = self.self_attn.keys_values(h)
            if cache is not None:
                if "self_k" in cache:
                    k, v = torch.cat([cache["self_k"], k], 2), torch.cat([cache["self_v"], v], 2)
                cache["self_k"], cache["self_v"] = k, v
            return self.self_attn.attend_heads(self.self_attn.query(h), k, v, None, causal)

        def cross_attention(h: Tensor) -> Tensor:
            if cache is not None and "mem_k" in cache:
                k, v = cache["mem_k"], cache["mem_v"]
            else:
                k, v = self.cross_attn.keys_values(memory)
                if cache is not None:
                    cache["mem_k"], cache["mem_v"] = k, v
            return self.cross_attn.attend_heads(self.cross_attn.query(h), k, v, mem_mask)

        x = self._sublayer(x, 0, self_attention)
        x = self._sublayer(x, 1, cross_attention)
        return self._sublayer(x, 2, self.ffn)


def sinusoidal_positions(n: int, d: int, device: torch.device | str | None = None) -> Tensor:
    """``(n, d)`` float32 sinusoidal position encodings (sin on even, cos on odd units), made on
    ``device`` (an encoder adding them in every forward makes them where its input lives: no
    host-to-device copy per batch)."""
    position = torch.arange(n, dtype=torch.float32, device=device)[:, None]
    rate = torch.exp(torch.arange(0, d, 2, dtype=torch.float32, device=device) * (-math.log(10000.0) / d))
    table = torch.zeros(n, d, device=device)
    table[:, 0::2] = torch.sin(position * rate)
    table[:, 1::2] = torch.cos(position * rate)[:, : d // 2]
    return table
