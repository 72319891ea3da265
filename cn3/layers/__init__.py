"""Graph layers: the CN3 dynamic-graph layer and its memory-bounded additive energy."""

from cn3.layers.blockwise_energy import (
    BlockwiseAdditiveEnergy,
    additive_energy,
    additive_energy_dense,
)
from cn3.layers.dynamic_graph import (
    DynamicGraphEncoder,
    DynamicGraphLayer,
    dynamic_graph_reference,
)

__all__ = [
    "BlockwiseAdditiveEnergy",
    "DynamicGraphEncoder",
    "DynamicGraphLayer",
    "additive_energy",
    "additive_energy_dense",
    "dynamic_graph_reference",
]
