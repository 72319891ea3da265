"""How CN3's energies become edge weights: the normaliser, the energy's form, and the graph's
regularisers, for the options beyond the paper's softmax.

For a sentence of ``n`` words and one head, ``s`` is the ``(n, n)`` energy matrix (row ``i`` the query
word, column ``k`` the key word, ``s_ik = u^T tanh(W [h_k, h_i, v_i, v_k, e_ik])``). Then::

    centered:  s_ik <- s_ik - mean_i' s_i'k           the key's static term c_k removed
    softmax:   alpha_i = softmax(s_i)                   the paper
    sparsemax: alpha_i = sparsemax(s_i)                 Martins & Astudillo 2016 (``entmax`` package)
    entmax15:  alpha_i = 1.5-entmax(s_i)                Peters et al. 2019 (``entmax`` package)
    tree:      alpha_ik = P(head(i) = k), alpha_ii = P(i is the root)
               under P(tree) ∝ prod_{k -> i in tree} exp(s_ik) * exp(s_rr) (r the root word),
               the marginals of the distribution over non-projective dependency trees with one
               root (the matrix-tree theorem; Koo et al. 2007, Liu & Lapata 2018)

Every row sums to 1 over its allowed keys (for ``tree`` the root's share sits on the diagonal: the
word's own state is its message, as a root has no head). Padded queries get all-zero rows, padded
keys zero weight.

Regularisers (added to the training loss by :class:`cn3.encoders.cn3_encoder.CN3Encoder`):

* :func:`parse_loss`: the cross-entropy of the rows of ``log_softmax(s)`` against the parse's heads
  (the root's target is the diagonal), one head of the first graph layer (LISA, Strubell et al. 2018);
* :func:`hub_penalty`: ``mean_k relu(sum_i alpha_ik - bound)``, the column mass each key holds beyond
  ``bound`` queries, so one word cannot be every word's neighbour.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from cn3.layers.attention import masked_softmax

#: ``model.edge_weights``: the map from energies to edge weights (``softmax`` = the paper).
EDGE_WEIGHTS = ("softmax", "sparsemax", "entmax15", "tree")
#: ``model.energy_form``: ``additive`` (the paper) or ``centered`` (each key's mean over the queries removed).
ENERGY_FORMS = ("additive", "centered")
#: The column mass (queries' worth of weight) a key may hold before the hub penalty counts it: a word of a
#: dependency tree heads one word on average, and a head with two dependents is not a hub.
HUB_BOUND = 2.0
#: Energy given to forbidden keys before a sparse normaliser: far below any reachable energy
#: (``|s| <= ||u||_1``), finite so that the normalisers' sorts and cumulative sums stay finite.
_FORBIDDEN = -1.0e6


class GraphParts(NamedTuple):
    """One graph layer's differentiable graph, for the regularisers: ``alpha`` and ``energy``
    ``(B, H, N, N)``, ``allowed`` ``(B, 1, N, N)`` bool (real query and key)."""

    alpha: Tensor
    energy: Tensor
    allowed: Tensor


def center_energy(energy: Tensor, allowed: Tensor) -> Tensor:
    """``s_ik - mean_{i: allowed_ik} s_ik``: each key's mean energy over the queries that may read it removed.

    Args:
        energy: ``(B, H, N, N)``.
        allowed: ``(B, 1, N, N)`` or ``(B, H, N, N)`` bool, True where query ``i`` (a real word) may
            attend key ``k``.
    """
    weight = allowed.to(energy.dtype)  # (B, 1|H, N, N)
    count = weight.sum(dim=-2, keepdim=True).clamp(min=1.0)  # (B, 1|H, 1, N)
    column_mean = (energy * weight).sum(dim=-2, keepdim=True) / count  # (B, H, 1, N)  c_k
    return energy - column_mean


def normalise(energy: Tensor, allowed: Tensor, edge_weights: str) -> Tensor:
    """The edge weights ``alpha (B, H, N, N)`` of ``energy (B, H, N, N)`` over the ``allowed`` keys
    (``(B, 1|H, N, N)`` bool, all False in a padded query's row). Differentiable.

    Raises:
        ValueError: ``edge_weights`` is not one of :data:`EDGE_WEIGHTS`.
    """
    if edge_weights == "softmax":  # the project's masked softmax: a row with no allowed key is all zero
        return masked_softmax(energy, key_mask=allowed)
    if edge_weights in ("sparsemax", "entmax15"):
        import entmax  # the maintained implementation, with its exact (sort-based) thresholds

        fn = entmax.sparsemax if edge_weights == "sparsemax" else entmax.entmax15
        acc = torch.promote_types(energy.dtype, torch.float32)  # bf16 energies: thresholds in fp32
        weights = fn(energy.to(acc).masked_fill(~allowed, _FORBIDDEN), dim=-1).to(energy.dtype)
        return weights * allowed  # exact zeros on forbidden keys and padded rows
    if edge_weights == "tree":
        return tree_marginals(energy, allowed)
    raise ValueError(f"edge_weights must be one of {', '.join(EDGE_WEIGHTS)}, got {edge_weights!r}")


def tree_marginals(energy: Tensor, allowed: Tensor) -> Tensor:
    """Arc marginals of the single-root non-projective dependency tree distribution whose arc score for
    head ``k`` of word ``i`` is ``s_ik`` (``k != i``) and whose root score of ``i`` is ``s_ii``.

    Koo et al. (2007): with ``A_ki = exp(s_ik)`` (head ``k``, dependent ``i``), ``r_i = exp(s_ii)``, the
    Laplacian ``L_ii = sum_{k != i} A_ki``, ``L_ki = -A_ki``, and ``L^`` its copy whose row ``f`` (the
    first real word) is replaced by ``r``, ``Z = det L^`` and::

        P(k -> i) = A_ki ([L^-1]_ii [i != f] - [L^-1]_ik [k != f])
        P(root -> i) = r_i [L^-1]_if

    Computed in float64 on the energies less their per-sentence maximum (every tree has ``n`` scores,
    so the shift cancels); padded words are identity rows of ``L^``. Gradients flow through the
    inverse (autograd), which is the exact derivative of the marginals.

    Args:
        energy: ``(B, H, N, N)``.
        allowed: ``(B, 1|H, N, N)`` bool; a padded word's row and column all False. A word must
            reach a spanning tree through the allowed pairs (complete graphs always do).

    Shapes:
        returns ``(B, H, N, N)`` in ``energy``'s dtype; row ``i`` sums to 1 (diagonal: root), 0 for padding.
    """
    allowed = allowed.expand_as(energy)
    real = allowed.any(dim=-1) | allowed.any(dim=-2)  # (B, H, N) words of the sentence
    s = energy.double()
    # (B, H, 1, 1): the largest allowed energy (finite for an empty sentence), so exp(s - shift) <= 1
    shift = s.masked_fill(~allowed, float("-inf")).flatten(-2).amax(dim=-1).clamp(min=-1e300)[..., None, None]
    weights = (s - shift).clamp(min=-700.0).masked_fill(~allowed, float("-inf")).exp()  # [i, k]: exp(s_ik), 0 forbidden
    eye = torch.eye(energy.shape[-1], dtype=torch.bool, device=energy.device)
    root = weights.diagonal(dim1=-2, dim2=-1)  # (B, H, N)  r_i
    arcs = weights.masked_fill(eye, 0.0).transpose(-1, -2)  # (B, H, N, N) [k, i]: A_ki
    laplacian = torch.diag_embed(arcs.sum(dim=-2)) - arcs  # (B, H, N, N)
    first = real.to(torch.int64).argmax(dim=-1)  # (B, H) f: the first real word
    is_first = torch.nn.functional.one_hot(first, energy.shape[-1]).bool() & real  # (B, H, N)
    laplacian = torch.where(is_first[..., :, None], root[..., None, :], laplacian)  # row f <- r
    pad = ~real  # padded words: identity rows and columns
    laplacian = laplacian.masked_fill(pad[..., :, None] | pad[..., None, :], 0.0)
    laplacian = laplacian + torch.diag_embed(pad.double())
    inverse = torch.linalg.inv(laplacian)  # (B, H, N, N)
    inv_diag = inverse.diagonal(dim1=-2, dim2=-1)  # (B, H, N)  [L^-1]_ii
    not_first = (~is_first).double()  # (B, H, N)
    # arc marginal of head k for word i, as [i, k]: A_ki ([L^-1]_ii [i != f] - [L^-1]_ik [k != f])
    arc_part = inv_diag[..., :, None] * not_first[..., :, None] - inverse * not_first[..., None, :]
    marginals = arcs.transpose(-1, -2) * arc_part  # (B, H, N, N)
    root_part = root * inverse.gather(-1, first[..., None, None].expand(*first.shape, energy.shape[-1], 1)).squeeze(-1)
    marginals = marginals + torch.diag_embed(root_part)  # P(root -> i) on the diagonal
    return (marginals * allowed).to(energy.dtype)


def parse_loss(energy: Tensor, allowed: Tensor, heads: Tensor) -> Tensor:
    """The mean over real words of ``-log softmax(s_i)[head(i)]``, the root's target its own diagonal.

    Args:
        energy: ``(B, N, N)`` one head's energies.
        allowed: ``(B, N, N)`` bool.
        heads: ``(B, N)`` long, each word's parse head (0-based, the word itself for the root), ``-1``
            at padding and where the head is not an allowed key.
    """
    log_weights = torch.log_softmax(energy.masked_fill(~allowed, float("-inf")), dim=-1)  # (B, N, N)
    target = heads.clamp(min=0)  # (B, N)
    picked = log_weights.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, N)
    valid = heads >= 0
    return -(picked.masked_fill(~valid, 0.0).sum() / valid.sum().clamp(min=1))


def hub_penalty(alpha: Tensor, mask: Tensor, bound: float) -> Tensor:
    """``mean_{b, h, k real} relu(sum_i alpha_ik - bound)``: how many queries' worth of weight each key
    holds beyond ``bound``.

    Args:
        alpha: ``(B, H, N, N)``; mask: ``(B, N)`` bool, True at real words.
    """
    column_mass = alpha.sum(dim=-2)  # (B, H, N)  sum_i alpha_ik
    excess = torch.relu(column_mass - bound) * mask.unsqueeze(1)  # (B, H, N)
    return excess.sum() / (mask.sum().clamp(min=1) * alpha.shape[1])


def heads_from_edge_types(edge_type: Tensor, mask: Tensor) -> Tensor:
    """Each word's parse head from the dependency edge types of :mod:`data_prep.graphs` (an odd type
    on ``(i, head(i))``, the root's on ``(i, i)``): ``(B, N)`` long, the word itself for the root,
    ``-1`` at padding and for a word with no up-arc."""
    up = (edge_type % 2 == 1) & mask.unsqueeze(1) & mask.unsqueeze(-1)  # (B, N, N)
    heads = up.to(torch.int64).argmax(dim=-1)  # (B, N)
    return heads.masked_fill(~up.any(dim=-1), -1)


def _block_energy(query: Tensor, key: Tensor, u: Tensor, edge_vecs: Tensor | None, edge_type: Tensor | None) -> Tensor:
    """``s^h_ik = u_h^T tanh(q^h_i + k^h_k [+ edge_vecs^h[t_ik]])`` for a block of query rows, heads folded
    into a dimension: ``query (B, r, e)``, ``key (B, N, e)``, ``u (H, e/H)``, ``edge_type (B, r, N)`` ->
    ``(B, H, r, N)``."""
    heads, width = u.shape
    pre = query[:, :, None, :] + key[:, None, :, :]  # (B, r, N, e)
    if edge_vecs is not None:
        pre = pre + edge_vecs[edge_type]  # + E[t_ik]
    pre = pre.unflatten(-1, (heads, width))  # (B, r, N, H, e/H)
    return torch.einsum("brnhe,he->bhrn", torch.tanh(pre), u)  # (B, H, r, N)


def energy_matrix(query: Tensor, key: Tensor, u: Tensor, edge_vecs: Tensor | None = None,
                  edge_type: Tensor | None = None, block_rows: int | None = None) -> Tensor:
    """All heads' energies ``(B, H, N, N)``, differentiable, computed ``block_rows`` query rows at a time
    (each block under activation checkpointing while gradients are on, so only one block's
    ``(B, r, N, e)`` ``tanh`` exists at once and the backward recomputes it, as the softmax path does).

    Args:
        query, key: ``(B, N, e)``; u: ``(H, e/H)``; edge_vecs: ``(T, e)`` or None; edge_type:
            ``(B, N, N)`` long or None; block_rows: None = every row in one block.
    """
    n = query.shape[1]
    rows = n if block_rows is None else max(1, block_rows)
    checkpoint = torch.is_grad_enabled() and n > rows
    blocks = []
    for start in range(0, n, rows):
        part = slice(start, start + rows)
        args = (query[:, part], key, u, edge_vecs, None if edge_type is None else edge_type[:, part])
        if checkpoint:
            blocks.append(torch.utils.checkpoint.checkpoint(_block_energy, *args, use_reentrant=False))
        else:
            blocks.append(_block_energy(*args))
    return blocks[0] if len(blocks) == 1 else torch.cat(blocks, dim=-2)  # (B, H, N, N)


def graph_attention(query: Tensor, key: Tensor, u: Tensor, values: Tensor, mask: Tensor,
                    edge_vecs: Tensor | None = None, edge_type: Tensor | None = None,
                    keys: Tensor | None = None, edge_weights: str = "softmax", energy_form: str = "additive",
                    block_rows: int | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """CN3's attention with the energy form and normaliser chosen, everything differentiable (the
    weights too: the regularisers read them).

    ``s = energy_matrix(...)`` (``centered``: :func:`center_energy`), ``alpha = normalise(s)``,
    ``out_i = concat_h sum_k alpha^h_ik values_k[slice_h]``.

    Args: as :func:`cn3.layers.dynamic_graph.cn3_attention` (``keys``: ``(B, N, N)`` bool or None).

    Shapes:
        returns ``out (B, N, d)``, ``alpha (B, H, N, N)``, ``energy (B, H, N, N)`` (after centering) and
        ``allowed (B, 1, N, N)`` bool.
    """
    if energy_form not in ENERGY_FORMS:
        raise ValueError(f"energy_form must be one of {', '.join(ENERGY_FORMS)}, got {energy_form!r}")
    batch, n, d = values.shape
    heads = u.shape[0]
    allowed = mask[:, :, None] & mask[:, None, :]  # (B, N, N) real query, real key
    if keys is not None:
        allowed = allowed & keys
    allowed = allowed.unsqueeze(1)  # (B, 1, N, N)
    energy = energy_matrix(query, key, u, edge_vecs, edge_type, block_rows)  # (B, H, N, N)
    if energy_form == "centered":
        energy = center_energy(energy, allowed)  # s_ik - c_k
    alpha = normalise(energy, allowed, edge_weights)  # (B, H, N, N)
    per_head = values.view(batch, n, heads, d // heads).transpose(1, 2)  # (B, H, N, d/H)
    out = (alpha.to(values.dtype) @ per_head).transpose(1, 2).reshape(batch, n, d)  # (B, N, d)
    return out, alpha, energy, allowed
