"""Node attributes -> node vectors: the paper's word, character, POS and spelling attributes.

CN3 (Liu et al., 2019), "Graph Construction". :class:`NodeEncoder` embeds each attribute and
concatenates them into ``x``, the context layer's input; the attribute part alone is ``v``, the
``v_i``/``v_k`` of the energy ``s_ik = u^T tanh(W [h_k, h_i, v_i, v_k, e_ik])``. The word's position
(also a paper attribute) is off by default (``position_dim``, :data:`MAX_POSITION`).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from cn3.layers.lstm import LSTM
from cn3.layers.packed import run_packed
from cn3.sentence.batching import SideBatch
from data_prep.vocab import PAD_ID, UNK_ID

#: Positions from 0 up to ``MAX_POSITION - 1`` have their own embedding row; every later position
#: shares row ``MAX_POSITION``. A row learns only from the tokens at its position, and sentences
#: rarely reach 100 tokens (CoNLL-2003 train: 1 sentence of 14,041; 99.9% have at most 55 tokens),
#: so rows past it would stay near their random init; on documents (IMDB, ``max_len`` 400) the
#: shared row means "far into the text".
MAX_POSITION = 100


@dataclass
class NodeEncoderSizes:
    """Vocabulary sizes a node encoder needs (from the prepared dataset)."""

    n_words: int
    n_chars: int
    n_upos: int
    n_spell: int


class CharCNN(nn.Module):
    """Character CNN with max-pooling over the characters of each word (Ma & Hovy, 2016).

    Shapes: ``chars (B, N, C)`` long (0 = padding) -> ``(B, N, out_dim)``.
    """

    def __init__(self, n_chars: int, char_dim: int, out_dim: int, width: int = 3):
        super().__init__()
        self.embed = nn.Embedding(n_chars, char_dim, padding_idx=0)
        self.conv = nn.Conv1d(char_dim, out_dim, width, padding=width // 2)

    def forward(self, chars: Tensor) -> Tensor:
        b, n, c = chars.shape
        x = self.embed(chars.view(b * n, c)).transpose(1, 2)  # (B*N, char_dim, C)
        h = self.conv(x)  # (B*N, out, C)
        h = h.masked_fill((chars.view(b * n, 1, c) == 0), float("-inf")).amax(-1)  # (B*N, out)
        return torch.nan_to_num(h, neginf=0.0).view(b, n, -1)  # words with no characters -> 0


class CharLSTM(nn.Module):
    """Character BiLSTM, final states of both directions (Lample et al., 2016).

    Shapes: ``chars (B, N, C)`` long, right-padded with 0 -> ``(B, N, out_dim)`` (``out_dim`` even).

    The LSTM runs through :func:`cn3.layers.packed.run_packed`: packed on the CPU in eager mode, padded
    elsewhere, reading nothing on the host (a CUDA step does not wait for the lengths). The forward
    direction's final state is its output at the last character, the backward direction's at the
    first; a word without characters reads one padding step, as packing needs a length of 1.
    """

    def __init__(self, n_chars: int, char_dim: int, out_dim: int):
        super().__init__()
        self.embed = nn.Embedding(n_chars, char_dim, padding_idx=0)
        self.lstm = LSTM(char_dim, out_dim // 2, batch_first=True, bidirectional=True)

    def forward(self, chars: Tensor) -> Tensor:
        b, n, c = chars.shape
        flat = chars.view(b * n, c)
        lengths = (flat != 0).sum(1).clamp(min=1)  # (B*N,), on the device
        steps = torch.arange(c, device=flat.device) < lengths[:, None]  # (B*N, C)
        out = run_packed(self.lstm, self.embed(flat), steps)  # (B*N, C, out_dim): both directions
        half = out.shape[-1] // 2
        last = (lengths - 1).view(-1, 1, 1).expand(-1, 1, half)  # (B*N, 1, out/2)
        forward = out[:, :, :half].gather(1, last).squeeze(1)  # ends at the last character
        backward = out[:, 0, half:]  # ends at the first character
        return torch.cat([forward, backward], -1).view(b, n, -1)


class NodeEncoder(nn.Module):
    """Embeds node attributes.

    Args:
        sizes: vocabulary sizes.
        word_dim: word embedding size (the pretrained vectors' size when given).
        pretrained: ``(n_words, word_dim)`` vectors for the lower-cased vocabulary, or ``None``.
        freeze: keep the word embeddings fixed.
        char: ``"none"``, ``"cnn"`` or ``"lstm"``; ``char_dim``/``char_out`` its sizes.
        pos_dim: POS embedding size (0 = no POS attribute).
        spell_dim: spelling projection size (0 = no spelling attribute).
        position_dim: size of the embedding of ``min(i, MAX_POSITION)`` (0 = none; zero at padding).
        dropout: on the concatenated vector.
        word_dropout: in training, each word id becomes ``<unk>`` with this probability (Iyyer et al.,
            2015); WHY: otherwise the ``<unk>`` row is never trained.

    Shapes: ``forward(side) -> (x (B, N, out_dim), v (B, N, attr_dim) or None)``, ``x`` being
    ``[word; attributes]``.
    """

    def __init__(self, sizes: NodeEncoderSizes, word_dim: int, pretrained: Tensor | None = None,
                 freeze: bool = False, char: str = "none", char_dim: int = 30, char_out: int = 50,
                 pos_dim: int = 0, spell_dim: int = 0, dropout: float = 0.0, word_dropout: float = 0.0,
                 position_dim: int = 0):
        super().__init__()
        self.word = nn.Embedding(sizes.n_words, word_dim, padding_idx=0)
        self.pretrained = pretrained
        self.freeze = freeze
        self.char = {"none": None, "cnn": CharCNN, "lstm": CharLSTM}[char]
        if self.char is not None:
            self.char = self.char(sizes.n_chars, char_dim, char_out)
        self.pos = nn.Embedding(sizes.n_upos, pos_dim, padding_idx=0) if pos_dim else None
        self.spell = nn.Linear(sizes.n_spell, spell_dim) if spell_dim else None
        self.position = nn.Embedding(MAX_POSITION + 1, position_dim) if position_dim else None
        self.dropout = nn.Dropout(dropout)
        self.word_dropout = word_dropout
        self._open_rows: Tensor | None = None
        self.attr_dim = (char_out if self.char is not None else 0) + pos_dim + spell_dim + position_dim
        self.out_dim = word_dim + self.attr_dim
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform in [-0.1, 0.1] (the paper), then the pretrained vectors where they exist."""
        for p in self.parameters():
            nn.init.uniform_(p, -0.1, 0.1)
        with torch.no_grad():
            if self.pretrained is not None:
                found = self.pretrained.abs().sum(1) > 0
                self.word.weight[found] = self.pretrained[found].to(self.word.weight)
            self.word.weight[0].zero_()
        self.word.weight.requires_grad_(not self.freeze)

    def _drop_words(self, ids: Tensor) -> Tensor:
        if not (self.training and self.word_dropout > 0):
            return ids
        drop = (torch.rand(ids.shape, device=ids.device) < self.word_dropout) & (ids != PAD_ID)
        return ids.masked_fill(drop, UNK_ID)  # (B, N)

    @contextmanager
    def open_vocabulary(self, rows: Tensor | None):
        """Embed ids ``n_words + j`` as ``rows[j]`` ``(K, word_dim)`` inside the block (no-op for ``None``)."""
        if rows is not None and rows.shape[-1] != self.word.embedding_dim:
            raise ValueError(f"open-vocabulary vectors have {rows.shape[-1]} dimensions, the word embeddings "
                             f"{self.word.embedding_dim}")
        self._open_rows = rows
        try:
            yield self
        finally:
            self._open_rows = None

    def _embed_words(self, ids: Tensor) -> Tensor:
        rows = self._open_rows
        if rows is None or rows.shape[0] == 0:
            return self.word(ids)
        weight = self.word.weight
        table = torch.cat([weight, rows.to(weight)])  # (n_words + K, word_dim)
        return F.embedding(ids, table, padding_idx=self.word.padding_idx)

    def _embed_positions(self, mask: Tensor) -> Tensor:
        """``(B, N, position_dim)``: row ``min(i, MAX_POSITION)`` at word ``i``, zero at padding."""
        index = torch.arange(mask.shape[1], device=mask.device).clamp(max=MAX_POSITION)  # (N,)
        return self.position(index).unsqueeze(0) * mask.unsqueeze(-1).to(self.position.weight.dtype)

    def forward(self, side: SideBatch) -> tuple[Tensor, Tensor | None]:
        attrs = []
        if self.char is not None:
            attrs.append(self.char(side.chars))  # (B, N, char_out)
        if self.pos is not None:
            attrs.append(self.pos(side.upos))  # (B, N, pos_dim)
        if self.spell is not None:
            attrs.append(torch.tanh(self.spell(side.spell)))  # (B, N, spell_dim)
        if self.position is not None:
            attrs.append(self._embed_positions(side.mask))  # (B, N, position_dim)
        words = self._embed_words(self._drop_words(side.lower))  # (B, N, word_dim)
        v = torch.cat(attrs, -1) if attrs else None
        x = torch.cat([words, v], -1) if v is not None else words
        return self.dropout(x), (self.dropout(v) if v is not None else None)
