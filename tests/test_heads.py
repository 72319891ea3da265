"""Heads: the CRF against brute-force enumeration, mask checks, pooling and pair matching."""

import itertools

import pytest
import torch

from cn3.models.heads import CRFHead, PairClassifier, PooledClassifier, max_pool, mean_pool


def brute_force_log_likelihood(head: CRFHead, h, length, tags):
    """log p(tags) by enumerating every tag sequence of one sentence."""
    emissions = head.emit(h[:length])  # (n, T)
    crf = head.crf

    def path_score(path):
        s = crf.start_transitions[path[0]] + emissions[0, path[0]]
        for i in range(1, len(path)):
            s = s + crf.transitions[path[i - 1], path[i]] + emissions[i, path[i]]
        return s + crf.end_transitions[path[-1]]

    n_tags = emissions.shape[1]
    all_scores = torch.stack([path_score(p) for p in itertools.product(range(n_tags), repeat=length)])
    return path_score(tags[:length].tolist()) - torch.logsumexp(all_scores, 0), all_scores


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_crf_matches_brute_force(seed):
    torch.manual_seed(seed)
    head = CRFHead(5, 3).double()
    for p in head.parameters():
        torch.nn.init.normal_(p)
    lengths = torch.tensor([4, 2, 1])
    mask = torch.arange(4)[None] < lengths[:, None]
    h = torch.randn(3, 4, 5, dtype=torch.double)
    tags = torch.randint(0, 3, (3, 4)) * mask
    ll = head.log_likelihood(h, mask, tags)
    _, pred = head(h, mask)
    for b in range(3):
        expected, scores = brute_force_log_likelihood(head, h[b], int(lengths[b]), tags[b])
        assert ll[b].item() == pytest.approx(expected.item(), abs=1e-9)
        best = max(itertools.product(range(3), repeat=int(lengths[b])),
                   key=lambda p: brute_force_log_likelihood(head, h[b], int(lengths[b]), torch.tensor(p))[0].item())
        assert pred[b, : lengths[b]].tolist() == list(best)
        assert pred[b, lengths[b]:].eq(0).all()


def test_crf_mask_must_be_bool_and_start_on():
    head = CRFHead(4, 3)
    h = torch.randn(2, 3, 4)
    with pytest.raises(TypeError):
        head(h, torch.ones(2, 3, dtype=torch.uint8))
    bad = torch.tensor([[True, True, False], [False, True, True]])
    with pytest.raises(ValueError, match="first step"):
        head(h, bad)


def test_mean_pool_ignores_padding():
    h = torch.tensor([[[1.0], [3.0], [100.0]]])
    assert mean_pool(h, torch.tensor([[True, True, False]])).item() == 2.0


def test_max_pool_ignores_padding_and_is_padding_invariant():
    h = torch.tensor([[[1.0, -5.0], [3.0, -4.0], [100.0, 100.0]]])
    mask = torch.tensor([[True, True, False]])
    assert max_pool(h, mask).tolist() == [[3.0, -4.0]]
    head = PooledClassifier(2, 3, 4, pool="max").eval()
    padded = torch.cat([h, torch.full((1, 2, 2), 7.0)], 1)
    longer_mask = torch.cat([mask, torch.zeros(1, 2, dtype=torch.bool)], 1)
    assert torch.equal(head(h, mask)[2], head(padded, longer_mask)[2])


def test_max_pool_of_a_row_without_nodes_is_zero_like_mean_pool():
    h = torch.randn(2, 3, 4)
    mask = torch.tensor([[True, False, False], [False, False, False]])
    assert torch.equal(max_pool(h, mask)[1], torch.zeros(4))
    assert torch.equal(max_pool(h, mask)[1], mean_pool(h, mask)[1])
    assert torch.equal(max_pool(h, mask)[0], h[0, 0])


def test_pooled_and_pair_classifiers_shapes_and_loss():
    torch.manual_seed(0)
    h = torch.randn(4, 6, 8)
    mask = torch.ones(4, 6, dtype=torch.bool)
    y = torch.tensor([0, 1, 2, 1])
    loss, pred, logits = PooledClassifier(8, 3, 16)(h, mask, y)
    assert pred.shape == (4,) and logits.shape == (4, 3) and loss.item() > 0
    pair = PairClassifier(8, 3, 16)
    loss, pred, logits = pair.forward_pair(h, mask, h.flip(0), mask, y)
    assert logits.shape == (4, 3) and torch.isfinite(loss)
    # [u, v, |u-v|, u*v]: swapping the sides changes u-v's sign only, so identical sides give
    # the same features either way
    _, _, same = pair.forward_pair(h, mask, h, mask)
    assert torch.allclose(same, pair.logits(torch.cat([mean_pool(h, mask)] * 2 + [torch.zeros(4, 8),
                                                        mean_pool(h, mask) ** 2], -1)))
