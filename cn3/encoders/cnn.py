"""Convolutional baselines under one registry name, ``cnn``, picked by the task level:

* sentences, pairs and the translation source: Kim (EMNLP 2014), "Convolutional Neural Networks for
  Sentence Classification" (:class:`KimCNN`): feature maps of several widths, ReLU, max over time;
* tagging: Collobert et al. (JMLR 2011), "Natural Language Processing (Almost) from Scratch", the
  window approach (:class:`WindowCNN`): a linear layer over each word's window, then HardTanh (their
  last linear layer, the tag scores, is the tagging head's emission layer, and their sentence-level
  log-likelihood is its CRF).

Both zero ``x`` at padded positions before convolving, so a real position sees zeros beyond the
sentence's end whatever padding follows it (padding invariance), and zero ``h`` at padding after.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from cn3.encoders.registry import LEVELS, EncoderArgs, register
from cn3.layers.pooling import max_pool


def _zero_padding(x: Tensor, mask: Tensor) -> Tensor:
    return x.masked_fill(~mask.unsqueeze(-1), 0.0)


class KimCNN(nn.Module):
    """Kim (2014): for each width ``w``, ``filters`` feature maps ``c_i = ReLU(w . x_{i:i+w-1} + b)``,
    read per token; :meth:`pool` is Kim's max-over-time ``ĉ = max{c}``.

    To give every token a state (translation attends over them) the windows are "same"-padded: the
    map at token ``i`` covers ``x_{i-l} .. x_{i+r}``, ``l = (w-1)//2``, ``r = w//2``, zeros outside the
    sentence. Kim's code pads ``w-1`` zeros on each side; this leaves out only its edge windows that
    cover fewer than ``w//2`` words.

    Args:
        in_dim: width of ``x``.
        widths: filter widths (Kim: 3, 4, 5).
        filters: feature maps per width (Kim: 100).
        dropout: on the feature maps ``h``; the builder passes it only for translation (Kim's
            dropout is on the pooled vector, where the sentence heads apply theirs).

    Shapes:
        ``x (B, N, in_dim)``, ``mask (B, N)`` -> ``h (B, N, len(widths) * filters)`` (zero at padding),
        ``info = {}``; ``pool(h, mask, info) -> (B, len(widths) * filters)``.
    """

    def __init__(self, in_dim: int, widths: list[int] | tuple[int, ...], filters: int, dropout: float = 0.0):
        super().__init__()
        if not widths or min(widths) < 1 or filters < 1:
            raise ValueError(f"KimCNN needs widths >= 1 and filters >= 1, got {widths} and {filters}")
        self.widths = tuple(widths)
        self.convs = nn.ModuleList(nn.Conv1d(in_dim, filters, w) for w in self.widths)
        self.dropout = nn.Dropout(dropout)
        self.out_dim = self.pool_dim = len(self.widths) * filters
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Kim's released code (``conv_net_classes.py``, ReLU filters): weights ``U(-0.01, 0.01)``,
        zero biases (the paper itself states no init)."""
        for conv in self.convs:
            nn.init.uniform_(conv.weight, -0.01, 0.01)
            nn.init.zeros_(conv.bias)

    def forward(self, x: Tensor, mask: Tensor, *, v: Tensor | None = None,
                edge_type: Tensor | None = None) -> tuple[Tensor, dict]:
        x = _zero_padding(x, mask).transpose(1, 2)  # (B, in_dim, N)
        maps = []
        for w, conv in zip(self.widths, self.convs):
            window = F.pad(x, ((w - 1) // 2, w // 2))  # (B, in_dim, N + w - 1): zeros outside the sentence
            maps.append(conv(window).relu())  # c_i = f(w . x_{i-l:i+r} + b), (B, filters, N)
        h = torch.cat(maps, 1).transpose(1, 2)  # (B, N, len(widths) * filters)
        h = self.dropout(_zero_padding(h, mask))
        return h, {}

    def pool(self, h: Tensor, mask: Tensor, info: dict) -> Tensor:
        """Max over time ``ĉ = max{c}`` over the real positions only; a row without real tokens pools
        to zeros (not ``-inf``, which the head would turn into NaN)."""
        return max_pool(h, mask)  # (B, out_dim)


class WindowCNN(nn.Module):
    """Collobert et al. (2011), window approach: ``f^1`` concatenates the ``window`` word vectors
    centred on each word (zero vectors beyond the sentence edges), ``f^2 = M^2 f^1 + b^2`` maps them
    to ``hidden`` units, ``f^3 = HardTanh(f^2)``, computed as a width-``window`` 1-D convolution.
    Collobert et al. pad with a learned PADDING vector; the shared node encoder has none, so zeros.

    Args:
        in_dim: width of ``x``.
        hidden: hidden units (the output width; Collobert et al.: 300).
        window: odd window size (Collobert et al.: 5).
        dropout: on the hidden units (Collobert et al. use none).

    Shapes:
        ``x (B, N, in_dim)``, ``mask (B, N)`` -> ``h (B, N, hidden)`` (zero at padding), ``info = {}``.
    """

    def __init__(self, in_dim: int, hidden: int, window: int, dropout: float = 0.0):
        super().__init__()
        if window < 1 or window % 2 == 0:
            raise ValueError(f"WindowCNN needs an odd window to centre it on each word, got {window}")
        self.conv = nn.Conv1d(in_dim, hidden, window, padding=window // 2)
        self.dropout = nn.Dropout(dropout)
        self.out_dim = hidden
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Collobert et al.'s fan-in scaled uniform, ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` for weights
        and biases, ``fan_in = window * in_dim`` (PyTorch's convolution default)."""
        self.conv.reset_parameters()

    def forward(self, x: Tensor, mask: Tensor, *, v: Tensor | None = None,
                edge_type: Tensor | None = None) -> tuple[Tensor, dict]:
        x = _zero_padding(x, mask).transpose(1, 2)  # (B, in_dim, N)
        h = F.hardtanh(self.conv(x)).transpose(1, 2)  # f^3 = HardTanh(M^2 f^1 + b^2), (B, N, hidden)
        return self.dropout(_zero_padding(h, mask)), {}


@register("cnn", "Kim 2014 (sentences); Collobert et al. 2011 (tagging, window approach)", levels=LEVELS,
          table_order=1, options=("cnn.widths", "cnn.filters", "cnn.window"))
def _build(a: EncoderArgs) -> nn.Module:
    if a.level == "node":
        return WindowCNN(a.in_dim, a.d, a.cnn.window, a.dropout)
    return KimCNN(a.in_dim, a.cnn.widths, a.cnn.filters, a.dropout if a.level == "translation" else 0.0)
