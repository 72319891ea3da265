"""The CN3 layer over dense batches of graphs, in the conventions of PyG's ``DenseGATConv``.

The layer reads in two files: this one (parameters, node projections, masks, gated update) and
:mod:`cn3.layers.dynamic_graph` (:func:`~cn3.layers.dynamic_graph.cn3_attention`: energy, edge weights
and messages), which the sentence models run as well.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn.dense.linear import Linear
from torch_geometric.nn.inits import glorot, zeros

from cn3.layers.dynamic_graph import IMPLS, cn3_attention, pair_table
from cn3.layers.edge_weights import EDGE_WEIGHTS, ENERGY_FORMS, graph_attention


def check_arguments(*, in_channels: int, out_channels: int, heads: int, edge_types: int, edge_dim: int | None,
                    energy_dim: int | None, dropout: float, project: bool | None, edge_weights: str,
                    energy_form: str) -> tuple[int, bool]:
    """The CN3 layers' constructor arguments checked (:class:`DenseCN3Conv`'s Args), and the two that
    have defaults resolved: ``energy_dim`` (``heads * out_channels``) and ``project`` (whether ``P`` exists).

    Raises:
        ValueError: an argument out of range, or ``project=False`` with ``in_channels != heads * out_channels``.
    """
    width = heads * out_channels  # H*C
    energy_dim = width if energy_dim is None else energy_dim
    if edge_weights not in EDGE_WEIGHTS or energy_form not in ENERGY_FORMS:
        raise ValueError(f"edge_weights must be one of {', '.join(EDGE_WEIGHTS)} and energy_form one of "
                         f"{', '.join(ENERGY_FORMS)}, got {edge_weights!r}, {energy_form!r}")
    if min(out_channels, heads) < 1 or (in_channels < 1 and in_channels != -1):
        raise ValueError(f"in_channels (or -1, lazy), out_channels and heads must be >= 1, got {in_channels}, "
                         f"{out_channels}, {heads}")
    if energy_dim < heads or energy_dim % heads:
        raise ValueError(f"energy_dim={energy_dim} must be a positive multiple of heads={heads}")
    if edge_types < 0 or (edge_dim is not None and edge_dim < 1):
        raise ValueError(f"edge_types must be >= 0 and edge_dim None or >= 1, got {edge_types}, {edge_dim}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")
    project = in_channels != width if project is None else project
    if not project and in_channels != width:  # a lazy layer (-1) always projects
        raise ValueError(f"project=False needs in_channels == heads * out_channels, got {in_channels} != {width}")
    return energy_dim, project


def declare_parameters(module: nn.Module, *, in_channels: int, out_channels: int, heads: int, edge_types: int,
                       edge_dim: int | None, energy_dim: int | None, concat: bool, gate: bool, dropout: float,
                       bias: bool, project: bool | None, add_self_loops: bool, edge_weights: str,
                       energy_form: str) -> None:
    """Checks the arguments (:func:`check_arguments`) and declares CN3's parameters on ``module``, the same
    names and shapes for :class:`DenseCN3Conv` and :class:`~cn3.nn.CN3Conv` (one ``state_dict`` loads into
    either): ``lin`` ``P`` or None, ``lin_query`` ``W_q``, ``lin_key`` ``W_k``, ``edge_emb`` ``E (T, e)``,
    ``lin_edge`` ``W_a``, ``att`` ``u (H, e/H)``, ``lin_gate`` ``W_g, b_g``, ``bias``.

    Raises:
        ValueError: as :func:`check_arguments`.
    """
    energy_dim, project = check_arguments(
        in_channels=in_channels, out_channels=out_channels, heads=heads, edge_types=edge_types,
        edge_dim=edge_dim, energy_dim=energy_dim, dropout=dropout, project=project, edge_weights=edge_weights,
        energy_form=energy_form)
    module.in_channels, module.out_channels, module.heads, module.concat = in_channels, out_channels, heads, concat
    module.edge_types, module.edge_dim, module.energy_dim = edge_types, edge_dim, energy_dim
    module.dropout, module.add_self_loops = dropout, add_self_loops
    module.edge_weights, module.energy_form = edge_weights, energy_form
    width = heads * out_channels  # H*C
    # in_channels=-1: lazy, the input projections take their width at the first call (PyG's convention)
    module.lin = Linear(in_channels, width, bias=False, weight_initializer="glorot") if project else None  # P
    module.lin_query = Linear(in_channels, energy_dim, bias=False, weight_initializer="glorot")  # W_q
    module.lin_key = Linear(in_channels, energy_dim, bias=False, weight_initializer="glorot")  # W_k
    module.edge_emb = nn.Embedding(edge_types, energy_dim) if edge_types else None  # E: (T, e)
    module.lin_edge = (Linear(edge_dim, energy_dim, bias=False, weight_initializer="glorot")
                       if edge_dim else None)  # W_a
    module.att = nn.Parameter(torch.empty(heads, energy_dim // heads))  # u: (H, e/H), row h is u_h
    module.lin_gate = Linear(in_channels, width, bias=True, weight_initializer="glorot") if gate else None  # W_g, b_g
    module.bias = nn.Parameter(torch.empty(width if concat else out_channels)) if bias else None


class DenseCN3Conv(nn.Module):
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
    ``(B, N, N, e)`` tensor of ``tanh`` arguments at once: on CPU it walks blocks of query rows, head
    by head (:class:`cn3.layers.dynamic_graph.BlockwiseAdditiveAttention`), on CUDA it runs the fused
    Triton kernel (:mod:`cn3.layers.fused_energy`) exactly as the sentence models do
    (:func:`cn3.layers.dynamic_graph.choose_impl`). The kernel takes neither ``adj`` nor ``edge_attr``:
    with either, CUDA runs the dense PyTorch path, and ``edge_attr`` costs one ``(B, N, N, e)`` tensor of
    projected features.

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
        declare_parameters(self, in_channels=in_channels, out_channels=out_channels, heads=heads,
                           edge_types=edge_types, edge_dim=edge_dim, energy_dim=energy_dim, concat=concat, gate=gate,
                           dropout=dropout, bias=bias, project=project, add_self_loops=add_self_loops,
                           edge_weights=edge_weights, energy_form=energy_form)
        self.impl = impl
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot for every weight, ``u`` and the edge-type table; zeros for the biases (PyG's attention layers)."""
        for lin in (self.lin, self.lin_query, self.lin_key, self.lin_edge, self.lin_gate):
            if lin is not None:
                lin.reset_parameters()
        if self.edge_emb is not None:
            glorot(self.edge_emb.weight)
        glorot(self.att)
        zeros(self.bias)

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
        # s^h_ik = u_h^T tanh(W_q^h x_i + W_k^h x_k + E^h_t + W_a^h a_ik);  alpha^h_ik = softmax_k(s^h_ik);
        # h~_i = concat_h sum_k alpha^h_ik h_k^(h)
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

    def _node_terms(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """``(W_q x, W_k x, P x, W_g x + b_g)``: ``(..., e)``, ``(..., e)``, ``(..., H*C)``, ``(..., H*C)``
        (None without the gate), as one matrix product over the stacked weights: one pass over ``x``
        forward and backward instead of four (a lazy layer's first call runs them one by one)."""
        linears = [self.lin_query, self.lin_key, self.lin, self.lin_gate]
        present = [lin for lin in linears if lin is not None]
        if any(isinstance(lin.weight, nn.parameter.UninitializedParameter) for lin in present):
            outs = [lin(x) for lin in present]  # materialises the lazy weights
        else:
            stacked = torch.cat([lin.weight for lin in present])  # (2e + [H*C] + [H*C], F)
            outs = list(torch.matmul(x, stacked.T).split([lin.weight.shape[0] for lin in present], dim=-1))
        query, key = outs[0], outs[1]  # (..., e), (..., e)  W_q x_i, W_k x_k
        values = x if self.lin is None else outs[2]  # (..., H*C)  h = P x
        gate = None if self.lin_gate is None else outs[-1] + self.lin_gate.bias  # (..., H*C)  W_g x + b_g
        return query, key, values, gate

    def _update(self, gate: Tensor | None, values: Tensor, message: Tensor) -> Tensor:
        """The gated update, the heads' combination and the bias: ``W_g x + b_g`` (None without the
        gate), ``(..., H*C)``, ``(..., H*C)`` -> ``(..., H*C)`` (``concat``) or ``(..., C)`` (the heads' mean)."""
        message = F.dropout(message, self.dropout, self.training)  # (..., H*C)  h~ (dropout on the message)
        if gate is None:
            out = message  # (..., H*C)  x' = h~
        else:
            gate = torch.sigmoid(gate)  # (..., H*C)  g = sigmoid(W_g x + b_g)
            out = gate * message + (1.0 - gate) * values  # (..., H*C)  x' = g h~ + (1 - g) h
        if not self.concat:
            out = out.unflatten(-1, (self.heads, self.out_channels)).mean(dim=-2)  # (..., C)  mean over heads
        return out if self.bias is None else out + self.bias

    def _check_edges(self, edge_type: Tensor | None, edge_attr: Tensor | None) -> None:
        """Raises ``ValueError`` when ``edge_type`` / ``edge_attr`` do not match ``edge_types`` / ``edge_dim``."""
        if (edge_type is not None) != bool(self.edge_types):
            raise ValueError(f"layer built with edge_types={self.edge_types}; edge_type is "
                             f"{'missing' if edge_type is None else 'unexpected'}")
        if (edge_attr is not None) != (self.edge_dim is not None):
            raise ValueError(f"layer built with edge_dim={self.edge_dim}; edge_attr is "
                             f"{'missing' if edge_attr is None else 'unexpected'}")

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
            edge_vecs, edge_type = pair_table(pair_vecs, edge_vecs, edge_type)  # (B N N, e), (B, N, N)
        out, alpha, _, _ = graph_attention(query, key, self.att, values, mask, edge_vecs, edge_type, keys,
                                           self.edge_weights, self.energy_form)  # (B, N, H*C), (B, H, N, N)
        return out, alpha

    def __repr__(self) -> str:
        weights = f", edge_weights={self.edge_weights}" if self.edge_weights != "softmax" else ""
        form = f", energy_form={self.energy_form}" if self.energy_form != "additive" else ""
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, heads={self.heads}{weights}{form})"
