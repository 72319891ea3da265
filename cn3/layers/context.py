"""Context layers: the local (sequential) bias CN3 adds before learning non-local structure.

CN3 (Liu et al., 2019) feeds the node vectors through a BiLSTM (``CN3_LSTM``, the default) or a CNN
so that each ``h_i`` knows its neighbourhood before the dynamic graph layer relates distant words.
Both are padding-aware: outputs at real positions do not depend on how much padding follows.
"""

from __future__ import annotations

from torch import Tensor, nn

from cn3.layers.lstm import LSTM
from cn3.layers.packed import run_packed


class BiLSTMContext(nn.Module):
    """Bidirectional LSTM over each row's real tokens (:func:`cn3.layers.packed.run_packed`: packed in CPU
    eager mode, elsewhere padded without host reads; the same result). Shapes: ``x (B, N, d_in)``,
    ``mask (B, N)`` -> ``(B, N, 2*hidden)``."""

    def __init__(self, in_dim: int, hidden: int, layers: int = 1, dropout: float = 0.0):
        super().__init__()
        self.lstm = LSTM(in_dim, hidden, num_layers=layers, batch_first=True, bidirectional=True,
                         dropout=dropout if layers > 1 else 0.0)
        self.out_dim = 2 * hidden

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        return run_packed(self.lstm, x, mask)  # (B, N, 2*hidden), zeros at padding


class CNNContext(nn.Module):
    """Stacked same-padded 1-D convolutions with ReLU; padding positions are zeroed before every
    convolution so real positions never see them. Shapes as :class:`BiLSTMContext`."""

    def __init__(self, in_dim: int, hidden: int, layers: int = 1, width: int = 3, dropout: float = 0.0):
        super().__init__()
        dims = [in_dim] + [2 * hidden] * layers
        self.convs = nn.ModuleList(nn.Conv1d(dims[i], dims[i + 1], width, padding=width // 2) for i in range(layers))
        self.dropout = nn.Dropout(dropout)
        self.out_dim = 2 * hidden

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        keep = mask.unsqueeze(1).to(x.dtype)  # (B, 1, N)
        h = x.transpose(1, 2)  # (B, d, N)
        for i, conv in enumerate(self.convs):
            h = conv(h * keep).relu()
            if i < len(self.convs) - 1:
                h = self.dropout(h)
        return (h * keep).transpose(1, 2)  # (B, N, 2*hidden)
