"""Lin et al. (ICLR 2017), "A Structured Self-attentive Sentence Embedding" (``selfatt1``).

A BiLSTM reads the sentence, ``H = (h_1 .. h_n)`` (``n x 2u``); an MLP without biases gives ``r``
attention distributions over the tokens (the annotation matrix)::

    A = softmax(W_s2 tanh(W_s1 H^T))        W_s1 (d_a x 2u), W_s2 (r x d_a)
    M = A H                                  (r x 2u), the sentence embedding
    P = || A A^T - I ||_F^2                  the penalty that keeps the r hops apart

``forward`` returns the per-token states ``H`` (what tagging and the translation decoder read) and
``info = {"alphas": [A], "loss": penalty * mean_b P_b}``; :meth:`StructuredSelfAttention.pool` gives
the flattened ``M``, the paper's sentence vector (both sides of a pair go through it alike).

Init and dropout follow the authors' code (github.com/hantek/SelfAttentiveSentEmbed; the paper
states none): LSTM weights ``N(0, 0.1^2)``, zero biases, ``W_s1``/``W_s2`` Glorot-uniform; dropout
on ``H`` and on ``tanh(W_s1 H^T)``. Where the code departs from the paper's equations the paper is
followed: ``W_s1``/``W_s2`` have no biases, and ``P`` is summed over the ``r x r`` entries, not averaged.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from cn3.config import ConfigError
from cn3.encoders.registry import LEVELS, EncoderArgs, register
from cn3.layers.attention import masked_softmax
from cn3.layers.lstm import LSTM
from cn3.layers.packed import run_packed


class AnnotationMatrix(nn.Module):
    """The self-attention of Lin et al.: ``A = softmax(W_s2 tanh(W_s1 H^T))`` over real tokens.

    Args:
        dim: width of ``H`` (``2u``).
        att_hidden: ``d_a``, rows of ``W_s1``.
        hops: ``r``, rows of ``W_s2`` (attention distributions).
        dropout: on ``H`` and on ``tanh(W_s1 H^T)`` (the authors' code).

    Shapes:
        ``H (B, N, dim)``, ``mask (B, N)`` -> ``A (B, r, N)``: hops x tokens, each row a distribution
        over the real tokens, exactly zero at padding.
    """

    def __init__(self, dim: int, att_hidden: int, hops: int, dropout: float = 0.0):
        super().__init__()
        self.ws1 = nn.Linear(dim, att_hidden, bias=False)  # W_s1 (d_a x 2u)
        self.ws2 = nn.Linear(att_hidden, hops, bias=False)  # W_s2 (r x d_a)
        self.dropout = dropout
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot-uniform ``W_s1`` and ``W_s2`` (Lasagne's default, as in the authors' code)."""
        nn.init.xavier_uniform_(self.ws1.weight)
        nn.init.xavier_uniform_(self.ws2.weight)

    def forward(self, H: Tensor, mask: Tensor) -> Tensor:
        hidden = torch.tanh(self.ws1(F.dropout(H, self.dropout, self.training)))  # (B, N, d_a)
        scores = self.ws2(F.dropout(hidden, self.dropout, self.training)).transpose(1, 2)  # (B, r, N)
        return masked_softmax(scores, mask)  # A (B, r, N): the shared kernel, padded keys and empty rows 0


def annotation_penalty(A: Tensor) -> Tensor:
    """``P = ||A A^T - I||_F^2`` per sentence. Shapes: ``A (B, r, N)`` -> ``(B,)``."""
    eye = torch.eye(A.shape[1], dtype=A.dtype, device=A.device)
    return (A @ A.transpose(1, 2) - eye).pow(2).sum(dim=(1, 2))


class StructuredSelfAttention(nn.Module):
    """Lin et al. (2017): BiLSTM states, ``r`` attention hops over them, and the hops' penalty.

    Args:
        in_dim: width of ``x``.
        hidden: width of ``H`` (``2u``: ``u = hidden // 2`` per direction; must be even).
        hops: ``r``; att_hidden: ``d_a``.
        penalty: coefficient of ``P`` in the loss (0 = no penalty, nothing in ``info["loss"]``).
        dropout: inside the attention MLP (see :class:`AnnotationMatrix`).

    Shapes:
        ``x (B, N, in_dim)``, ``mask (B, N)`` -> ``h = H (B, N, hidden)`` zero at padding, and
        ``info``: ``"alphas": [A (B, r, N)]`` (hops x tokens, not the ``(B, N, N)`` of token-to-token
        encoders), ``"loss"``: ``penalty * mean_b P_b`` (a scalar) when ``penalty > 0``.
        ``pool(h, mask, info) -> M`` flattened, ``(B, r * hidden)``.
    """

    LSTM_INIT_STD = 0.1  # the authors' STD (their run script's default comment: "0.1")

    def __init__(self, in_dim: int, hidden: int, hops: int, att_hidden: int, penalty: float,
                 dropout: float = 0.0):
        super().__init__()
        if hidden % 2:
            raise ConfigError(f"selfatt1's BiLSTM needs an even model width, got {hidden}")
        self.lstm = LSTM(in_dim, hidden // 2, batch_first=True, bidirectional=True)
        self.attention = AnnotationMatrix(hidden, att_hidden, hops, dropout)
        self.penalty = penalty
        self.out_dim = hidden
        self.pool_dim = hops * hidden
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for name, p in self.lstm.named_parameters():
            if name.startswith("weight"):
                nn.init.normal_(p, 0.0, self.LSTM_INIT_STD)
            else:
                nn.init.zeros_(p)
        self.attention.reset_parameters()

    def forward(self, x: Tensor, mask: Tensor, *, v: Tensor | None = None,
                edge_type: Tensor | None = None) -> tuple[Tensor, dict]:
        H = run_packed(self.lstm, x, mask)  # (B, N, 2u)
        A = self.attention(H, mask)  # (B, r, N)
        info: dict = {"alphas": [A]}
        if self.penalty > 0:
            info["loss"] = self.penalty * annotation_penalty(A).mean()
        return H, info

    def pool(self, h: Tensor, mask: Tensor, info: dict) -> Tensor:
        """The sentence embedding ``M = A H``, flattened: ``(B, r * hidden)``."""
        return (info["alphas"][0] @ h).flatten(1)  # (B, r, 2u) -> (B, r * 2u)


@register("selfatt1", "Lin et al. 2017 (structured self-attentive embedding)", levels=LEVELS,
          attention="annotation", table_order=6, options=("selfatt.hops", "selfatt.att_hidden", "selfatt.penalty"))
def _build(a: EncoderArgs) -> nn.Module:
    s = a.selfatt
    return StructuredSelfAttention(a.in_dim, a.d, s.hops, s.att_hidden, s.penalty, a.dropout)
