"""Slow, literal reference implementations the fast code in ``cn3`` is tested against.

They are not part of the package: each one writes a definition down the plainest way (Python loops,
full broadcasting, PyG's generic collation), for small inputs in tests only.

* :func:`dynamic_graph_reference` — :class:`cn3.layers.DynamicGraphLayer`, one node pair at a time.
* :func:`additive_attention_dense` — :func:`cn3.layers.additive_attention` by broadcasting.
* :func:`collate` — :func:`cn3.sentence.batching.make_batch` through per-item PyG ``Data`` objects.

The Triton kernels' references live beside the kernels, where their tests import them from:
:func:`cn3.layers.fused_energy.reference_attention` and :func:`cn3.layers.onlstm_triton.reference_scan`.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch_geometric.data import Batch, Data
from torch_geometric.utils import to_dense_adj, to_dense_batch

from cn3.layers import DynamicGraphLayer
from cn3.layers.attention import attention
from cn3.sentence.batching import GraphBatch, SideBatch

NODE_ATTRS = ("word", "lower", "chars", "spell", "upos")


def dynamic_graph_reference(layer: DynamicGraphLayer, h: Tensor, mask: Tensor,
                            v: Tensor | None = None, edge_type: Tensor | None = None,
                            per_head: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """The layer's equations written literally, one sentence, node pair and energy head at a time.

    Slow (Python loops over ``B x N x N x H``): it builds the explicit concatenation
    ``[h_k, h_i, v_i, v_k, e_ik]`` and applies the single matrix ``W``; with ``H`` energy heads
    (``model.energy_heads``), head ``h`` takes rows ``h e/H:(h+1) e/H`` of ``W`` and ``u_h``::

        s^h_ik = u_h^T tanh(W_h [h_k, h_i, v_i, v_k, e_ik])
        alpha^h_ik = softmax_k(s^h_ik) over real k
        h~_i = concat_h sum_k alpha^h_ik h_k[h d/H:(h+1) d/H]
        h'_i = g_i h~_i + (1 - g_i) h_i,  g_i = sigmoid(W_g h_i + b)

    Same inputs and outputs as :meth:`DynamicGraphLayer.forward`: ``alpha`` is the mean over the
    heads ``(B, N, N)``, or each head's ``(B, H, N, N)`` with ``per_head``.
    """
    heads = layer.energy_heads
    W = layer.energy_weight()  # (e, 2d [+ 2a] [+ edge_dim])
    u = layer.u.reshape(heads, -1)  # (H, e/H); one head: the paper's u
    rows, width = W.shape[0] // heads, h.shape[-1] // heads
    batch, n = h.shape[:2]
    h_new, alpha, gate = torch.zeros_like(h), h.new_zeros(batch, heads, n, n), torch.zeros_like(h)
    for b in range(batch):
        nodes = mask[b].nonzero().flatten().tolist()
        for i in nodes:
            messages = []
            for head in range(heads):
                W_h = W[head * rows:(head + 1) * rows]
                scores = []
                for k in nodes:
                    parts = [h[b, k], h[b, i]]
                    if v is not None:
                        parts += [v[b, i], v[b, k]]
                    if edge_type is not None:
                        parts.append(layer.edge_emb.weight[edge_type[b, i, k]])
                    scores.append(u[head] @ torch.tanh(W_h @ torch.cat(parts)))  # s^h_ik
                weights = torch.softmax(torch.stack(scores), dim=0)  # alpha^h_ik over real k
                messages.append(weights @ h[b, nodes, head * width:(head + 1) * width])  # sum_k alpha_ik h_k
                alpha[b, head, i, nodes] = weights
            g = torch.sigmoid(layer.lin_gate(h[b, i]))  # g_i
            h_new[b, i] = g * torch.cat(messages) + (1 - g) * h[b, i]
            gate[b, i] = g
    return h_new, alpha if per_head else alpha.mean(1), gate


def additive_attention_dense(query: Tensor, key: Tensor, u: Tensor, values: Tensor,
                             key_mask: Tensor | None = None, query_mask: Tensor | None = None,
                             edge_vecs: Tensor | None = None,
                             edge_type: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """:func:`cn3.layers.additive_attention` by plain broadcasting and autograd, in
    ``(B, Nq, Nk, e)`` memory: the readable definition the blockwise version is tested against."""
    pre = query[:, :, None, :] + key[:, None, :, :]  # (B, Nq, Nk, e)
    if edge_vecs is not None:
        pre = pre + edge_vecs[edge_type]
    energy = torch.tanh(pre) @ u  # (B, Nq, Nk)
    return attention(energy, values, key_mask, query_mask=query_mask)


def _side(batch: Batch, suffix: str, vector: Tensor) -> tuple[SideBatch, Tensor]:
    """Densify one side. ``vector`` maps each node to its item in the batch."""
    size = int(vector.max()) + 1 if vector.numel() else 0
    dense = {}
    mask = None
    for name in NODE_ATTRS:
        value = getattr(batch, name + suffix, None)
        if value is None:
            continue
        dense[name], mask = to_dense_batch(value, vector, batch_size=size)
    edge_index = getattr(batch, "edge_index" + suffix, None)
    if edge_index is not None:
        dense["edge_type"] = to_dense_adj(edge_index, vector, edge_attr=getattr(batch, "edge_type" + suffix),
                                          max_num_nodes=mask.shape[1], batch_size=size)
    return SideBatch(mask=mask, **dense), mask


def collate(items: list[Data], indices: list[int] | None = None, tagging: bool = False) -> GraphBatch:
    """Collate ``Data`` (or ``PairData``) graphs into a :class:`GraphBatch` the generic PyG way.

    ``Batch.from_data_list`` + ``to_dense_batch``/``to_dense_adj`` over the items of
    ``GraphDataset.__getitem__``: the reference :func:`cn3.sentence.batching.make_batch` (which reads the
    columnar store directly) must equal. ``tagging``: ``y`` holds one label per node (densified to
    ``(B, N)``), else one per item.
    """
    index = torch.tensor(indices if indices is not None else range(len(items)), dtype=torch.long)
    if hasattr(items[0], "word_a"):
        batch = Batch.from_data_list(items, follow_batch=["word_a", "word_b"])
        a, _ = _side(batch, "_a", batch.word_a_batch)
        b, _ = _side(batch, "_b", batch.word_b_batch)
        return GraphBatch(a, b, batch.y, index)
    batch = Batch.from_data_list(items)
    a, mask = _side(batch, "", batch.batch)
    y = batch.y
    if tagging:
        y, _ = to_dense_batch(y, batch.batch, fill_value=0, max_num_nodes=mask.shape[1])
    return GraphBatch(a, None, y, index)


def chain_tree(batch: int, n: int) -> torch.Tensor:
    """Edge types of a chain: word i's head is i - 1 (type 1 at [i, head], 2 at [head, i]); the root
    (word 0) carries its odd self-loop."""
    edge_type = torch.zeros(batch, n, n, dtype=torch.long)
    for i in range(1, n):
        edge_type[:, i, i - 1] = 1
        edge_type[:, i - 1, i] = 2
    edge_type[:, 0, 0] = 1
    return edge_type
