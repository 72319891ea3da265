"""The neural bag of words (NBOW): the sentence is the average of its word vectors.

The baseline of Kalchbrenner et al. (ACL 2014, "A Convolutional Neural Network for Modelling
Sentences", the ``NBoW`` row of their tables) and of the CN3 paper's Table 3 (row ``NBOW``): no
composition at all, the node vectors are the states and the head mean-pools them.
"""

from __future__ import annotations

from torch import Tensor, nn

from cn3.encoders.registry import LEVELS, EncoderArgs, register


class NBOW(nn.Module):
    """The identity encoder: ``h = x``, zeroed at padding; the head's mean-pool makes it a bag of words.

    No sinusoidal positions are added (whatever ``EncoderArgs.positions`` says): a bag of words is
    order-free by definition, and mean-pooled positions would only add a sentence-length signal.

    Args:
        in_dim: width of ``x`` (also the output width).

    Shapes:
        ``x (B, N, in_dim)``, ``mask (B, N)`` -> ``h (B, N, in_dim)`` (zero at padding), ``info = {}``.
    """

    def __init__(self, in_dim: int):
        super().__init__()
        self.out_dim = in_dim
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Nothing to initialise: no parameters of its own."""

    def forward(self, x: Tensor, mask: Tensor, *, v: Tensor | None = None,
                edge_type: Tensor | None = None) -> tuple[Tensor, dict]:
        return x.masked_fill(~mask.unsqueeze(-1), 0.0), {}  # (B, N, in_dim)


@register("nbow", "Kalchbrenner et al. 2014 (NBoW: mean of the word vectors; CN3 paper's Table 3 NBOW)",
          levels=LEVELS, table_order=0)
def _build(a: EncoderArgs) -> nn.Module:
    return NBOW(a.in_dim)
