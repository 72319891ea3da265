"""Heads: the CRF against brute-force enumeration, mask checks, pooling and pair matching."""

import itertools

import pytest
import torch

from cn3.layers.pooling import max_pool, mean_pool
from cn3.sentence.heads import CRFHead, PairClassifier, PooledClassifier


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
    assert head.loss(h, mask, tags).item() == pytest.approx(-ll.mean().item(), abs=1e-9)
    pred = head.decode(h, mask)
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
        head.decode(h, torch.ones(2, 3, dtype=torch.uint8))
    bad = torch.tensor([[True, True, False], [False, True, True]])
    with pytest.raises(ValueError, match="first step"):
        head.loss(h, bad, torch.zeros(2, 3, dtype=torch.long))


def test_mean_pool_ignores_padding():
    h = torch.tensor([[[1.0], [3.0], [100.0]]])
    assert mean_pool(h, torch.tensor([[True, True, False]])).item() == 2.0


def test_max_pool_ignores_padding_and_is_padding_invariant():
    h = torch.tensor([[[1.0, -5.0], [3.0, -4.0], [100.0, 100.0]]])
    mask = torch.tensor([[True, True, False]])
    assert max_pool(h, mask).tolist() == [[3.0, -4.0]]
    padded = torch.cat([h, torch.full((1, 2, 2), 7.0)], 1)
    longer_mask = torch.cat([mask, torch.zeros(1, 2, dtype=torch.bool)], 1)
    assert torch.equal(max_pool(h, mask), max_pool(padded, longer_mask))


def test_max_pool_of_a_row_without_nodes_is_zero_like_mean_pool():
    h = torch.randn(2, 3, 4)
    mask = torch.tensor([[True, False, False], [False, False, False]])
    assert torch.equal(max_pool(h, mask)[1], torch.zeros(4))
    assert torch.equal(max_pool(h, mask)[1], mean_pool(h, mask)[1])
    assert torch.equal(max_pool(h, mask)[0], h[0, 0])


def test_pooled_and_pair_classifiers():
    torch.manual_seed(0)
    h = torch.randn(4, 6, 8)
    mask = torch.ones(4, 6, dtype=torch.bool)
    u = mean_pool(h, mask)
    logits = PooledClassifier(8, 3, 16).eval().logits(u)
    assert logits.shape == (4, 3)
    pair = PairClassifier(8, 3, 16).eval()
    v = mean_pool(h.flip(0), mask)
    # [u, v, |u-v|, u*v] through the MLP, written out
    torch.testing.assert_close(pair.pair_logits(u, v), pair.mlp(torch.cat([u, v, (u - v).abs(), u * v], -1)))
    # swapping the sides changes only the order of u and v in the features
    assert not torch.allclose(pair.pair_logits(u, v), pair.pair_logits(v, u))


def test_heads_take_the_paper_init_only_when_asked():
    head = PooledClassifier(8, 3, 16)
    head.reset_parameters(0.05)
    assert all(p.abs().max() <= 0.05 for p in head.parameters())
    head.reset_parameters()  # torch's standard: biases within 1/sqrt(fan_in), weights beyond 0.05
    assert head.mlp[1].weight.abs().max() > 0.05
