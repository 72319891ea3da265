"""Posterior tag marginals of a linear-chain CRF (pytorch-crf's ``torchcrf.CRF``) by forward-backward.

pytorch-crf gives a sequence's likelihood and the Viterbi path, not each tag's marginal
``p(y_t = j | x)`` (Lafferty et al., 2001; Sutton & McCallum, 2012, Sec. 4.1):

    alpha_t(j) = e_t(j) + logsumexp_i [alpha_{t-1}(i) + A(i, j)],   alpha_0(j) = s(j) + e_0(j)
    beta_t(i)  = logsumexp_j [A(i, j) + e_{t+1}(j) + beta_{t+1}(j)], beta_{L-1}(i) = f(i)
    log Z      = logsumexp_j [alpha_{L-1}(j) + f(j)]
    p(y_t = j | x) = exp(alpha_t(j) + beta_t(j) - log Z)

``s``, ``f``, ``A``: the CRF's ``start_transitions``, ``end_transitions``, ``transitions`` (``A[i, j]``:
tag ``i`` to tag ``j``); ``e`` the emissions, ``L`` the sentence length. All in log space.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torchcrf import CRF


def crf_forward_backward(crf: CRF, emissions: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Forward and backward log scores and the log partition function.

    Args:
        crf: a ``batch_first`` pytorch-crf CRF over ``T`` tags.
        emissions: emission scores.
        mask: True at real tokens (right padding; every sentence has at least one token).

    Shapes:
        ``emissions (B, N, T)``, ``mask (B, N)`` bool -> ``alpha (B, N, T)``, ``beta (B, N, T)``
        (meaningful at real tokens only) and ``log_z (B,)``.
    """
    if mask.dtype != torch.bool:
        raise TypeError(f"CRF mask must be bool, got {mask.dtype}")
    if not bool(mask[:, 0].all()):
        raise ValueError("CRF mask must be on at the first step of every sentence (empty sentence?)")
    n = emissions.shape[1]
    trans = crf.transitions.to(emissions.dtype)  # (T, T), [from, to]
    start = crf.start_transitions.to(emissions.dtype)  # (T,)
    end = crf.end_transitions.to(emissions.dtype)  # (T,)

    alphas = [start + emissions[:, 0]]  # alpha_0 (B, T)
    for t in range(1, n):
        # alpha_t(j) = e_t(j) + logsumexp_i [alpha_{t-1}(i) + A(i, j)]
        alphas.append(torch.logsumexp(alphas[-1].unsqueeze(2) + trans, dim=1) + emissions[:, t])  # (B, T)
    # Past a sentence's end alpha runs on over padding; it is never read there (log Z uses alpha_0 + beta_0).

    end_b = end.expand_as(emissions[:, 0])  # (B, T)
    betas = [end_b]  # beta_{N-1}: only the last step of a full-length sentence
    for t in range(n - 2, -1, -1):
        # beta_t(i) = logsumexp_j [A(i, j) + e_{t+1}(j) + beta_{t+1}(j)] while t+1 is a real token;
        # at a sentence's last token (and under padding) beta_t = f, the end transition.
        step = torch.logsumexp(trans + (emissions[:, t + 1] + betas[-1]).unsqueeze(1), dim=2)  # (B, T)
        betas.append(torch.where(mask[:, t + 1].unsqueeze(1), step, end_b))
    betas.reverse()

    alpha = torch.stack(alphas, 1)  # (B, N, T)
    beta = torch.stack(betas, 1)  # (B, N, T)
    log_z = torch.logsumexp(alpha[:, 0] + beta[:, 0], dim=1)  # (B,)  log Z
    return alpha, beta, log_z


def crf_marginals(crf: CRF, emissions: Tensor, mask: Tensor) -> Tensor:
    """Posterior marginal ``p(y_t = j | x)`` of every tag at every token of right-padded sentences.

    Args:
        crf: a ``batch_first`` pytorch-crf CRF over ``T`` tags.
        emissions: emission scores.
        mask: True at real tokens (right padding; every sentence has at least one token).

    Shapes:
        ``emissions (B, N, T)``, ``mask (B, N)`` bool -> ``(B, N, T)``: each real token's row sums
        to 1, padded rows are zero.
    """
    # In float64: log Z of a long sentence reaches thousands, where float32's rounding (~1e-3) would
    # show in every marginal, as alpha + beta - log Z cancels.
    wide = torch.promote_types(emissions.dtype, torch.float64)
    alpha, beta, log_z = crf_forward_backward(crf, emissions.to(wide), mask)
    log_p = alpha + beta - log_z[:, None, None]  # log p(y_t = j | x)
    # Fill padding before exp: alpha keeps growing past a sentence's end and could overflow to inf.
    return log_p.masked_fill(~mask.unsqueeze(2), float("-inf")).exp().to(emissions.dtype)  # (B, N, T)
