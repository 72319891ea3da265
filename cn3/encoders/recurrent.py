"""Recurrent encoders: the CN3 paper's RNN and LSTM baselines, ON-LSTM (Shen et al., ICLR 2019) and
the ON-LSTM + self-attention encoder of Hao et al. (2019) with its LSTM twin.

* ``rnn``: Elman RNN (tanh), bidirectional on sentence tasks.
* ``lstm``: an LSTM stack (BiLSTM on sentence tasks, as the CN3 paper's LSTM row; left to right for
  translation, Hao et al.'s baseline); ``onlstm``: the same with ON-LSTM layers.
* ``onlstm_san``/``lstm_san``: ``K = rnn.layers`` recurrent layers and ``layers - K`` self-attention
  layers, ``H = H_rnn + H_san`` (Hao et al., eq. 10); ``rnn.order: san_first`` swaps the stacks.

``rnn.bidirectional`` left unset takes the level's default (above). ``rnn.onlstm_kernel`` (an execution
option: how the ON-LSTM layers run, not what they compute) reaches the ON-LSTM layers of ``onlstm`` and
``onlstm_san`` only.
"""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn import functional as F

from cn3.config import ConfigError
from cn3.encoders.registry import EncoderArgs, register
from cn3.encoders.san import SelfAttentionEncoder, check_heads
from cn3.layers.onlstm import RecurrentStack
from cn3.layers.packed import run_packed


class ElmanRNN(nn.Module):
    """Elman (1990) recurrent network, ``h_t = tanh(W x_t + U h_{t-1} + b)``, packed over real tokens.

    Args:
        in_dim, d: input and output width (``d // 2`` per direction when bidirectional).
        layers, bidirectional, dropout: as ``torch.nn.RNN`` (dropout between layers).

    Init: torch's standard ``U(-1/sqrt(h), 1/sqrt(h))``.
    Shapes: ``x (B, N, in_dim)``, ``mask (B, N)`` -> ``h (B, N, d)``, zero at padding.
    """

    def __init__(self, in_dim: int, d: int, layers: int = 1, bidirectional: bool = True, dropout: float = 0.0):
        super().__init__()
        if bidirectional and d % 2:
            raise ConfigError(f"a bidirectional rnn needs an even width, got {d}")
        self.rnn = nn.RNN(in_dim, d // 2 if bidirectional else d, num_layers=layers, batch_first=True,
                          bidirectional=bidirectional, dropout=dropout if layers > 1 else 0.0)
        self.out_dim = d

    def reset_parameters(self) -> None:
        self.rnn.reset_parameters()

    def forward(self, x: Tensor, mask: Tensor, *, v: Tensor | None = None,
                edge_type: Tensor | None = None) -> tuple[Tensor, dict]:
        return run_packed(self.rnn, x, mask), {}


class RecurrentEncoder(nn.Module):
    """A (ON-)LSTM stack as an encoder: :class:`cn3.layers.onlstm.RecurrentStack` behind the
    common interface. Shapes as :class:`ElmanRNN`."""

    def __init__(self, in_dim: int, d: int, layers: int, cell: str, chunk_size: int = 8,
                 bidirectional: bool = True, dropout: float = 0.0, residual: bool = False, kernel: str = "auto"):
        super().__init__()
        self.rnn = RecurrentStack(d, layers, cell, chunk_size, bidirectional, dropout, in_dim=in_dim,
                                  residual=residual, kernel=kernel)
        self.out_dim = d

    def reset_parameters(self) -> None:
        self.rnn.reset_parameters()

    def forward(self, x: Tensor, mask: Tensor, *, v: Tensor | None = None,
                edge_type: Tensor | None = None) -> tuple[Tensor, dict]:
        return self.rnn(x, mask).masked_fill(~mask.unsqueeze(-1), 0.0), {}


class RecurrentSANEncoder(nn.Module):
    """Hao et al. (2019): recurrent layers and self-attention layers, ``H = H_rnn + H_san`` (eq. 10).

    Args:
        rnn: the recurrent stack (input ``in_dim`` when it runs first, else ``d``).
        san: the self-attention stack (input ``d`` when it runs second).
        order: ``rnn_first`` (the paper) or ``san_first``.
        shortcut: add the two stacks' outputs (eq. 10); without it the top stack's output.
        dropout: on the lower stack's output before the upper stack.
    """

    def __init__(self, rnn: RecurrentStack, san: SelfAttentionEncoder, order: str, shortcut: bool, dropout: float):
        super().__init__()
        self.rnn, self.san = rnn, san
        self.order, self.shortcut, self.dropout = order, shortcut, dropout
        self.out_dim = san.out_dim

    def reset_parameters(self) -> None:
        self.rnn.reset_parameters()
        self.san.reset_parameters()

    def forward(self, x: Tensor, mask: Tensor, *, v: Tensor | None = None,
                edge_type: Tensor | None = None) -> tuple[Tensor, dict]:
        if self.order == "rnn_first":
            h_rnn = self.rnn(x, mask)  # (B, N, d)
            h_san, info = self.san(F.dropout(h_rnn, self.dropout, self.training), mask)
        else:
            h_san, info = self.san(x, mask)
            h_rnn = self.rnn(F.dropout(h_san, self.dropout, self.training), mask)
        top = h_rnn if self.order == "san_first" else h_san
        h = h_rnn + h_san if self.shortcut else top  # H = H_rnn + H_san
        if not self.training:  # the two stacks' outputs, for probing them apart (cn3 probe; Hao et al. Table 3)
            info = {**info, "h_rnn": h_rnn, "h_san": h_san}
        return h.masked_fill(~mask.unsqueeze(-1), 0.0), info


def _bidirectional(a: EncoderArgs) -> bool:
    return a.rnn.bidirectional if a.rnn.bidirectional is not None else a.level != "translation"


def _chunk_size(a: EncoderArgs, width: int) -> int:
    """The ON-LSTM chunk size: ``model.rnn.chunk_size``, else the largest divisor of ``width`` up to 8
    that leaves two chunks or more. One chunk is refused: its master input gate ``1 - cumax`` is 0 at
    every step (a softmax over one chunk is 1), so the cell never writes and outputs zeros."""
    if width < 2:
        raise ConfigError(f"an ON-LSTM needs a width of 2 or more (two chunks), got {width}")
    if a.rnn.chunk_size is None:
        return max(c for c in range(1, 9) if width % c == 0 and width // c >= 2)
    if width % a.rnn.chunk_size:
        raise ConfigError(f"model.rnn.chunk_size ({a.rnn.chunk_size}) must divide the ON-LSTM width ({width}); "
                          "change it or the model width")
    if a.rnn.chunk_size == width:
        raise ConfigError(f"model.rnn.chunk_size ({a.rnn.chunk_size}) is the whole ON-LSTM width: one chunk, whose "
                          "master input gate (1 - cumax over one chunk) is 0, so the cell never writes; give at "
                          f"most {width // 2}")
    return a.rnn.chunk_size


def _kernel(a: EncoderArgs, cell: str) -> str:
    """The recurrent stack's kernel: ``model.rnn.onlstm_kernel`` for ON-LSTM cells, ``auto`` for LSTM ones."""
    return a.rnn.onlstm_kernel if cell == "onlstm" else "auto"


def _stack_shape(a: EncoderArgs, cell: str) -> tuple[bool, int]:
    """``(bidirectional, chunk_size)`` for a recurrent stack of width ``a.d``, checked."""
    bidirectional = _bidirectional(a)
    if bidirectional and a.d % 2:
        raise ConfigError(f"a bidirectional {cell} needs an even model width, got {a.d}")
    width = a.d // 2 if bidirectional else a.d
    return bidirectional, (_chunk_size(a, width) if cell == "onlstm" else 1)


#: what the recurrent encoders read of model.rnn (the ElmanRNN is torch's stack: no residual option)
_STACK = ("rnn.bidirectional", "rnn.residual")


@register("rnn", "Elman 1990 (bidirectional RNN; CN3 paper's RNN row)", table_order=2,
          options=("rnn.bidirectional",))
def _rnn(a: EncoderArgs) -> nn.Module:
    return ElmanRNN(a.in_dim, a.d, a.layers, _bidirectional(a), a.dropout)


def _recurrent(a: EncoderArgs, cell: str) -> nn.Module:
    bidirectional, chunk = _stack_shape(a, cell)
    return RecurrentEncoder(a.in_dim, a.d, a.layers, cell, chunk, bidirectional, a.dropout, a.rnn.residual,
                            _kernel(a, cell))


@register("lstm", "Hochreiter & Schmidhuber 1997 (BiLSTM on sentences; CN3 paper's LSTM row, Hao et al.'s LSTM)",
          table_order=3, options=_STACK)
def _lstm(a: EncoderArgs) -> nn.Module:
    return _recurrent(a, "lstm")


@register("onlstm", "Shen et al. 2019 (ON-LSTM stack; Hao et al.'s baseline)", table_order=13,
          options=(*_STACK, "rnn.chunk_size", "rnn.onlstm_kernel"))
def _onlstm(a: EncoderArgs) -> nn.Module:
    return _recurrent(a, "onlstm")


def _check_recurrent_san(a: EncoderArgs) -> None:
    if a.rnn.layers >= a.layers:
        raise ConfigError(f"model.rnn.layers ({a.rnn.layers}) must be below the encoder depth ({a.layers}): the "
                          "encoder is K recurrent + (depth - K) self-attention layers")


#: what the recurrent + self-attention encoders read of model.rnn (their SAN layers are plain: no hybrid ones)
_RECURRENT_SAN = (*_STACK, "rnn.layers", "rnn.order", "rnn.shortcut")


def _recurrent_san(a: EncoderArgs, cell: str) -> nn.Module:
    k = a.rnn.layers  # below the depth: _check_recurrent_san, run by build_encoder
    check_heads(a)
    rnn_first = a.rnn.order == "rnn_first"
    bidirectional, chunk = _stack_shape(a, cell)
    rnn = RecurrentStack(a.d, k, cell, chunk, bidirectional, a.dropout, in_dim=a.in_dim if rnn_first else a.d,
                         residual=a.rnn.residual, kernel=_kernel(a, cell))
    h = a.hybrid
    san = SelfAttentionEncoder(a.d if rnn_first else a.in_dim, a.d, a.layers - k, a.heads, a.ff_width, a.dropout,
                               a.attention_dropout, a.norm, a.positions and not rnn_first, 0, h.window)
    return RecurrentSANEncoder(rnn, san, a.rnn.order, a.rnn.shortcut, a.dropout)


@register("onlstm_san", "Hao et al. 2019 (ON-LSTM layers under self-attention, H = H_onlstm + H_san)",
          default_layers=3, attention="graph", multi_head=True, split_stack="H_onlstm", table_order=14,
          check=_check_recurrent_san, options=(*_RECURRENT_SAN, "rnn.chunk_size", "rnn.onlstm_kernel"))
def _onlstm_san(a: EncoderArgs) -> nn.Module:
    return _recurrent_san(a, "onlstm")


@register("lstm_san", "Hao et al. 2019 (LSTM layers under self-attention, the paper's comparison)",
          default_layers=3, attention="graph", multi_head=True, split_stack="H_lstm", table_order=15,
          check=_check_recurrent_san, options=_RECURRENT_SAN)
def _lstm_san(a: EncoderArgs) -> nn.Module:
    return _recurrent_san(a, "lstm")
