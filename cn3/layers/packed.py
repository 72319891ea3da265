"""Running a torch RNN over the real tokens of a right-padded batch: packed, or padded without host syncs.

Two paths give the same outputs and gradients (``tests/layers/test_context_lstm.py``):

* packed (:func:`torch.nn.utils.rnn.pack_padded_sequence`): the lengths go to the host and the
  packing order is computed there, a wait for the device on CUDA at every call;
* padded (:func:`run_padded`): each direction of each layer as one unidirectional call over the
  whole padded batch. The forward direction reads the batch as it is (padding follows the real
  tokens, so it never reaches them); the backward direction reads the rows reversed within their
  lengths by an index computed on the device (:func:`reverse_within_lengths`), and its outputs are
  reversed back. Nothing is read on the host, so a CUDA step never waits and ``torch.compile``
  traces it.

:func:`run_packed` picks the padded path on every device but the CPU in eager mode, where packing
skips the padding's work and a host read costs nothing; under ``torch.compile`` it is padded on the
CPU as well.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from cn3.layers.lstm import run_direction


def padded_by_default(x: Tensor) -> bool:
    """Whether :func:`run_packed` takes the padded path for ``x``: off the CPU, or while compiling."""
    return x.device.type != "cpu" or torch.compiler.is_compiling()


def run_packed(rnn: nn.Module, x: Tensor, mask: Tensor, padded: bool | None = None) -> Tensor:
    """``rnn`` (``batch_first``) over each row's real tokens only, so outputs do not depend on the padding.

    Shapes: ``x (B, N, d_in)``, ``mask (B, N)`` -> ``(B, N, d_out)``, zero at padding (a row without
    tokens comes out all zero).

    Args:
        padded: take :func:`run_padded` (``True``) or pack (``False``); ``None``:
            :func:`padded_by_default`. Modules other than ``nn.LSTM``/``nn.GRU``/``nn.RNN`` are
            always packed.
    """
    if padded is None:
        padded = padded_by_default(x)
    if padded and isinstance(rnn, nn.RNNBase):
        return run_padded(rnn, x, mask)
    lengths = mask.sum(1).clamp(min=1).cpu()  # packing needs a length >= 1: an empty row packs one step
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, _ = pad_packed_sequence(rnn(packed)[0], batch_first=True, total_length=x.shape[1])
    return out.masked_fill(~mask.unsqueeze(-1), 0.0)


def reverse_within_lengths(x: Tensor, lengths: Tensor) -> Tensor:
    """Each row of ``x (B, N, ...)`` reversed within its first ``lengths[b]`` positions; the padding
    stays where it is. Its own inverse. The index is computed on ``x``'s device.

    ``out[b, t] = x[b, lengths[b] - 1 - t]`` for ``t < lengths[b]``, else ``x[b, t]``.
    """
    pos = torch.arange(x.shape[1], device=x.device)[None, :]  # (1, N)
    lengths = lengths[:, None]  # (B, 1)
    index = torch.where(pos < lengths, lengths - 1 - pos, pos)  # (B, N)
    return x.gather(1, index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x))


def run_padded(rnn: nn.RNNBase, x: Tensor, mask: Tensor) -> Tensor:
    """A ``batch_first`` ``nn.LSTM``/``nn.GRU``/``nn.RNN`` (any layers, either direction) over a right-padded
    batch, layer by layer, each direction one unidirectional call (:func:`cn3.layers.lstm.run_direction`)
    on its own weights; between layers ``rnn.dropout`` in training, as the module applies it.

    Shapes: ``x (B, N, d_in)``, ``mask (B, N)`` -> ``(B, N, d_out)``, zero at padding.
    """
    lengths = mask.sum(1)  # (B,), on the device
    keep = mask.unsqueeze(-1)
    h = x
    for layer in range(rnn.num_layers):
        if layer:
            h = nn.functional.dropout(h, rnn.dropout, rnn.training)
        outs = [run_direction(rnn, h, layer, reverse=False)]
        if rnn.bidirectional:
            back = run_direction(rnn, reverse_within_lengths(h, lengths), layer, reverse=True)
            outs.append(reverse_within_lengths(back, lengths))
        # zero at padding, as packing leaves it (the next layer never reads it: it follows each row)
        h = (torch.cat(outs, -1) if len(outs) > 1 else outs[0]).masked_fill(~keep, 0.0)
    return h
