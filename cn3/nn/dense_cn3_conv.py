"""The CN3 layer over dense batches of graphs, in the conventions of PyG's ``DenseGATConv``."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from cn3.layers.dynamic_graph import IMPLS, cn3_attention
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
        \tilde{\mathbf{h}}_i = \big\Vert_{h=1}^{H} \sum_{k \in \mathcal{N}(i)} \alpha^h_{ik}\,
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
        bias: add a learned bias to the output.
        project: apply ``P`` (a bias-free linear map ``F -> H*C``); None: only when
            ``in_channels != heads * out_channels``.
        add_self_loops: with ``adj``, let every node attend itself as well (PyG's ``add_loop``).
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
          zero on padded and forbidden keys.
    """

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, edge_types: int = 0,
                 edge_dim: int | None = None, energy_dim: int | None = None, concat: bool = True,
                 gate: bool = True, dropout: float = 0.0, bias: bool = True, project: bool | None = None,
                 add_self_loops: bool = True, impl: str = "auto") -> None:
        super().__init__()
        if impl not in IMPLS:
            raise ValueError(f"impl must be one of {', '.join(IMPLS)}, got {impl!r}")
        self.impl = impl
        self._build(in_channels, out_channels, heads, concat, edge_types, edge_dim, energy_dim, gate, dropout,
                    bias, project, add_self_loops)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot weights and zero biases, as PyG's attention layers."""
        self._reset_parts()

    def forward(self, x: Tensor, mask: Tensor | None = None, adj: Tensor | None = None,
                edge_type: Tensor | None = None, edge_attr: Tensor | None = None,
                return_attention_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """The layer on a batch of graphs (see the class docstring for shapes).

        Raises:
            ValueError: ``edge_type`` / ``edge_attr`` given without ``edge_types`` / ``edge_dim`` or
                missing with them.
        """
        self._check_edges(edge_type, edge_attr)
        single = x.dim() == 2
        if single:  # one graph: a batch of one
            x, mask, adj, edge_type, edge_attr = (None if t is None else t.unsqueeze(0)
                                                  for t in (x, mask, adj, edge_type, edge_attr))
        batch, n = x.shape[:2]
        mask = torch.ones(batch, n, dtype=torch.bool, device=x.device) if mask is None else mask.bool()  # (B, N)
        keys = None
        if adj is not None:
            keys = (adj != 0).expand(batch, n, n)  # (B, N, N)
            if self.add_self_loops:
                keys = keys | torch.eye(n, dtype=torch.bool, device=x.device)
        query, key, values = self._node_terms(x)  # (B, N, e), (B, N, e), (B, N, H*C)
        edge_vecs = None if edge_type is None else self.edge_emb.weight  # (T, e)  E_t
        pair_vecs = None if edge_attr is None else self.lin_edge(edge_attr)  # (B, N, N, e)  W_a a_ik
        message, alpha = cn3_attention(query, key, self.att, values, mask, edge_vecs, edge_type, pair_vecs, keys,
                                       impl=self.impl, need_alpha=return_attention_weights)  # (B,N,H*C), (B,H,N,N)
        out = self._update(x, values, message)  # (B, N, H*C) or (B, N, C)
        out = out.masked_fill(~mask.unsqueeze(-1), 0.0)  # padded nodes: zero
        if single:
            out, alpha = out.squeeze(0), None if alpha is None else alpha.squeeze(0)
        return (out, alpha) if return_attention_weights else out
