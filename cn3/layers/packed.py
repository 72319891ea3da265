"""Running a torch RNN over the real tokens of a right-padded batch."""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


def run_packed(rnn: nn.RNNBase, x: Tensor, mask: Tensor) -> Tensor:
    """``rnn`` (``batch_first``) over each row's real tokens only, so outputs do not depend on the padding.

    Shapes: ``x (B, N, d_in)``, ``mask (B, N)`` -> ``(B, N, d_out)``, zero at padding (a row without
    tokens, packed as one step since packing needs a length >= 1, comes out all zero too).
    """
    lengths = mask.sum(1).clamp(min=1).cpu()
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, _ = pad_packed_sequence(rnn(packed)[0], batch_first=True, total_length=x.shape[1])
    return out.masked_fill(~mask.unsqueeze(-1), 0.0)
