"""The CN3 dynamic-graph layer (Liu et al., "Contextualized Non-local Neural Networks for
Sequence Learning", AAAI 2019): every sentence becomes a fully connected graph over its words
whose edge weights are learned per input, messages flow along them, and a gate decides how much
of each node is rewritten.

For node ``i`` and every node ``k`` of the same sentence::

    s_ik    = u^T tanh(W [h_k, h_i, v_i, v_k, e_ik])     energy
    alpha_ik = softmax_k(s_ik)                            soft adjacency, real nodes only
    h~_i    = sum_k alpha_ik h_k                          message passing
    g_i     = sigmoid(W_g h_i + b)                        gate (one value per hidden unit)
    h'_i    = g_i * h~_i + (1 - g_i) * h_i                gated update

``W`` is applied block by block, ``W_1 h_k + W_2 h_i + W_3 v_i + W_4 v_k + W_5 e_ik``, so the
``[B, N, N, 2d + ...]`` concatenation never exists: node terms are projected once per node, the
edge term once per edge type and gathered per pair.

Two options beyond the paper (the learned graphs are stars: one head cannot attend to two places),
both off by default (the paper's layer):

* ``energy_heads = H``: ``H`` energies, each its own soft graph over its own slice of the states::

      s^h_ik   = u_h^T tanh(W_h [h_k, h_i, v_i, v_k, e_ik])     W_h: energy_dim / H rows
      alpha^h  = softmax_k(s^h_ik)
      h~_i     = concat_h( sum_k alpha^h_ik h_k[slice_h] )      slice_h: the h-th of H equal slices

  No value projection is added and the gate is unchanged; the energy costs what one head of
  ``energy_dim`` rows costs.
* relative positions (:class:`DynamicGraphEncoder`, ``relative_positions = C``): the clipped offset
  ``clip(k - i, -C, C)`` joins the edge type, so ``e_ik`` also says where ``k`` lies from ``i``.

Three implementations of the energy, softmax and messages, the same function to rounding, picked
by the layer's ``impl`` (``model.attention_impl`` on sentence tasks, ``model.cn3.attention_impl`` on
translation; ``auto``: :func:`choose_impl`):

* ``blockwise`` (:mod:`cn3.layers.blockwise_energy`): blocks of query rows of about 8 MB.
* ``dense``: the same autograd Function with blocks of :data:`~cn3.layers.blockwise_energy.DENSE_ELEMENTS`.
* ``fused`` (:mod:`cn3.layers.fused_energy`): one Triton kernel forward and two backward passes for
  all heads (a ``torch.library`` op: ``torch.compile`` traces through it), memory O(B N (d + e)); on
  CPU tensors only under Triton's interpreter.

All three run behind one function, :func:`cn3_attention`, which :class:`DynamicGraphLayer` and
:class:`cn3.nn.DenseCN3Conv` both call.

``alpha`` is the only O(B N^2) output: ``need_alpha=False`` returns None in its place, which lets the
fused path skip writing it.
"""

from __future__ import annotations

import importlib.util
import warnings

import torch
from torch import Tensor, nn

from cn3.layers.attention import gated_mix
from cn3.layers.blockwise_energy import BLOCK_ELEMENTS, DENSE_ELEMENTS, additive_attention, default_block_rows
from cn3.layers.edge_weights import (
    EDGE_WEIGHTS,
    ENERGY_FORMS,
    HUB_BOUND,
    GraphParts,
    graph_attention,
    hub_penalty,
    parse_loss,
)

#: Values of ``impl``: ``auto`` picks by device (:func:`choose_impl`), the others force a path.
IMPLS = ("auto", "blockwise", "dense", "fused")
#: The widest value slice per head (``hidden / energy_heads``) ``auto`` gives the fused kernel: its
#: ``(rows, width)`` accumulators live in registers (the width padded to a power of two).
FUSED_MAX_WIDTH = 512
#: The longest sentence (keys per row) ``auto`` gives the fused kernel; the dense path was measured
#: the faster above it (docs/benchmarks.md, "Measured on one NVIDIA H200").
FUSED_MAX_LENGTH = 512


def fused_available() -> bool:
    """Triton is installed: what the fused kernel needs beyond a CUDA device."""
    return importlib.util.find_spec("triton") is not None


def choose_impl(impl: str, device: torch.device, width: int = 0, length: int = 0) -> str:
    """The path ``impl`` (one of :data:`IMPLS`) runs on ``device`` for value slices of ``width``
    and sentences of ``length`` words (padded).

    ``auto``: ``fused`` on CUDA with Triton; ``dense`` on CUDA without it, under
    ``torch.use_deterministic_algorithms`` (the fused backward sums with atomics, in no fixed
    order), or above :data:`FUSED_MAX_WIDTH` or :data:`FUSED_MAX_LENGTH`; ``blockwise`` off CUDA.
    Other values are returned as they are.

    Raises:
        ValueError: ``impl`` is not one of :data:`IMPLS`.
    """
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {', '.join(IMPLS)}, got {impl!r}")
    if impl != "auto":
        return impl
    if device.type != "cuda":
        return "blockwise"
    if (fused_available() and not torch.are_deterministic_algorithms_enabled() and width <= FUSED_MAX_WIDTH
            and length <= FUSED_MAX_LENGTH):
        return "fused"
    return "dense"



def cn3_attention(query: Tensor, key: Tensor, u: Tensor, values: Tensor, mask: Tensor,
                  edge_vecs: Tensor | None = None, edge_type: Tensor | None = None,
                  pair_vecs: Tensor | None = None, keys: Tensor | None = None, impl: str = "auto",
                  need_alpha: bool = True, block_rows: int | None = None, edge_weights: str = "softmax",
                  energy_form: str = "additive") -> tuple[Tensor, Tensor | None]:
    """CN3's energy, softmax and messages for ``H`` heads on the path :func:`choose_impl` picks: the
    one function behind :class:`DynamicGraphLayer` and :mod:`cn3.nn`'s dense layer.

    ``s^h_ik = u_h^T tanh(q^h_i + k^h_k [+ edge_vecs^h[t_ik]] [+ pair_vecs^h_ik])``,
    ``alpha^h_ik = softmax_k(s^h_ik)`` over the allowed keys (``mask_k`` and ``keys_ik``),
    ``out_i = concat_h sum_k alpha^h_ik values_k[slice_h]``; head ``h`` owns columns
    ``h e/H : (h+1) e/H`` of the projections and slice ``h d/H : (h+1) d/H`` of the values.

    Args:
        query, key: ``(B, N, e)`` per-node projections ``q_i``, ``k_k``.
        u: ``(H, e/H)``.
        values: ``(B, N, d)``; ``H`` divides ``d``.
        mask: ``(B, N)`` bool, True at real nodes (padded queries get zero weights).
        edge_vecs, edge_type: ``(T, e)`` one vector per edge type and ``(B, N, N)`` long in ``[0, T)``,
            or both None.
        pair_vecs: ``(B, N, N, e)`` float, one energy term per pair (projected edge features), or None.
        keys: ``(B, N, N)`` bool, True where query ``i`` may attend key ``k``, or None (every real key).
            A query with no allowed key gets all-zero weights and a zero output.
        impl: one of :data:`IMPLS`. The fused kernel serves neither ``pair_vecs`` nor ``keys``: with
            either, ``fused`` (given or chosen) runs the dense path instead.
        need_alpha: the fused path returns None for ``alpha`` without it (the others always return it).
        block_rows: query rows per block on the PyTorch paths; None picks by size.
        edge_weights, energy_form: one of :data:`~cn3.layers.edge_weights.EDGE_WEIGHTS` and of
            :data:`~cn3.layers.edge_weights.ENERGY_FORMS`. Anything but ``softmax`` + ``additive`` runs
            :func:`cn3.layers.edge_weights.graph_attention` (PyTorch, on every device; the fused kernel
            serves the paper's softmax only) and returns differentiable weights.

    Shapes:
        returns ``out (B, N, d)`` and ``alpha (B, H, N, N)`` (or None, see ``need_alpha``).
    """
    heads = u.shape[0]
    if edge_weights != "softmax" or energy_form != "additive":
        if pair_vecs is not None:
            edge_vecs, edge_type = _pair_table(pair_vecs, edge_vecs, edge_type)
        if block_rows is None:
            budget = BLOCK_ELEMENTS if query.device.type != "cuda" else DENSE_ELEMENTS
            block_rows = default_block_rows(query.shape[0], query.shape[1], query.shape[-1], budget=budget)
        out, alpha, _, _ = graph_attention(query, key, u, values, mask, edge_vecs, edge_type, keys, edge_weights,
                                           energy_form, block_rows)
        return out, alpha if need_alpha else None
    path = choose_impl(impl, query.device, values.shape[-1] // heads, query.shape[1])
    if path == "fused" and pair_vecs is None and keys is None:
        from cn3.layers.fused_energy import fused_additive_attention  # needs triton: only on this path

        return fused_additive_attention(query, key, u, values, mask, mask, edge_vecs, edge_type, need_alpha)
    if pair_vecs is not None:
        edge_vecs, edge_type = _pair_table(pair_vecs, edge_vecs, edge_type)
    if block_rows is None and (path != "blockwise" or keys is not None):
        budget = BLOCK_ELEMENTS if path == "blockwise" else DENSE_ELEMENTS
        block_rows = default_block_rows(query.shape[0], query.shape[1], query.shape[-1] // heads, budget=budget)
    allowed = None if keys is None else keys & mask.unsqueeze(1)  # (B, N, N)
    contexts, alphas = [], []
    for head in range(heads):
        if heads == 1:  # the projections as they are: no slicing, no copies
            cols, vcols = slice(None), slice(None)
        else:
            rows, width = u.shape[-1], values.shape[-1] // heads
            cols, vcols = slice(head * rows, (head + 1) * rows), slice(head * width, (head + 1) * width)
        context, alpha = _attend_rows(
            query[..., cols].contiguous(), key[..., cols].contiguous(), u[head], values[..., vcols].contiguous(),
            mask, allowed, None if edge_vecs is None else edge_vecs[:, cols].contiguous(), edge_type,
            block_rows)  # (B, N, d/H), (B, N, N)
        contexts.append(context)
        alphas.append(alpha)
    if heads == 1:
        return contexts[0], alphas[0].unsqueeze(1)
    return torch.cat(contexts, dim=-1), torch.stack(alphas, dim=1)  # (B, N, d), (B, H, N, N)


def _pair_table(pair_vecs: Tensor, edge_vecs: Tensor | None, edge_type: Tensor | None) -> tuple[Tensor, Tensor]:
    """Per-pair energy terms as an edge-type table: one "type" per pair, ``(B N N, e)`` and its
    ``(B, N, N)`` index, so :func:`additive_attention` gathers them as it gathers edge types."""
    batch, n_query, n_key, dim = pair_vecs.shape
    table = pair_vecs.reshape(-1, dim)  # (B N N, e)
    if edge_vecs is not None:
        table = table + edge_vecs[edge_type.reshape(-1)]  # + E[t_ik]
    index = torch.arange(batch * n_query * n_key, device=pair_vecs.device).view(batch, n_query, n_key)
    return table, index


def _attend_rows(query: Tensor, key: Tensor, u: Tensor, values: Tensor, mask: Tensor, allowed: Tensor | None,
                 edge_vecs: Tensor | None, edge_type: Tensor | None,
                 block_rows: int | None) -> tuple[Tensor, Tensor]:
    """One head of :func:`cn3_attention` on the PyTorch path. A per-pair key mask (``allowed``,
    ``(B, N, N)``) is cut into blocks of query rows here, one :func:`additive_attention` call each,
    because that function takes one key mask for all its blocks."""
    if allowed is None:
        return additive_attention(query, key, u, values, key_mask=mask, query_mask=mask, edge_vecs=edge_vecs,
                                  edge_type=edge_type, block_rows=block_rows)  # (B, N, d), (B, N, N)
    contexts, alphas = [], []
    for start in range(0, query.shape[1], block_rows):
        rows = slice(start, start + block_rows)
        context, alpha = additive_attention(
            query[:, rows], key, u, values, key_mask=allowed[:, rows], query_mask=mask[:, rows],
            edge_vecs=edge_vecs, edge_type=None if edge_type is None else edge_type[:, rows],
            block_rows=block_rows)  # (B, r, d), (B, r, N)
        contexts.append(context)
        alphas.append(alpha)
    return torch.cat(contexts, dim=1), torch.cat(alphas, dim=1)  # (B, N, d), (B, N, N)


class DynamicGraphLayer(nn.Module):
    """One CN3 layer: learn a soft graph over the sentence, pass messages, gate the update.

    Args:
        hidden: node state size ``d``.
        attr_dim: node attribute size ``a`` (POS/char/spelling embeddings, ...); 0 = none.
        n_edge_types: number of edge types ``T`` (e.g. dependency relation x direction);
            0 = no edge attributes. Type 0 means "no arc"; it has its own learned embedding,
            so the energy can tell arcs from non-arcs.
        edge_dim: size of the edge-type embedding ``e_ik``.
        energy_dim: rows of ``W``, the width of the ``tanh`` layer. The energy costs
            ``O(B N^2 energy_dim)`` time, so this is the layer's main speed knob.
        block_rows: query rows per block of the energy; None picks by size.
        init_range: every parameter is drawn from ``U(-init_range, init_range)``; the paper
            uses 0.1.
        energy_heads: ``H`` energy heads (1 = the paper's layer); must divide ``hidden`` and
            ``energy_dim``. Head ``h`` owns rows ``h*e/H : (h+1)*e/H`` of every block of ``W`` (the
            same modules and shapes as one head) and row ``h`` of ``u``, which is ``(H, e/H)``
            (``(e,)`` for one head, so one-head checkpoints keep their keys). The edge-type
            embedding is shared.
        impl: one of :data:`IMPLS` (:func:`choose_impl`); an attribute, so it may be changed after
            construction.
        edge_weights: how energies become weights, one of
            :data:`~cn3.layers.edge_weights.EDGE_WEIGHTS` (``softmax`` = the paper; ``sparsemax``,
            ``entmax15``, ``tree``: :mod:`cn3.layers.edge_weights`).
        energy_form: ``additive`` (the paper) or ``centered`` (each key's mean energy over the queries
            removed, so what is left depends on the query).

    Raises:
        ValueError: ``impl``, ``edge_weights`` or ``energy_form`` is unknown, or ``energy_heads`` does not
            divide ``hidden`` and ``energy_dim``.

    Shapes:
        - h: ``(B, N, d)``; mask: ``(B, N)`` bool, True at real nodes
        - v: ``(B, N, a)`` or None; edge_type: ``(B, N, N)`` long in ``[0, T)`` or None
          (pairs that involve padding must still hold a valid type, e.g. 0)
        - returns ``h' (B, N, d)``, ``alpha (B, N, N)``, ``gate (B, N, d)``, all zero at padded
          nodes (``alpha`` on padded keys too). With ``H > 1`` ``alpha`` is the heads' mean, or with
          ``per_head=True`` each head's, ``(B, H, N, N)``; None with ``need_alpha=False``.
        - with ``return_graph=True`` a fourth output, :class:`~cn3.layers.edge_weights.GraphParts`: each
          head's differentiable ``alpha`` and ``energy`` ``(B, H, N, N)`` and ``allowed``, for the
          regularisers (this runs :func:`~cn3.layers.edge_weights.graph_attention`, whatever the options).
    """

    def __init__(self, hidden: int, attr_dim: int = 0, n_edge_types: int = 0,
                 edge_dim: int = 32, energy_dim: int = 100, block_rows: int | None = None,
                 init_range: float = 0.1, energy_heads: int = 1, impl: str = "auto",
                 edge_weights: str = "softmax", energy_form: str = "additive") -> None:
        super().__init__()
        if impl not in IMPLS:  # now, not at the first batch
            raise ValueError(f"impl must be one of {', '.join(IMPLS)}, got {impl!r}")
        if edge_weights not in EDGE_WEIGHTS or energy_form not in ENERGY_FORMS:
            raise ValueError(f"edge_weights must be one of {', '.join(EDGE_WEIGHTS)} and energy_form one of "
                             f"{', '.join(ENERGY_FORMS)}, got {edge_weights!r}, {energy_form!r}")
        if impl == "fused" and (edge_weights, energy_form) != ("softmax", "additive"):
            warnings.warn(f"the fused kernel serves edge_weights=softmax with energy_form=additive only: "
                          f"{edge_weights} + {energy_form} runs the PyTorch path", stacklevel=2)
        self.impl, self.edge_weights, self.energy_form = impl, edge_weights, energy_form
        if energy_heads < 1 or hidden % energy_heads or energy_dim % energy_heads:
            raise ValueError(f"energy_heads={energy_heads} must be >= 1 and divide hidden={hidden} and "
                             f"energy_dim={energy_dim}")
        self.hidden, self.attr_dim, self.n_edge_types = hidden, attr_dim, n_edge_types
        self.block_rows, self.init_range, self.energy_heads = block_rows, init_range, energy_heads
        # W = [W_1 | W_2 | W_3 | W_4 | W_5], one column block per part of the concatenation.
        self.lin_hk = nn.Linear(hidden, energy_dim, bias=False)  # W_1
        self.lin_hi = nn.Linear(hidden, energy_dim, bias=False)  # W_2
        self.lin_vi = nn.Linear(attr_dim, energy_dim, bias=False) if attr_dim else None  # W_3
        self.lin_vk = nn.Linear(attr_dim, energy_dim, bias=False) if attr_dim else None  # W_4
        self.edge_emb = nn.Embedding(n_edge_types, edge_dim) if n_edge_types else None
        self.lin_edge = nn.Linear(edge_dim, energy_dim, bias=False) if n_edge_types else None  # W_5
        # u_h: row h of u (H > 1); one head keeps the paper's vector
        self.u = nn.Parameter(torch.empty(energy_dim) if energy_heads == 1
                              else torch.empty(energy_heads, energy_dim // energy_heads))
        self.lin_gate = nn.Linear(hidden, hidden)  # W_g, b
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform ``[-init_range, init_range]`` for every weight, bias and embedding (paper)."""
        for param in self.parameters():
            nn.init.uniform_(param, -self.init_range, self.init_range)

    def energy_weight(self) -> Tensor:
        """The paper's single ``W``: ``(energy_dim, 2d [+ 2a] [+ edge_dim])``; with ``H`` heads,
        the heads' ``W_h`` stacked row-wise (rows ``h*e/H : (h+1)*e/H`` are ``W_h``)."""
        blocks = [self.lin_hk, self.lin_hi, self.lin_vi, self.lin_vk, self.lin_edge]
        return torch.cat([lin.weight for lin in blocks if lin is not None], dim=1)

    def forward(self, h: Tensor, mask: Tensor, v: Tensor | None = None, edge_type: Tensor | None = None,
                per_head: bool = False, need_alpha: bool = True, return_graph: bool = False) -> tuple:
        self._check(v, edge_type)
        query = self.lin_hi(h)  # (B, N, e)  W_2 h_i
        key = self.lin_hk(h)  # (B, N, e)  W_1 h_k
        if v is not None:
            query = query + self.lin_vi(v)  # + W_3 v_i
            key = key + self.lin_vk(v)  # + W_4 v_k
        edge_vecs = None
        if edge_type is not None:
            # W_5 e_t once per edge type t; gathered per pair inside the blocks
            edge_vecs = self.lin_edge(self.edge_emb.weight)  # (T, e)
        # s^h_ik = u_h^T tanh(W_h [h_k, h_i, v_i, v_k, e_ik]);  alpha^h_ik = softmax_k(s^h_ik) over real k;
        # h~_i = concat_h sum_k alpha^h_ik h_k[slice_h]
        u = self.u.view(self.energy_heads, -1)  # (H, e/H)
        graph = None
        if return_graph:  # everything differentiable, for the regularisers
            block_rows = self.block_rows or default_block_rows(h.shape[0], h.shape[1], query.shape[-1])
            context, alpha, energy, allowed = graph_attention(query, key, u, h, mask, edge_vecs, edge_type, None,
                                                              self.edge_weights, self.energy_form, block_rows)
            graph = GraphParts(alpha, energy, allowed)
        else:
            context, alpha = cn3_attention(query, key, u, h, mask, edge_vecs, edge_type, impl=self.impl,
                                           need_alpha=need_alpha, block_rows=self.block_rows,
                                           edge_weights=self.edge_weights,
                                           energy_form=self.energy_form)  # (B, N, d), (B, H, N, N)
        if need_alpha and not per_head:
            # one head: the (B, N, N) weights themselves, no copy
            alpha = alpha.squeeze(1) if self.energy_heads == 1 else alpha.mean(dim=1)  # (B, N, N)
        # g_i = sigmoid(W_g h_i + b)
        gate = torch.sigmoid(self.lin_gate(h))  # (B, N, d)
        # h'_i = g_i * h~_i + (1 - g_i) * h_i
        h_new = gated_mix(context, h, gate)  # (B, N, d)
        padded = ~mask.unsqueeze(-1)  # (B, N, 1)
        out = h_new.masked_fill(padded, 0.0), alpha if need_alpha else None, gate.masked_fill(padded, 0.0)
        return (*out, graph) if return_graph else out

    def _check(self, v: Tensor | None, edge_type: Tensor | None) -> None:
        if (v is not None) != bool(self.attr_dim):
            raise ValueError(f"layer built with attr_dim={self.attr_dim}; v is "
                             f"{'missing' if v is None else 'unexpected'}")
        if (edge_type is not None) != bool(self.n_edge_types):
            raise ValueError(f"layer built with n_edge_types={self.n_edge_types}; edge_type is "
                             f"{'missing' if edge_type is None else 'unexpected'}")

    def extra_repr(self) -> str:
        heads = f", energy_heads={self.energy_heads}" if self.energy_heads > 1 else ""
        impl = f", impl={self.impl}" if self.impl != "auto" else ""
        weights = f", edge_weights={self.edge_weights}" if self.edge_weights != "softmax" else ""
        form = f", energy_form={self.energy_form}" if self.energy_form != "additive" else ""
        return (f"hidden={self.hidden}, attr_dim={self.attr_dim}, "
                f"n_edge_types={self.n_edge_types}, energy_dim={self.u.numel()}{heads}{impl}{weights}{form}")


def relative_position_types(n: int, clip: int, device: torch.device | str | None = None) -> Tensor:
    """``(N, N)`` long: ``clip(k - i, -C, C) + C`` at ``[i, k]``, in ``[0, 2C]``.

    For ``N = 4``, ``C = 1``: ``[[1, 2, 2, 2], [0, 1, 2, 2], [0, 0, 1, 2], [0, 0, 0, 1]]``.
    """
    index = torch.arange(n, device=device)
    return (index[None, :] - index[:, None]).clamp(-clip, clip) + clip


def combined_edge_types(edge_type: Tensor | None, n: int, clip: int, batch: int,
                        device: torch.device | str | None = None) -> Tensor:
    """Relative position folded into the edge type: ``dep * (2C + 1) + clip(k - i, -C, C) + C``
    (``dep = 0`` everywhere without dependency types). ``(B, N, N)`` long; every pair, padded or
    not, holds a valid type below ``max(T, 1) * (2C + 1)`` when ``edge_type`` is in ``[0, T)``."""
    relative = relative_position_types(n, clip, device)  # (N, N)
    if edge_type is None:
        return relative.expand(batch, n, n)
    return edge_type * (2 * clip + 1) + relative  # (B, N, N)


class DynamicGraphEncoder(nn.Module):
    """``num_layers`` stacked :class:`DynamicGraphLayer` s; each layer sees the same ``v`` and
    edge types and the previous layer's states.

    Args:
        num_layers: ``L``.
        hidden: node state size ``d``.
        relative_positions: ``C > 0`` folds ``clip(k - i, -C, C)`` into the edge type
            (:func:`combined_edge_types`; the layers get ``max(n_edge_types, 1) * (2C + 1)`` types).
            0 = off (the paper).
        parse_loss: ``lambda`` of :func:`~cn3.layers.edge_weights.parse_loss` on the first layer's first
            head (0 = off, the paper); :meth:`regularised` needs the parse's heads when it is on.
        hub_penalty: weight of :func:`~cn3.layers.edge_weights.hub_penalty` on every layer and head (0 = off).
        hub_bound: the column mass (queries' worth of weight) a key may hold before the penalty counts.
        **layer_kwargs: passed to every :class:`DynamicGraphLayer`.

    Shapes:
        returns ``h (B, N, d)``, a list of ``L`` alphas ``(B, N, N)`` (with ``per_head=True``:
        ``(B, H, N, N)``; None with ``need_alpha=False``) and ``L`` gates ``(B, N, d)``.
    """

    def __init__(self, num_layers: int, hidden: int, relative_positions: int = 0, parse_loss: float = 0.0,
                 hub_penalty: float = 0.0, hub_bound: float = HUB_BOUND, **layer_kwargs) -> None:
        super().__init__()
        if relative_positions < 0:
            raise ValueError(f"relative_positions must be >= 0, got {relative_positions}")
        if parse_loss < 0 or hub_penalty < 0 or hub_bound < 0:
            raise ValueError(f"parse_loss, hub_penalty and hub_bound must be >= 0, got {parse_loss}, "
                             f"{hub_penalty}, {hub_bound}")
        self.relative_positions = relative_positions
        self.parse_loss, self.hub_penalty, self.hub_bound = parse_loss, hub_penalty, hub_bound
        self.n_dep_types = layer_kwargs.get("n_edge_types", 0)
        if relative_positions:
            layer_kwargs["n_edge_types"] = max(self.n_dep_types, 1) * (2 * relative_positions + 1)
        self.layers = nn.ModuleList(DynamicGraphLayer(hidden, **layer_kwargs)
                                    for _ in range(num_layers))

    def reset_parameters(self) -> None:
        for layer in self.layers:
            layer.reset_parameters()

    def edge_types(self, h: Tensor, edge_type: Tensor | None) -> Tensor | None:
        """The edge types the layers see: the dependency types, with the relative position folded in."""
        if (edge_type is not None) != bool(self.n_dep_types):
            raise ValueError(f"encoder built with n_edge_types={self.n_dep_types}; edge_type is "
                             f"{'missing' if edge_type is None else 'unexpected'}")
        if not self.relative_positions:
            return edge_type
        return combined_edge_types(edge_type, h.shape[1], self.relative_positions, h.shape[0], h.device)

    def forward(self, h: Tensor, mask: Tensor, v: Tensor | None = None, edge_type: Tensor | None = None,
                per_head: bool = False, need_alpha: bool = True) -> tuple[Tensor, list[Tensor] | None, list[Tensor]]:
        edge_type = self.edge_types(h, edge_type)
        alphas, gates = [], []
        for layer in self.layers:
            h, alpha, gate = layer(h, mask, v, edge_type, per_head=per_head, need_alpha=need_alpha)
            alphas.append(alpha)
            gates.append(gate)
        return h, alphas if need_alpha else None, gates

    @property
    def regularised(self) -> bool:
        """A graph regulariser is on (``parse_loss`` or ``hub_penalty`` above 0)."""
        return self.parse_loss > 0 or self.hub_penalty > 0

    def forward_regularised(self, h: Tensor, mask: Tensor, v: Tensor | None = None, edge_type: Tensor | None = None,
                            parse_heads: Tensor | None = None,
                            per_head: bool = False) -> tuple[Tensor, list[Tensor], list[Tensor], Tensor]:
        """:meth:`forward` plus the graph regularisers' loss
        ``parse_loss * L_parse(layer 1, head 1) + hub_penalty * mean_layers L_hub``.

        Args:
            parse_heads: ``(B, N)`` long, each word's parse head (the word itself for the root, -1 at
                padding; :func:`~cn3.layers.edge_weights.heads_from_edge_types`); needed when
                ``parse_loss > 0``.

        Raises:
            ValueError: ``parse_loss > 0`` without ``parse_heads``.
        """
        if self.parse_loss > 0 and parse_heads is None:
            raise ValueError("parse_loss > 0 needs the parse's heads (a dataset prepared with a parser)")
        edge_type = self.edge_types(h, edge_type)
        alphas, gates, loss = [], [], h.new_zeros(())
        for index, layer in enumerate(self.layers):
            h, alpha, gate, graph = layer(h, mask, v, edge_type, per_head=per_head, return_graph=True)
            alphas.append(alpha)
            gates.append(gate)
            if index == 0 and self.parse_loss > 0:  # every head is a real word: an allowed key
                loss = loss + self.parse_loss * parse_loss(graph.energy[:, 0], graph.allowed[:, 0], parse_heads)
            if self.hub_penalty > 0:
                loss = loss + self.hub_penalty / len(self.layers) * hub_penalty(graph.alpha, mask, self.hub_bound)
        return h, alphas, gates, loss

