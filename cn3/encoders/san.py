"""Self-attention encoders: the Transformer (Vaswani et al., 2017; the CN3 paper's SelfAtt3) and the
hybrid local/global attention of Xu et al. (ACL 2019).

ONE implementation serves every level: the sentence tasks (with an input projection and sinusoidal
positions, since the node vectors carry no order) and the translation encoder (whose embeddings
already carry positions). The lowest ``window_layers`` layers of ``hybrid``/``local`` use
:class:`cn3.layers.hybrid_attention.HybridSelfAttention`, the rest vanilla multi-head attention.

``info``: ``"gates"``, one entry per layer (the hybrid gate ``g (B, G, N)``, the weight of the local
distribution, or ``None``); outside training also ``"alphas"``, each layer's attention weights
averaged over heads ``(B, N, N)``.
"""

from __future__ import annotations

from dataclasses import fields

from torch import Tensor, nn

from cn3.config import ConfigError
from cn3.encoders.options import HybridOptions
from cn3.encoders.registry import EncoderArgs, register
from cn3.layers.hybrid_attention import HybridSelfAttention
from cn3.layers.transformer import EncoderLayer, MultiHeadAttention, sinusoidal_positions


class SelfAttentionEncoder(nn.Module):
    """A stack of pre- or post-norm Transformer encoder layers, optionally windowed at the bottom.

    Args:
        in_dim: width of ``x``; projected to ``d`` when different.
        d, layers, heads, ff: model width, depth, attention heads, feed-forward width.
        dropout, attention_dropout: residual/feed-forward and attention-weight dropout.
        norm: ``pre`` (LayerNorm before each sublayer and a final LayerNorm) or ``post``.
        positions: add sinusoidal positions to the input before the first layer, after a LayerNorm
            of the (projected) input: node vectors come at any scale (random words in U(-0.1, 0.1)
            projected are far smaller than the positions), so they are normalised to the positions'
            unit scale, as Vaswani et al.'s ``sqrt(d)`` does for embeddings.
        window_layers: how many of the lowest layers use windowed attention (``mode``).
        window: the local window ``m`` (``|i - j| <= m``).
        mode: ``hybrid`` (gated, eq. 4-5 of Xu et al.), ``concat`` or ``local``.
        gate_per_head: one gate per head instead of the paper's one per token.

    Shapes:
        ``x (B, N, in_dim)``, ``mask (B, N)`` -> ``h (B, N, d)`` (zero at padding), info.
    """

    def __init__(self, in_dim: int, d: int, layers: int, heads: int, ff: int, dropout: float = 0.0,
                 attention_dropout: float = 0.0, norm: str = "pre", positions: bool = False,
                 window_layers: int = 0, window: int = 1, mode: str = "hybrid", gate_per_head: bool = False):
        super().__init__()
        if d % heads:
            raise ValueError(f"model width {d} is not a multiple of heads {heads}")
        self.d, self.positions, self.dropout = d, positions, dropout
        self.proj = nn.Linear(in_dim, d) if in_dim != d else None
        self.input_norm = nn.LayerNorm(d) if positions else None
        attns = [HybridSelfAttention(d, heads, attention_dropout, window, mode, gate_per_head)
                 if i < window_layers else MultiHeadAttention(d, heads, attention_dropout) for i in range(layers)]
        self.layers = nn.ModuleList(EncoderLayer(a, d, ff, dropout, norm) for a in attns)
        self.final_norm = nn.LayerNorm(d) if norm == "pre" else nn.Identity()
        self.out_dim = d
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform projections with zero biases (as in the attention and feed-forward
        modules, the usual Transformer init), LayerNorm gain 1 and bias 0."""
        if self.proj is not None:
            nn.init.xavier_uniform_(self.proj.weight)
            nn.init.zeros_(self.proj.bias)
        for module in self.modules():
            if module is not self and hasattr(module, "reset_parameters") and not isinstance(module, nn.Linear):
                module.reset_parameters()

    def forward(self, x: Tensor, mask: Tensor, *, v: Tensor | None = None,
                edge_type: Tensor | None = None) -> tuple[Tensor, dict]:
        if self.proj is not None:
            x = self.proj(x)  # (B, N, d)
        if self.positions:
            x = self.input_norm(x) + sinusoidal_positions(x.shape[1], self.d, x.device).to(x.dtype)
            x = nn.functional.dropout(x, self.dropout, self.training)
        gates, alphas = [], []
        keep = not self.training
        for layer in self.layers:
            x, layer_info = layer(x, mask, need_weights=keep)
            layer_info = layer_info or {}
            gates.append(layer_info.get("gate"))
            if keep:
                alphas.append(layer_info.get("weights"))
        info = {"gates": gates}
        if keep:
            info["alphas"] = alphas
        return self.final_norm(x).masked_fill(~mask.unsqueeze(-1), 0.0), info


def check_heads(a: EncoderArgs) -> None:
    if a.d % a.heads:
        raise ConfigError(f"the model width ({a.d}; 2 * model.hidden on sentence tasks, model.d_model on "
                          f"translation) must be divisible by the attention heads ({a.heads})")


def _san(a: EncoderArgs, window_layers: int = 0, mode: str = "hybrid") -> SelfAttentionEncoder:
    check_heads(a)
    h = a.hybrid
    return SelfAttentionEncoder(a.in_dim, a.d, a.layers, a.heads, a.ff_width, a.dropout, a.attention_dropout,
                                a.norm, a.positions, min(window_layers, a.layers), h.window, mode, h.gate_per_head)


#: Xu et al.'s and Hao et al.'s self-attention: weights per layer, averaged over the heads
_SAN = {"attention": "graph", "multi_head": True}


def _check_hybrid(a: EncoderArgs) -> None:
    """Translation configs refuse more hybrid layers than the encoder has; a
    sentence config caps them at its depth (:class:`cn3.encoders.options.HybridOptions`)."""
    if a.level == "translation" and a.hybrid.layers > a.layers:
        raise ConfigError(f"model.hybrid.layers ({a.hybrid.layers}) exceeds model.encoder_layers ({a.layers})")


@register("transformer", "Vaswani et al. 2017 (Transformer encoder; CN3 paper's SelfAtt3)", default_layers=2,
          table_order=8, **_SAN)
def _transformer(a: EncoderArgs) -> nn.Module:
    return _san(a)


@register("hybrid", "Xu et al. 2019 (hybrid local/global attention; combine: gate | concat)", default_layers=2,
          table_order=11, check=_check_hybrid, options=tuple(f"hybrid.{f.name}" for f in fields(HybridOptions)), **_SAN)
def _hybrid(a: EncoderArgs) -> nn.Module:
    return _san(a, a.hybrid.layers, "hybrid" if a.hybrid.combine == "gate" else "concat")


@register("local", "Xu et al. 2019 (local attention only, the paper's ablation)", default_layers=2,
          table_order=12, check=_check_hybrid, options=("hybrid.layers", "hybrid.window"), **_SAN)
def _local(a: EncoderArgs) -> nn.Module:
    return _san(a, a.hybrid.layers, "local")
