"""Literal references for :mod:`cn3.nn`: the CN3 layer written as plain loops over nodes, keys and heads,
reading a layer's parameters (its class docstring's equations, one scalar sum at a time)."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def _parts(layer):
    """The layer's weights as plain tensors, ``P`` as the identity when the layer has none."""
    eye = torch.eye(layer.in_channels, dtype=layer.att.dtype)
    return {"P": eye if layer.lin is None else layer.lin.weight, "Wq": layer.lin_query.weight,
            "Wk": layer.lin_key.weight, "E": None if layer.edge_emb is None else layer.edge_emb.weight,
            "Wa": None if layer.lin_edge is None else layer.lin_edge.weight, "u": layer.att}


def node_output(layer, x_i: Tensor, h_i: Tensor, keys: list[tuple[Tensor, Tensor | None, Tensor | None]]
                ) -> tuple[Tensor, list[list[float]]]:
    """One node's output from its input ``x_i``, its value ``h_i`` and its keys, each
    ``(x_k, edge type or None, edge features or None)``; also the weights ``[head][key]``."""
    w = _parts(layer)
    heads, channels, rows = layer.heads, layer.out_channels, layer.att.shape[1]
    message = torch.zeros(heads * channels, dtype=x_i.dtype)
    weights = []
    for head in range(heads):
        band = slice(head * rows, (head + 1) * rows)
        scores = []
        for x_k, edge_type, edge_attr in keys:
            z = w["Wq"][band] @ x_i + w["Wk"][band] @ x_k
            if edge_type is not None:
                z = z + w["E"][int(edge_type), band]
            if edge_attr is not None:
                z = z + w["Wa"][band] @ edge_attr
            scores.append(sum(float(w["u"][head, j]) * math.tanh(float(z[j])) for j in range(rows)))
        top = max(scores, default=0.0)
        total = sum(math.exp(s - top) for s in scores)
        alphas = [math.exp(s - top) / total for s in scores]
        weights.append(alphas)
        cols = slice(head * channels, (head + 1) * channels)
        for alpha, (x_k, _, _) in zip(alphas, keys):
            message[cols] += alpha * (w["P"] @ x_k)[cols]
    if layer.lin_gate is None:
        out = message
    else:
        gate = torch.sigmoid(layer.lin_gate.weight @ x_i + layer.lin_gate.bias)
        out = gate * message + (1 - gate) * h_i
    if not layer.concat:
        out = out.view(heads, channels).mean(dim=0)
    return (out if layer.bias is None else out + layer.bias), weights


@torch.no_grad()
def dense_loops(layer, x: Tensor, mask: Tensor, adj: Tensor | None = None, edge_type: Tensor | None = None,
                edge_attr: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """:class:`cn3.nn.DenseCN3Conv` on ``x (B, N, F)`` by loops: ``out (B, N, ·)``, ``alpha (B, H, N, N)``.
    Key ``k`` of node ``i``: real, and ``adj[b, i, k] != 0`` (or ``k == i`` with ``add_self_loops``)."""
    batch, n, _ = x.shape
    width = layer.heads * layer.out_channels if layer.concat else layer.out_channels
    out = torch.zeros(batch, n, width, dtype=x.dtype)
    alpha = torch.zeros(batch, layer.heads, n, n, dtype=x.dtype)
    p = _parts(layer)["P"]
    for b in range(batch):
        for i in range(n):
            if not mask[b, i]:
                continue
            allowed = [k for k in range(n) if mask[b, k] and (
                adj is None or adj[b, i, k] != 0 or (layer.add_self_loops and k == i))]
            keys = [(x[b, k], None if edge_type is None else edge_type[b, i, k],
                     None if edge_attr is None else edge_attr[b, i, k]) for k in allowed]
            out[b, i], weights = node_output(layer, x[b, i], p @ x[b, i], keys)
            for head, row in enumerate(weights):
                for k, value in zip(allowed, row):
                    alpha[b, head, i, k] = value
    return out, alpha


@torch.no_grad()
def edge_loops(layer, x: Tensor, edge_index: Tensor, edge_attr: Tensor | None = None,
               edge_type: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """:class:`cn3.nn.CN3Conv` on the edges as given (no self-loops added) by loops over each target's
    incoming edges: ``out (N, ·)``, ``alpha (E, H)``."""
    n = x.shape[0]
    width = layer.heads * layer.out_channels if layer.concat else layer.out_channels
    out = torch.zeros(n, width, dtype=x.dtype)
    alpha = torch.zeros(edge_index.shape[1], layer.heads, dtype=x.dtype)
    p = _parts(layer)["P"]
    for i in range(n):
        incoming = [e for e in range(edge_index.shape[1]) if edge_index[1, e] == i]
        keys = [(x[edge_index[0, e]], None if edge_type is None else edge_type[e],
                 None if edge_attr is None else edge_attr[e]) for e in incoming]
        out[i], weights = node_output(layer, x[i], p @ x[i], keys)
        for head, row in enumerate(weights):
            for e, value in zip(incoming, row):
                alpha[e, head] = value
    return out, alpha
