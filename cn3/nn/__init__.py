"""The CN3 layer for PyTorch Geometric users: :class:`DenseCN3Conv` over dense batches (``x (B, N, F)``
with a mask and an optional adjacency, as PyG's ``DenseGATConv``) and :class:`CN3Conv`, its
:class:`~torch_geometric.nn.MessagePassing` twin over ``edge_index`` (as ``GATv2Conv``). Both run the
code the sentence models run (:func:`cn3.layers.dynamic_graph.cn3_attention`) and share parameters.
"""

from cn3.nn.cn3_conv import CN3Conv
from cn3.nn.dense_cn3_conv import DenseCN3Conv

__all__ = ["CN3Conv", "DenseCN3Conv"]
