"""CN3 (Liu et al., AAAI 2019): a context layer (the local bias: BiLSTM by default, the paper's
CN3_LSTM) then ``layers`` dynamic graph layers that learn each sentence's structure (eq. 1-6, see
:class:`cn3.layers.DynamicGraphLayer`).

The paper's Table 3 variants are settings: ``+POS``/``+char``/``+char+Spell`` feed node attributes
``v`` (built by the node encoder), ``Dep`` (``model.edge_attrs``) feeds the dependency relation and
direction as ``e_ik`` and needs trees. On translation there are no word attributes and no trees:
CN3 runs on the subword states alone (``attr_dim = 0``, no edge attributes).

Beyond the paper, off by default: ``energy_heads`` and ``relative_positions``
(:mod:`cn3.layers.dynamic_graph`), on every task level; how energies become edge weights
(``edge_weights``, ``energy_form``) and the graph regularisers (``parse_loss``, ``hub_penalty``;
:mod:`cn3.layers.edge_weights`).
"""

from __future__ import annotations

from dataclasses import fields

from torch import Tensor, nn

from cn3.config import ConfigError
from cn3.encoders.options import CN3Options, check_cn3_options
from cn3.encoders.registry import EncoderArgs, register
from cn3.layers import DynamicGraphEncoder
from cn3.layers.context import BiLSTMContext, CNNContext
from cn3.layers.edge_weights import heads_from_edge_types


class CN3Encoder(nn.Module):
    """Context layer + ``layers`` CN3 dynamic graph layers.

    Args:
        in_dim: width of ``x``.
        d: output width of the context layer (``d // 2`` per BiLSTM direction); ``context: none``
            keeps ``in_dim``.
        layers: dynamic graph layers.
        attr_dim: node attribute width (0 = none); n_edge_types: arc types (0 = no ``e_ik``).
        context: ``lstm`` (the paper), ``cnn`` or ``none``; context_layers: its depth.
        energy_dim, edge_dim: see :class:`cn3.layers.DynamicGraphLayer`.
        dropout: inside a multi-layer context.
        init_range: every parameter ``U(-r, r)`` (the paper: 0.1).
        energy_heads: energy heads per layer (1 = the paper); must divide ``energy_dim`` and the
            node state width (``d``; ``in_dim`` with ``context: none``).
        relative_positions: clip ``C`` of the relative position edge attribute (0 = off).
        attention_impl: every graph layer's ``impl`` (:class:`cn3.layers.DynamicGraphLayer`).
        edge_weights, energy_form: every graph layer's (:class:`cn3.layers.DynamicGraphLayer`).
        parse_loss, hub_penalty: the graph regularisers (:class:`cn3.layers.DynamicGraphEncoder`);
            while training with either on, ``info["loss"]`` holds their weighted sum.

    Shapes: ``x (B, N, in_dim)``, ``mask (B, N)``, ``v (B, N, attr_dim)``, ``edge_type (B, N, N)`` ->
    ``h (B, N, out_dim)``, ``info = {"alphas": [(B, N, N)] * layers, "gates": [(B, N, out_dim)] * layers}``;
    with ``energy_heads > 1`` the alphas are the mean over the heads, and ``info["head_alphas"]`` holds
    each head's, ``[(B, H, N, N)] * layers``.
    """

    def __init__(self, in_dim: int, d: int, layers: int, attr_dim: int = 0, n_edge_types: int = 0,
                 context: str = "lstm", context_layers: int = 1, energy_dim: int = 100, edge_dim: int = 32,
                 dropout: float = 0.0, init_range: float = 0.1, energy_heads: int = 1,
                 relative_positions: int = 0, attention_impl: str = "auto", edge_weights: str = "softmax",
                 energy_form: str = "additive", parse_loss: float = 0.0, hub_penalty: float = 0.0):
        super().__init__()
        if context == "lstm":
            self.context = BiLSTMContext(in_dim, d // 2, context_layers, dropout)
        elif context == "cnn":
            self.context = CNNContext(in_dim, d // 2, context_layers, dropout=dropout)
        else:
            self.context = None
        hidden = self.context.out_dim if self.context is not None else in_dim
        check_cn3_options(energy_dim, energy_heads, relative_positions)
        if hidden % energy_heads:
            raise ConfigError(f"energy_heads ({energy_heads}) must divide the CN3 node state width ({hidden}; "
                              "sentence tasks: 2 * model.hidden, or the node vector's width with context: none): "
                              "each head attends over width / energy_heads of the states")
        self.energy_heads = energy_heads
        self.graph = DynamicGraphEncoder(num_layers=layers, hidden=hidden, attr_dim=attr_dim,
                                         n_edge_types=n_edge_types, edge_dim=edge_dim, energy_dim=energy_dim,
                                         energy_heads=energy_heads, relative_positions=relative_positions,
                                         impl=attention_impl, edge_weights=edge_weights, energy_form=energy_form,
                                         parse_loss=parse_loss, hub_penalty=hub_penalty)
        self.out_dim, self.attr_dim, self.edge_attrs = hidden, attr_dim, n_edge_types > 0
        self.init_range = init_range
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The paper's init: every weight, bias and embedding ``U(-init_range, init_range)``."""
        for p in self.parameters():
            nn.init.uniform_(p, -self.init_range, self.init_range)

    def forward(self, x: Tensor, mask: Tensor, *, v: Tensor | None = None,
                edge_type: Tensor | None = None) -> tuple[Tensor, dict]:
        h = self.context(x, mask) if self.context is not None else x  # (B, N, d)
        regularise = self.training and self.graph.regularised  # the graph regularisers' loss joins info
        parse_heads = None
        if regularise and self.graph.parse_loss > 0:  # the parse's heads, whether or not edges are attributes
            if edge_type is None:
                raise ConfigError("model.parse_loss > 0 needs dependency trees: prepare the task with an "
                                  "annotator that parses (gold trees, spacy or stanza)")
            parse_heads = heads_from_edge_types(edge_type, mask)  # (B, N)
        v, edge_type = v if self.attr_dim else None, edge_type if self.edge_attrs else None
        per_head = self.energy_heads > 1
        if regularise:
            h, alphas, gates, loss = self.graph.forward_regularised(h, mask, v, edge_type, parse_heads, per_head)
        else:
            (h, alphas, gates), loss = self.graph(h, mask, v, edge_type, per_head=per_head), None
        info = {"alphas": alphas, "gates": gates}
        if per_head:  # [(B, H, N, N)] * L: the heads' mean as alphas, each head's kept
            info = {"alphas": [a.mean(dim=1) for a in alphas], "gates": gates, "head_alphas": alphas}
        if loss is not None:
            info["loss"] = loss
        return h, info


@register("cn3", "Liu et al. 2019 (CN3; variants +POS, +char, +char+Spell, Dep as options; beyond the paper: "
                 "energy_heads, relative_positions, position_dim)",
          uses_attrs=True, paper_uniform_init=True, attention="graph", learns_edges=True, table_order=10,
          options=tuple(f"cn3.{f.name}" for f in fields(CN3Options)))
def _cn3(a: EncoderArgs) -> nn.Module:
    c = a.cn3
    if c.edge_attrs and not a.n_edge_types:
        raise ConfigError("model.edge_attrs (CN3-Dep) needs dependency trees: prepare the task with an annotator "
                          "that parses (gold trees, spacy or stanza)")
    return CN3Encoder(a.in_dim, a.d, a.layers, a.attr_dim, a.n_edge_types if c.edge_attrs else 0, c.context,
                      c.context_layers, c.energy_dim, c.edge_dim, a.dropout, c.init_range, c.energy_heads,
                      c.relative_positions, c.attention_impl, edge_weights=c.edge_weights, energy_form=c.energy_form,
                      parse_loss=c.parse_loss, hub_penalty=c.hub_penalty)
