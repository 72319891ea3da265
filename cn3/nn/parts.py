"""What :class:`~cn3.nn.CN3Conv` shares with :class:`~cn3.nn.DenseCN3Conv`, so that one layer's
``state_dict`` loads into the other and both compute the same function: the same checked arguments,
the same parameters (names and shapes) and the same node-wise steps, taken from the dense layer
(:mod:`cn3.nn.dense_cn3_conv`, where the equations are).

For node ``i`` with input ``x_i`` and a key (neighbour) ``k``, with ``H`` heads of ``C`` channels::

    h_i      = P x_i                                       values and residual, H*C wide
    s^h_ik   = u_h^T tanh(W_q^h x_i + W_k^h x_k + E^h[t_ik] + W_a^h a_ik)
    alpha^h  = softmax_k(s^h_ik)                           over the keys i may attend
    h~_i     = concat_h sum_k alpha^h_ik h_k[slice_h]      slice_h: channels h*C : (h+1)*C
    g_i      = sigmoid(W_g x_i + b_g)
    x'_i     = g_i * h~_i + (1 - g_i) * h_i  (+ bias)
"""

from __future__ import annotations

from cn3.nn.dense_cn3_conv import DenseCN3Conv


class CN3Parts:
    """Mixin for :class:`~cn3.nn.CN3Conv`: the node-wise steps and the reset are the dense layer's own
    methods, run on :class:`~cn3.nn.CN3Conv`'s parameters, which its constructor declares with the dense
    layer's names and shapes (``lin`` ``P`` or None, ``lin_query`` ``W_q``, ``lin_key`` ``W_k``, ``edge_emb``
    ``E (T, e)``, ``lin_edge`` ``W_a``, ``att`` ``u (H, e/H)``, ``lin_gate`` ``W_g, b_g``, ``bias``)."""

    _reset_parts = DenseCN3Conv.reset_parameters
    _node_terms = DenseCN3Conv._node_terms
    _update = DenseCN3Conv._update
    _check_edges = DenseCN3Conv._check_edges
    __repr__ = DenseCN3Conv.__repr__
