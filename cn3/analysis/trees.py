"""The best dependency tree of a soft graph: the single-root spanning arborescence of largest total weight
(Chu-Liu-Edmonds), read off any attention matrix whose row ``i`` is word ``i``'s distribution over its
heads, the diagonal the root's share (as ``model.edge_weights: tree`` defines it; for the other edge
weights a word's weight on itself plays the root's part).

With the weights being arc marginals, the tree maximises the expected number of correct arcs (minimum
Bayes risk decoding). Networkx's Edmonds implementation (maintained, exact) does the search; one root is
forced by lowering every root arc by more than all other arcs can add, so the optimum uses exactly one.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

_ROOT = -1  # the artificial root node's name in the graph handed to networkx


def best_tree(A: np.ndarray, keys: np.ndarray | None = None) -> np.ndarray:
    """The heads ``(n,)`` (0-based, ``-1`` for the one root) of the maximum spanning single-root tree of
    ``A (n, n)`` (``A[i, k]``: weight of ``k`` as ``i``'s head; ``A[i, i]``: of ``i`` as the root).
    ``keys (n, n)`` bool, where given, lists the arcs allowed (a tree must exist among them).

    Raises:
        ValueError: ``A`` is not square, or no spanning tree exists among the allowed arcs.
    """
    n = A.shape[0]
    if A.ndim != 2 or A.shape[1] != n:
        raise ValueError(f"A must be square, got shape {A.shape}")
    if n == 1:
        return np.array([-1])
    allowed = np.ones((n, n), dtype=bool) if keys is None else keys.astype(bool)
    penalty = float(np.abs(A).sum()) + 1.0  # more than all non-root arcs together
    graph = nx.DiGraph()
    graph.add_nodes_from([_ROOT, *range(n)])
    for i in range(n):
        if allowed[i, i]:
            graph.add_edge(_ROOT, i, weight=float(A[i, i]) - penalty)
        for k in np.flatnonzero(allowed[i]):
            if k != i:
                graph.add_edge(int(k), i, weight=float(A[i, k]))
    try:
        tree = nx.maximum_spanning_arborescence(graph, attr="weight", preserve_attrs=False)
    except nx.NetworkXException as error:
        raise ValueError(f"no spanning tree among the allowed arcs: {error}") from error
    heads = np.full(n, -1)
    for head, dependent in tree.edges():
        heads[dependent] = -1 if head == _ROOT else head
    return heads


def attachment_score(predicted: np.ndarray, gold: np.ndarray) -> float:
    """Unlabelled attachment: the share of words whose predicted head (``-1`` root) is the gold one."""
    return float(np.mean(predicted == gold)) if len(gold) else float("nan")
