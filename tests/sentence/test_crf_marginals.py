"""Forward-backward CRF marginals against brute-force enumeration of every tag sequence."""

from __future__ import annotations

import itertools

import pytest
import torch
from torchcrf import CRF

from cn3.sentence.crf_marginals import crf_forward_backward, crf_marginals

T = 3
LENGTHS = [4, 2, 1, 3]  # right-padded batch, N = 4


@pytest.fixture
def case():
    g = torch.Generator().manual_seed(0)
    crf = CRF(T, batch_first=True).double().requires_grad_(False)
    with torch.no_grad():  # spread-out scores so the marginals are far from uniform
        for p in (crf.start_transitions, crf.end_transitions, crf.transitions):
            p.copy_(2 * torch.randn(p.shape, generator=g, dtype=torch.float64))
    emissions = 2 * torch.randn(len(LENGTHS), max(LENGTHS), T, generator=g, dtype=torch.float64)
    mask = torch.arange(max(LENGTHS))[None, :] < torch.tensor(LENGTHS)[:, None]
    return crf, emissions, mask


def path_score(crf: CRF, emissions: torch.Tensor, path: tuple[int, ...]) -> float:
    """Unnormalised log score of one sentence's tag path, written out term by term."""
    start, end = crf.start_transitions.tolist(), crf.end_transitions.tolist()
    trans, em = crf.transitions.tolist(), emissions.tolist()
    s = start[path[0]] + em[0][path[0]]
    for t in range(1, len(path)):
        s += trans[path[t - 1]][path[t]] + em[t][path[t]]
    return s + end[path[-1]]


def brute_force(crf: CRF, emissions: torch.Tensor, length: int):
    """(log Z, marginals (length, T), {path: score}) by summing over all T**length paths."""
    import math

    scores = {p: path_score(crf, emissions, p) for p in itertools.product(range(T), repeat=length)}
    log_z = math.log(sum(math.exp(s) for s in scores.values()))
    marg = torch.zeros(length, T, dtype=torch.float64)
    for p, s in scores.items():
        for t, j in enumerate(p):
            marg[t, j] += math.exp(s - log_z)
    return log_z, marg, scores


def test_marginals_match_brute_force(case):
    crf, emissions, mask = case
    got = crf_marginals(crf, emissions, mask)
    assert got.shape == emissions.shape
    for b, length in enumerate(LENGTHS):
        _, want, _ = brute_force(crf, emissions[b], length)
        torch.testing.assert_close(got[b, :length], want, rtol=1e-10, atol=1e-12)
        assert bool((got[b, length:] == 0).all())  # padding rows are zero
        torch.testing.assert_close(got[b, :length].sum(-1), torch.ones(length, dtype=torch.float64))


def test_log_partition_agrees_with_pytorch_crf(case):
    """log p(tags) from pytorch-crf = score(tags) - log Z, with score and log Z by brute force, and
    log Z from forward-backward equal to the brute-force one."""
    crf, emissions, mask = case
    _, _, log_z = crf_forward_backward(crf, emissions, mask)
    for b, length in enumerate(LENGTHS):
        want_z, _, scores = brute_force(crf, emissions[b], length)
        assert float(log_z[b]) == pytest.approx(want_z, rel=1e-12)
        for path in [(0,) * length, tuple((t * 2 + 1) % T for t in range(length))]:
            tags = torch.zeros(1, mask.shape[1], dtype=torch.long)
            tags[0, :length] = torch.tensor(path)
            ll = crf(emissions[b : b + 1], tags, mask=mask[b : b + 1], reduction="none")
            assert float(ll) == pytest.approx(scores[path] - want_z, rel=1e-12)


def test_marginals_sum_pytorch_crf_sequence_probabilities(case):
    """Marginal of tag j at t = sum of pytorch-crf's p(path) over every path with j at t (checks the
    transition orientation A[from, to] against the library itself, not only our own scorer)."""
    crf, emissions, mask = case
    b, length = 0, LENGTHS[0]
    paths = torch.tensor(list(itertools.product(range(T), repeat=length)))  # (T**L, L)
    em = emissions[b : b + 1].expand(len(paths), -1, -1)
    p = crf(em, paths, mask=mask[b : b + 1].expand(len(paths), -1), reduction="none").exp()  # (T**L,)
    want = torch.zeros(length, T, dtype=torch.float64)
    for t in range(length):
        want[t].index_add_(0, paths[:, t], p)
    torch.testing.assert_close(crf_marginals(crf, emissions, mask)[b], want, rtol=1e-10, atol=1e-12)


def test_padding_does_not_change_real_rows(case):
    crf, emissions, mask = case
    alone = crf_marginals(crf, emissions[1:2, : LENGTHS[1]], mask[1:2, : LENGTHS[1]])
    batched = crf_marginals(crf, emissions, mask)[1:2, : LENGTHS[1]]
    torch.testing.assert_close(alone, batched)


def test_long_float32_sentence_stays_finite():
    """Large float32 scores over 200 tokens (log Z ~ 1e4): no overflow, no NaN at padding, rows sum to 1
    to float32 precision, not to float32's rounding of log Z."""
    crf = CRF(T, batch_first=True)
    emissions = 50 * torch.randn(2, 200, T, generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 200, dtype=torch.bool)
    mask[1, 5:] = False
    m = crf_marginals(crf, emissions, mask)
    assert bool(torch.isfinite(m).all())
    torch.testing.assert_close(m[mask].sum(-1), torch.ones(int(mask.sum())), atol=1e-6, rtol=0)
    assert m.dtype == torch.float32
    assert bool((m[1, 5:] == 0).all())


def test_mask_checks(case):
    crf, emissions, mask = case
    with pytest.raises(TypeError):
        crf_marginals(crf, emissions, mask.long())
    bad = mask.clone()
    bad[0, 0] = False
    with pytest.raises(ValueError):
        crf_marginals(crf, emissions, bad)
