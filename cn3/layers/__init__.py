"""Graph layers: the CN3 dynamic-graph layer and its memory-bounded additive attention."""

from cn3.layers.blockwise_energy import (
    BlockwiseAdditiveAttention,
    additive_attention,
    additive_attention_dense,
)
from cn3.layers.dynamic_graph import (
    DynamicGraphEncoder,
    DynamicGraphLayer,
    dynamic_graph_reference,
)

__all__ = [
    "BlockwiseAdditiveAttention",
    "DynamicGraphEncoder",
    "DynamicGraphLayer",
    "additive_attention",
    "additive_attention_dense",
    "dynamic_graph_reference",
]
