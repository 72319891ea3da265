"""Child-sum Tree-LSTM over the dependency tree (Tai, Socher & Manning, ACL 2015, section 3.1).

Each word ``j`` is a node whose children ``C(j)`` are its dependents; states are computed bottom-up
(leaves first, the root last)::

    h~_j  = sum_{k in C(j)} h_k                                  (2)
    i_j   = sigma(W_i x_j + U_i h~_j + b_i)                      (3)
    f_jk  = sigma(W_f x_j + U_f h_k + b_f)   one gate per child  (4)
    o_j   = sigma(W_o x_j + U_o h~_j + b_o)                      (5)
    u_j   = tanh(W_u x_j + U_u h~_j + b_u)                       (6)
    c_j   = i_j * u_j + sum_{k in C(j)} f_jk * c_k               (7)
    h_j   = o_j * tanh(c_j)                                      (8)

The recursion is batched by depth: all nodes at the same distance from their root, across the
whole batch, are computed at once, and their ``h_k`` and ``f_jk * c_k`` are scattered into their
heads' child sums with ``index_add`` (one Python step per tree level, none per node).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from cn3.encoders.registry import SENTENCE_LEVELS, EncoderArgs, register


def heads_from_edge_types(edge_type: Tensor, mask: Tensor) -> Tensor:
    """Each word's head read from the dense arc types (see :mod:`data_prep.graphs`).

    ``edge_type[b, i, k]`` is odd when ``k`` is ``i``'s head (and on the root's self-loop).

    Args:
        edge_type: ``(B, N, N)`` long arc types, ``0`` = no arc.
        mask: ``(B, N)`` True at real tokens.

    Returns:
        ``(B, N)`` long index of each word's head, ``-1`` at the root (and any word without a head)
        and at padding.

    Raises:
        ValueError: a word has more than one head.
    """
    n = edge_type.shape[1]
    real = mask[:, :, None] & mask[:, None, :]  # (B, N, N)
    off_diagonal = ~torch.eye(n, dtype=torch.bool, device=edge_type.device)
    up = (edge_type % 2 == 1) & real & off_diagonal  # (B, N, N): k is i's head
    n_heads = up.sum(-1)  # (B, N)
    if (n_heads > 1).any():
        b, i = (n_heads > 1).nonzero()[0].tolist()
        raise ValueError(f"word {i} of sentence {b} has {n_heads[b, i].item()} heads in edge_type; "
                         "a dependency tree gives each word at most one")
    return torch.where(n_heads == 1, up.long().argmax(-1), -1)


def _depths(head: Tensor) -> Tensor:
    """``(B, N)`` distance of each word from its root (``0`` where ``head`` is ``-1``).

    Propagates ``depth[i] = depth[head[i]] + 1`` until it settles, which takes ``max depth + 1``
    vectorised steps; words on a cycle never settle, and once past the deepest possible tree
    (``N - 1``) they are reported.
    """
    n = head.shape[1]
    depth = torch.zeros_like(head)
    has_head = head >= 0
    parent = head.clamp(min=0)
    for _ in range(n + 1):
        new = torch.where(has_head, depth.gather(1, parent) + 1, 0)
        if torch.equal(new, depth):
            return depth
        depth = new
    b = (depth >= n).any(1).nonzero()[0].item()
    raise ValueError(f"sentence {b}: the arcs in edge_type contain a cycle, not a dependency tree")


class ChildSumTreeLSTM(nn.Module):
    """Child-sum Tree-LSTM (Tai et al., 2015) over the dependency tree in ``edge_type``.

    Per-word states ``h`` serve tagging; :meth:`pool` returns the root's state, the sentence vector
    Tai et al. classify from. ``dropout`` is applied to the output states (Tai et al. drop the state
    fed to the classifier).

    Args:
        in_dim: width of ``x``.
        hidden: memory width (``out_dim`` and ``pool_dim``).
        dropout: rate on the output states.

    Shapes:
        ``x (B, N, in_dim)``, ``mask (B, N)``, ``edge_type (B, N, N)`` -> ``h (B, N, hidden)``;
        ``info["root"] (B,)`` index of each sentence's (first) root, ``info["roots"] (B, N)`` all roots.
    """

    def __init__(self, in_dim: int, hidden: int, dropout: float = 0.0):
        super().__init__()
        self.hidden = hidden
        self.out_dim = self.pool_dim = hidden
        self.W_iou = nn.Linear(in_dim, 3 * hidden)  # W_i, W_o, W_u with b_i, b_o, b_u
        self.U_iou = nn.Linear(hidden, 3 * hidden, bias=False)
        self.W_f = nn.Linear(in_dim, hidden)  # with b_f
        self.U_f = nn.Linear(hidden, hidden, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's ``nn.Linear`` default, ``U(+-1/sqrt(fan_in))``: also Torch7's, which Tai et al.'s code uses."""
        for linear in (self.W_iou, self.U_iou, self.W_f, self.U_f):
            linear.reset_parameters()

    def forward(self, x: Tensor, mask: Tensor, *, v: Tensor | None = None,
                edge_type: Tensor | None = None) -> tuple[Tensor, dict]:
        if edge_type is None:
            raise ValueError("the child-sum Tree-LSTM needs dependency trees (edge_type)")
        bsz, n, _ = x.shape
        head = heads_from_edge_types(edge_type, mask)  # (B, N)
        is_root = (edge_type.diagonal(dim1=1, dim2=2) % 2 == 1) & mask  # (B, N): odd self-loop
        n_roots = is_root.sum(1)  # (B,)
        if ((n_roots == 0) & mask.any(1)).any():
            b = ((n_roots == 0) & mask.any(1)).nonzero()[0].item()
            raise ValueError(f"sentence {b} has no root (an odd self-loop edge_type[b, i, i] marks the root); "
                             "the child-sum Tree-LSTM needs a dependency tree per sentence")
        misplaced = ((head >= 0) == is_root) & mask  # (B, N): a root with a head, or a non-root without one
        if misplaced.any():
            b, i = misplaced.nonzero()[0].tolist()
            raise ValueError(f"word {i} of sentence {b} is the root and has a head, or has neither")
        depth = _depths(head)  # (B, N)

        # Flatten the batch so one index addresses any word: node b*N + i, its head b*N + head.
        offset = torch.arange(bsz, device=x.device)[:, None] * n
        flat_head = (head + offset).flatten()  # (B*N,), meaningless where head = -1 (never read)
        flat_depth = depth.masked_fill(~mask, -1).flatten()  # (B*N,), padding is on no level
        wx_iou = self.W_iou(x).flatten(0, 1)  # (B*N, 3h): W x + b for every word at once
        wx_f = self.W_f(x).flatten(0, 1)  # (B*N, h)

        zeros = x.new_zeros(bsz * n, self.hidden)
        h_sum = zeros  # (B*N, h): sum_k h_k over the children scattered so far, eq. (2)
        fc_sum = zeros  # (B*N, h): sum_k f_jk * c_k, eq. (7)
        h_all = zeros  # (B*N, h)
        for level in range(int(depth.max()), -1, -1):  # deepest first: children before heads
            idx = (flat_depth == level).nonzero().squeeze(1)  # (n_l,)
            i, o, u = (wx_iou[idx] + self.U_iou(h_sum[idx])).chunk(3, dim=-1)  # eq. (3), (5), (6)
            c = torch.sigmoid(i) * torch.tanh(u) + fc_sum[idx]  # (n_l, h), eq. (7)
            h = torch.sigmoid(o) * torch.tanh(c)  # (n_l, h), eq. (8)
            h_all = h_all.index_copy(0, idx, h)
            if level > 0:
                parent = flat_head[idx]  # (n_l,)
                f = torch.sigmoid(wx_f[parent] + self.U_f(h))  # (n_l, h): f_jk, one per child, eq. (4)
                h_sum = h_sum.index_add(0, parent, h)
                fc_sum = fc_sum.index_add(0, parent, f * c)
        h_out = self.dropout(h_all.view(bsz, n, self.hidden))  # (B, N, h), zero at padding
        return h_out, {"root": is_root.long().argmax(1), "roots": is_root}

    def pool(self, h: Tensor, mask: Tensor, info: dict) -> Tensor:
        """The root's state ``(B, hidden)``: Tai et al. classify a sentence from its root.

        A forest (several roots: a text of several sentences parsed one by one, or a tree cut at
        ``max_len``, whose orphaned words become roots) gives the mean of its roots' states.
        """
        roots = info["roots"].unsqueeze(-1).to(h.dtype)  # (B, N, 1)
        return (h * roots).sum(1) / roots.sum(1).clamp(min=1.0)


@register("treelstm", "Tai et al. 2015 (child-sum Tree-LSTM)", needs_trees=True, levels=SENTENCE_LEVELS,
          default_layers=1, table_order=4)
def _build(a: EncoderArgs) -> nn.Module:
    return ChildSumTreeLSTM(a.in_dim, a.d, a.dropout)
