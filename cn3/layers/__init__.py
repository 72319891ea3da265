"""Graph layers: the CN3 dynamic-graph layer and its memory-bounded additive attention."""

from cn3.layers.blockwise_energy import BlockwiseAdditiveAttention, additive_attention
from cn3.layers.dynamic_graph import DynamicGraphEncoder, DynamicGraphLayer, cn3_attention

__all__ = [
    "BlockwiseAdditiveAttention",
    "DynamicGraphEncoder",
    "DynamicGraphLayer",
    "additive_attention",
    "cn3_attention",
]
