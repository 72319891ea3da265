"""The CN3 layer over dense batches of graphs, in the conventions of PyG's ``DenseGATConv``."""

from __future__ import annotations

import warnings

import torch
from torch import Tensor, nn

from cn3.layers.dynamic_graph import IMPLS, cn3_attention
from cn3.layers.edge_weights import graph_attention
from cn3.nn.parts import CN3Parts


class DenseCN3Conv(CN3Parts, nn.Module):
    r"""The CN3 layer (Liu et al., "Contextualized Non-local Neural Networks for Sequence Learning",
    AAAI 2019) on dense batches: every node learns a soft graph over the nodes it may attend, takes
    their weighted sum and gates its update.

    .. math::
        s^h_{ik} = \mathbf{u}_h^\top \tanh\left(\mathbf{W}_q^h \mathbf{x}_i + \mathbf{W}_k^h \mathbf{x}_k
            + \mathbf{E}^h_{t_{ik}} + \mathbf{W}_a^h \mathbf{a}_{ik}\right),\qquad
        \alpha^h_{ik} = \frac{\exp s^h_{ik}}{\sum_{k' \in \mathcal{N}(i)} \exp s^h_{ik'}}

    .. math::
        \tilde{\mathbf{h}}_i = \Vert_{h=1}^{H} \sum_{k \in \mathcal{N}(i)} \alpha^h_{ik}\,
            \mathbf{h}_k^{(h)},\qquad
        \mathbf{g}_i = \sigma(\mathbf{W}_g \mathbf{x}_i + \mathbf{b}_g),\qquad
        \mathbf{x}'_i = \mathbf{g}_i \odot \tilde{\mathbf{h}}_i + (1 - \mathbf{g}_i) \odot \mathbf{h}_i

    with ``h = P x`` (``P`` the identity when ``in_channels == heads * out_channels``, the paper's
    layer), ``h^(h)`` the ``h``-th slice of ``C = out_channels`` channels, ``E_t`` a learned vector per
    edge type and ``W_a a_ik`` the projected edge features. ``N(i)``: every real node (itself included)
    without ``adj``; the nodes ``k`` with ``adj[i, k] != 0`` with it (and ``i`` itself when
    ``add_self_loops``). A node with no key gets a zero message: ``x'_i = (1 - g_i) h_i``.

    The score is additive and vector-valued (GATv2's family), and the layer never builds the
    ``(B, N, N, e)`` tensor of ``tanh`` arguments at once: on CPU it walks blocks of query rows
    (:func:`cn3.layers.blockwise_energy.additive_attention`), on CUDA it runs the fused Triton kernel
    (:mod:`cn3.layers.fused_energy`) exactly as the sentence models do (:func:`cn3.layers.dynamic_graph.
    choose_impl`). The kernel takes neither ``adj`` nor ``edge_attr``: with either, CUDA runs the dense
    PyTorch path, and ``edge_attr`` costs one ``(B, N, N, e)`` tensor of projected features.

    Args:
        in_channels: input features ``F``.
        out_channels: channels ``C`` per head.
        heads: attention heads ``H``; each attends over its own ``C``-channel slice of ``h``.
        edge_types: number ``T`` of categorical edge types (``edge_type`` in ``[0, T)``); 0 = none.
        edge_dim: size of the float edge features ``edge_attr``; None = none.
        energy_dim: rows ``e`` of the energy's ``tanh`` layer (the main cost, ``O(B N^2 e)``);
            default ``heads * out_channels``; a multiple of ``heads``.
        concat: True: the heads' outputs concatenated, ``H*C`` channels; False: their mean, ``C``.
        gate: True: the gated update above; False: ``x'_i = h~_i`` (message only, no residual).
        dropout: dropout on the message ``h~`` while training (not on ``alpha`` as in GAT: the fused
            kernel never materialises a differentiable ``alpha``).
        edge_weights: how scores become weights, one of :data:`cn3.layers.edge_weights.EDGE_WEIGHTS`:
            ``softmax`` (the paper, above), ``sparsemax``, ``entmax15`` or ``tree`` (marginals over
            dependency trees; only over the complete graph: ``adj=None`` or a complete ``adj``).
        energy_form: ``additive`` (the paper) or ``centered`` (each key's mean score over its queries
            removed); anything but ``softmax`` + ``additive`` runs
            :func:`cn3.layers.edge_weights.graph_attention` on every device.
        bias: add a learned bias to the output.
        project: apply ``P`` (a bias-free linear map ``F -> H*C``); None: only when
            ``in_channels != heads * out_channels``.
        add_self_loops: with ``adj``, let every node attend itself as well; ``forward``'s ``add_loop``
            overrides it per call, as in PyG's ``DenseGATConv``.
        impl: the attention path, one of ``auto``, ``blockwise``, ``dense``, ``fused``
            (:func:`cn3.layers.dynamic_graph.choose_impl`); an attribute, so it may be changed later.

    Raises:
        ValueError: an argument out of range, or ``project=False`` with ``in_channels != H*C``.

    Shapes:
        - **input:** ``x (B, N, F)`` or ``(N, F)`` (one graph); ``mask (B, N)`` bool, True at real
          nodes; ``adj (B, N, N)`` or ``(N, N)``, nonzero where ``i`` may attend ``k``;
          ``edge_type (B, N, N)`` long; ``edge_attr (B, N, N, edge_dim)`` (batch axes dropped for a
          2-D ``x``)
        - **output:** ``(B, N, H*C)`` (``(B, N, C)`` without ``concat``), zero at padded nodes;
          with ``return_attention_weights``, also ``alpha (B, H, N, N)`` (``(H, N, N)`` for a 2-D ``x``),
          zero on padded and forbidden keys, differentiable whenever autograd records (see ``forward``).
    """

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, edge_types: int = 0,
                 edge_dim: int | None = None, energy_dim: int | None = None, concat: bool = True,
                 gate: bool = True, dropout: float = 0.0, bias: bool = True, project: bool | None = None,
                 add_self_loops: bool = True, impl: str = "auto", edge_weights: str = "softmax",
                 energy_form: str = "additive") -> None:
        super().__init__()
        if impl not in IMPLS:
            raise ValueError(f"impl must be one of {', '.join(IMPLS)}, got {impl!r}")
        self.impl = impl
        self._build(in_channels, out_channels, heads, concat, edge_types, edge_dim, energy_dim, gate, dropout,
                    bias, project, add_self_loops, edge_weights, energy_form)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot weights and zero biases, as PyG's attention layers."""
        self._reset_parts()

    def forward(self, x: Tensor, adj: Tensor | None = None, mask: Tensor | None = None,
                add_loop: bool | None = None, *, edge_type: Tensor | None = None, edge_attr: Tensor | None = None,
                return_attention_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """The layer on a batch of graphs, in ``DenseGATConv``'s argument order (shapes: the class docstring).

        Args:
            x: ``(B, N, F)`` or ``(N, F)``.
            adj: ``(B, N, N)`` or ``(N, N)`` (broadcast over the batch), nonzero where ``i`` may attend ``k``;
                None: every real node.
            mask: ``(B, N)`` bool, True at real nodes; None: all real.
            add_loop: let every node attend itself as well; None: the constructor's ``add_self_loops``.
            edge_type, edge_attr: ``(B, N, N)`` long, ``(B, N, N, edge_dim)``.
            return_attention_weights: also return ``alpha``. With autograd recording and an input or
                parameter that needs a gradient, the weights come from
                :func:`cn3.layers.edge_weights.graph_attention`, differentiable, at the cost of the whole
                ``(B, H, N, N)`` energy and its graph in memory (the default path walks blocks of rows
                and keeps neither).

        Raises:
            ValueError: a shape that does not match (the message names the expected one); the old order
                ``(x, mask, adj)`` where it cannot be told apart; ``edge_type`` / ``edge_attr`` given
                without ``edge_types`` / ``edge_dim`` or missing with them; ``edge_weights="tree"`` with an
                ``adj`` that is not complete.
        """
        adj, mask = self._legacy_order(x, adj, mask, add_loop)
        self._check_edges(edge_type, edge_attr)
        single = x.dim() == 2
        if single:  # one graph: a batch of one
            x, mask, adj, edge_type, edge_attr = (None if t is None else t.unsqueeze(0)
                                                  for t in (x, mask, adj, edge_type, edge_attr))
        batch, n = x.shape[:2]
        mask = torch.ones(batch, n, dtype=torch.bool, device=x.device) if mask is None else mask.bool()  # (B, N)
        keys = self._keys(adj, mask, self.add_self_loops if add_loop is None else add_loop)  # (B, N, N) or None
        query, key, values, gate = self._node_terms(x)  # (B, N, e), (B, N, e), (B, N, H*C), (B, N, H*C)
        edge_vecs = None if edge_type is None else self.edge_emb.weight  # (T, e)  E_t
        pair_vecs = None if edge_attr is None else self.lin_edge(edge_attr)  # (B, N, N, e)  W_a a_ik
        if return_attention_weights and torch.is_grad_enabled() and self._needs_graph(x, pair_vecs):
            message, alpha = self._graph_attention(query, key, values, mask, edge_vecs, edge_type, pair_vecs, keys)
        else:
            message, alpha = cn3_attention(query, key, self.att, values, mask, edge_vecs, edge_type, pair_vecs, keys,
                                           impl=self.impl, need_alpha=return_attention_weights,
                                           edge_weights=self.edge_weights,
                                           energy_form=self.energy_form)  # (B, N, H*C), (B, H, N, N)
        out = self._update(gate, values, message)  # (B, N, H*C) or (B, N, C)
        out = out.masked_fill(~mask.unsqueeze(-1), 0.0)  # padded nodes: zero
        if single:
            out, alpha = out.squeeze(0), None if alpha is None else alpha.squeeze(0)
        return (out, alpha) if return_attention_weights else out

    def _legacy_order(self, x: Tensor, adj: Tensor | None, mask: Tensor | None,
                      add_loop: object) -> tuple[Tensor | None, Tensor | None]:
        """Checks the shapes of ``x``, ``adj`` and ``mask``; the old positional order ``(x, mask, adj)``
        (a bool ``(B, N)`` second argument) is recognised, warned about and swapped back. With ``B == N``
        and no third argument, a bool ``(N, N)`` second argument is read as ``adj`` (the current order).

        Raises:
            ValueError: a shape that fits neither order, naming the expected ones.
        """
        if x.dim() not in (2, 3):
            raise ValueError(f"x must be (B, N, F) or (N, F), got {tuple(x.shape)}")
        lead = tuple(x.shape[:-1])  # (B, N) or (N,)
        n = x.shape[-2]
        if self.in_channels != -1 and x.shape[-1] != self.in_channels:
            raise ValueError(f"x has {x.shape[-1]} features, the layer was built with in_channels={self.in_channels}")
        if isinstance(add_loop, Tensor):
            raise ValueError("edge_type and edge_attr are keyword-only (forward(x, adj, mask, add_loop, *, "
                             "edge_type=..., edge_attr=...)); a tensor came as add_loop")
        if adj is not None and adj.dtype == torch.bool and tuple(adj.shape) == lead and (
                mask.dim() == adj.dim() + 1 if mask is not None else tuple(adj.shape) != (n, n)):
            warnings.warn("DenseCN3Conv.forward takes (x, adj, mask) as DenseGATConv does; a bool "
                          f"{tuple(adj.shape)} second argument was read as the mask of the old order "
                          "(x, mask, adj): pass mask= by keyword", FutureWarning, stacklevel=3)
            adj, mask = mask, adj
        expected_adj = f"({n}, {n})" if x.dim() == 2 else f"({x.shape[0]}, {n}, {n}) or ({n}, {n})"
        if adj is not None and tuple(adj.shape) not in ((n, n), (*lead[:-1], n, n)):
            raise ValueError(f"adj must be {expected_adj} for x of shape {tuple(x.shape)}, got "
                             f"{tuple(adj.shape)} (the order is (x, adj, mask), as DenseGATConv's)")
        if mask is not None and tuple(mask.shape) != lead:
            raise ValueError(f"mask must be {lead} (True at real nodes) for x of shape {tuple(x.shape)}, "
                             f"got {tuple(mask.shape)} (the order is (x, adj, mask), as DenseGATConv's)")
        return adj, mask

    def _keys(self, adj: Tensor | None, mask: Tensor, add_loop: bool) -> Tensor | None:
        """``(B, N, N)`` bool: the keys each node may attend (None: every real node).

        Raises:
            ValueError: ``edge_weights="tree"`` and ``adj`` leaves out a pair of real nodes.
        """
        if adj is None:
            return None
        batch, n = mask.shape
        keys = (adj != 0).expand(batch, n, n)  # (B, N, N)
        if add_loop:
            keys = keys | torch.eye(n, dtype=torch.bool, device=adj.device)
        if self.edge_weights == "tree":
            pairs = mask[:, :, None] & mask[:, None, :]  # (B, N, N) real query, real key
            if not torch.compiler.is_compiling() and bool((pairs & ~keys).any()):
                raise ValueError("edge_weights='tree' takes the complete graph over the real nodes: the "
                                 "marginals over dependency trees need every arc (and the diagonal, the root); "
                                 "pass adj=None or a complete adj with add_loop")
        return keys

    def _needs_graph(self, x: Tensor, pair_vecs: Tensor | None) -> bool:
        """Whether the returned weights should carry autograd's graph: an input or a parameter needs it."""
        return x.requires_grad or (pair_vecs is not None and pair_vecs.requires_grad) or any(
            p.requires_grad for p in self.parameters())

    def _graph_attention(self, query: Tensor, key: Tensor, values: Tensor, mask: Tensor, edge_vecs: Tensor | None,
                         edge_type: Tensor | None, pair_vecs: Tensor | None,
                         keys: Tensor | None) -> tuple[Tensor, Tensor]:
        """:func:`~cn3.layers.edge_weights.graph_attention`: the same function, differentiable weights.
        Per-pair features become a table of ``B N N`` "edge types" (one per pair)."""
        if pair_vecs is not None:
            batch, n = mask.shape
            table = pair_vecs.reshape(-1, pair_vecs.shape[-1])  # (B N N, e)
            if edge_vecs is not None:
                table = table + edge_vecs[edge_type.reshape(-1)]  # + E[t_ik]
            edge_vecs = table
            edge_type = torch.arange(batch * n * n, device=mask.device).view(batch, n, n)  # (B, N, N)
        out, alpha, _, _ = graph_attention(query, key, self.att, values, mask, edge_vecs, edge_type, keys,
                                           self.edge_weights, self.energy_form)  # (B, N, H*C), (B, H, N, N)
        return out, alpha
