"""Sentence graphs: nodes are words with attributes, edges are word pairs with attributes.

CN3 (Liu et al., 2019, "Graph Construction") scores *every* pair of words, so the graph is complete;
the parser contributes the edge *attribute* ``e_ik``. Only the parser's arcs are stored (sparse
``edge_index`` + ``edge_type``); the model rebuilds the dense ``(B, N, N)`` attribute matrix
(:func:`dense_edge_types`).

Edge types (``0`` = no arc):

* ``1 + 2 * rel`` on ``(i, head(i))`` ("up"); the root gets a self-loop ``(i, i)``;
* ``2 + 2 * rel`` on ``(head(i), i)`` ("down");

so ``n_edge_types = 1 + 2 * len(rel_vocab)``.
"""

from __future__ import annotations

import torch
from torch_geometric.data import Data


def edge_types_from_heads(head: torch.Tensor, deprel: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Directed, typed arcs of one dependency tree.

    Args:
        head: ``(N,)`` 0-based index of each word's head, ``-1`` for the root.
        deprel: ``(N,)`` relation id of the arc into each word.

    Returns:
        ``edge_index (2, E)`` and ``edge_type (E,)`` with ``E = 2 * N - n_roots``.
    """
    n = head.numel()
    node = torch.arange(n, dtype=torch.long)
    is_root = head < 0
    up_target = torch.where(is_root, node, head)  # root: self-loop
    up = torch.stack([node, up_target])
    dep = node[~is_root]
    down = torch.stack([head[~is_root], dep])
    edge_index = torch.cat([up, down], dim=1)
    edge_type = torch.cat([1 + 2 * deprel, 2 + 2 * deprel[~is_root]])
    return edge_index, edge_type


def dense_edge_types(edge_index: torch.Tensor, edge_type: torch.Tensor, batch: torch.Tensor | None = None,
                     max_num_nodes: int | None = None) -> torch.Tensor:
    """The ``(B, N, N)`` long matrix of ``e_ik`` type ids (``0`` where no arc) for a PyG batch."""
    from torch_geometric.utils import to_dense_adj

    return to_dense_adj(edge_index, batch, edge_attr=edge_type, max_num_nodes=max_num_nodes)


class PairData(Data):
    """Two sentences in one object (PyG's pair-data pattern).

    Every node attribute exists twice with suffixes ``_a`` and ``_b``; ``edge_index_a`` indexes the
    nodes of ``a`` and ``edge_index_b`` those of ``b``, so batching must offset each by its own side's
    node count. Batch with ``follow_batch=["word_a", "word_b"]`` to get ``word_a_batch``/``word_b_batch``.
    """

    def __inc__(self, key, value, *args, **kwargs):
        if key == "edge_index_a":
            return self.word_a.size(0)
        if key == "edge_index_b":
            return self.word_b.size(0)
        return super().__inc__(key, value, *args, **kwargs)
