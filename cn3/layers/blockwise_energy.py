"""The blockwise additive attention's names where they were first published: the code lives beside the
layer that uses it, in :mod:`cn3.layers.dynamic_graph` (:class:`~cn3.layers.dynamic_graph.
BlockwiseAdditiveAttention`, :func:`~cn3.layers.dynamic_graph.additive_attention`), so that the path from
:class:`cn3.nn.DenseCN3Conv` to the edge weights reads in two files."""

from cn3.layers.dynamic_graph import (
    BLOCK_ELEMENTS,
    DENSE_ELEMENTS,
    BlockwiseAdditiveAttention,
    additive_attention,
    default_block_rows,
)

__all__ = ["BLOCK_ELEMENTS", "DENSE_ELEMENTS", "BlockwiseAdditiveAttention", "additive_attention",
           "default_block_rows"]
