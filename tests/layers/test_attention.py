"""The shared attention kernel: masks, masked softmax, attend, gated mix."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cn3.layers.attention import (
    attend,
    attention,
    band_mask,
    gated_mix,
    masked_softmax,
    padding_mask,
    softmax_backward,
)


def reference_softmax(energy, allowed):
    """Softmax over allowed keys by -inf masking; rows without keys set to 0 afterwards."""
    weights = torch.softmax(energy.masked_fill(~allowed, float("-inf")), dim=-1)
    return torch.nan_to_num(weights, nan=0.0)


def test_padding_mask():
    mask = padding_mask(torch.tensor([3, 0, 1]), 4)
    assert mask.tolist() == [[True, True, True, False], [False] * 4, [True, False, False, False]]
    assert padding_mask(torch.tensor([2, 5])).shape == (2, 5)


def test_band_mask_window_zero_is_self_only():
    assert torch.equal(band_mask(5, 0), torch.eye(5, dtype=torch.bool))


@pytest.mark.parametrize("window", [4, 5, 100])
def test_band_mask_wide_window_is_global(window):
    assert band_mask(5, window).all()


def test_band_mask_is_symmetric_band():
    band = band_mask(6, 2)
    for i in range(6):
        for j in range(6):
            assert band[i, j] == (abs(i - j) <= 2)
    with pytest.raises(ValueError):
        band_mask(3, -1)


@pytest.mark.parametrize("heads", [None, 3])
def test_rows_sum_to_one_over_real_keys_and_zero_elsewhere(heads):
    torch.manual_seed(0)
    lengths = torch.tensor([5, 2, 1, 0])
    key_mask = padding_mask(lengths, 5)
    shape = (4, 5, 5) if heads is None else (4, heads, 5, 5)
    energy = torch.randn(shape) * 10
    weights = masked_softmax(energy, key_mask)
    keys = key_mask[:, None, :] if heads is None else key_mask[:, None, None, :]
    assert torch.all(weights.masked_select(~keys.expand_as(weights)) == 0)
    sums = weights.sum(-1)
    has_keys = (lengths > 0).view(-1, *([1] * (sums.dim() - 1))).expand_as(sums)
    torch.testing.assert_close(sums[has_keys], torch.ones_like(sums[has_keys]))
    assert torch.all(sums[~has_keys] == 0)
    allowed = keys.expand_as(energy)
    torch.testing.assert_close(weights, reference_softmax(energy, allowed))


def test_query_mask_zeroes_padded_rows():
    torch.manual_seed(0)
    mask = padding_mask(torch.tensor([3, 5]), 5)
    weights = masked_softmax(torch.randn(2, 5, 5), key_mask=mask, query_mask=mask)
    assert torch.all(weights[0, 3:] == 0)
    torch.testing.assert_close(weights[0, :3].sum(-1), torch.ones(3))
    torch.testing.assert_close(weights[1].sum(-1), torch.ones(5))


def test_fully_masked_rows_give_zeros_and_finite_gradients():
    energy = torch.randn(2, 3, 4, requires_grad=True)
    key_mask = torch.tensor([[False] * 4, [True, False, False, False]])
    weights = masked_softmax(energy, key_mask)
    assert torch.all(weights[0] == 0) and not weights.isnan().any()
    (weights * torch.randn_like(weights)).sum().backward()
    assert torch.isfinite(energy.grad).all()
    assert torch.all(energy.grad[0] == 0) and torch.all(energy.grad[1, :, 1:] == 0)


@pytest.mark.parametrize("shape", [(2, 0, 0), (0, 3, 3), (2, 4, 0)])
def test_empty_inputs_give_empty_weights_and_gradients(shape):
    energy = torch.randn(*shape, requires_grad=True)
    weights = masked_softmax(energy, torch.ones(shape[0], shape[2], dtype=torch.bool))
    assert weights.shape == shape
    weights.sum().backward()
    assert energy.grad.shape == shape


def test_extreme_energies_stay_finite():
    energy = torch.tensor([[[1e30, -1e30, 0.0], [-1e30, -1e30, -1e30]]], requires_grad=True)
    weights = masked_softmax(energy, torch.tensor([[True, True, False]]))
    torch.testing.assert_close(weights, torch.tensor([[[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]]]))
    weights.sum().backward()
    assert torch.isfinite(energy.grad).all()


def test_band_local_attention_from_the_same_energy():
    torch.manual_seed(0)
    n, window = 7, 1
    key_mask = padding_mask(torch.tensor([7, 4]), n)
    energy = torch.randn(2, 2, n, n)  # (B, H, N, N)
    band = band_mask(n, window)
    local = masked_softmax(energy, key_mask, band=band)
    allowed = key_mask[:, None, None, :] & band
    torch.testing.assert_close(local, reference_softmax(energy, allowed.expand_as(energy)))
    # padded queries far from any real key have no key in their window: all zeros
    assert torch.all(local[1, :, 6] == 0)
    torch.testing.assert_close(masked_softmax(energy, key_mask, band=band_mask(n, n)),
                               masked_softmax(energy, key_mask))


def test_gradcheck_masked_softmax():
    torch.manual_seed(0)
    energy = torch.randn(2, 2, 4, 4, dtype=torch.float64, requires_grad=True)
    key_mask = torch.tensor([[True, True, False, False], [False] * 4])
    query_mask = torch.tensor([[True, True, True, False], [True] * 4])
    band = band_mask(4, 1)
    assert torch.autograd.gradcheck(
        lambda e: masked_softmax(e, key_mask, band=band, query_mask=query_mask), (energy,))


def test_softmax_backward_matches_autograd():
    torch.manual_seed(0)
    energy = torch.randn(3, 5, 6, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(3, 5, 6, dtype=torch.float64)
    weights = torch.softmax(energy, dim=-1)
    (expected,) = torch.autograd.grad(weights, energy, grad)
    torch.testing.assert_close(softmax_backward(grad, weights.detach()), expected)


def test_attention_returns_weights_before_dropout():
    torch.manual_seed(0)
    energy, values = torch.randn(2, 4, 4), torch.randn(2, 4, 3)
    mask = padding_mask(torch.tensor([4, 2]), 4)
    out, weights = attention(energy, values, key_mask=mask)
    torch.testing.assert_close(weights, masked_softmax(energy, mask))
    torch.testing.assert_close(out, attend(weights, values))
    dropped, same = attention(energy, values, key_mask=mask, dropout_p=0.5, training=True)
    torch.testing.assert_close(same, weights)
    assert not torch.allclose(dropped, out)
    torch.testing.assert_close(attention(energy, values, mask, dropout_p=0.5)[0], out)


def test_gated_mix():
    a, b = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    torch.testing.assert_close(gated_mix(a, b, torch.ones(2, 3, 1)), a)
    torch.testing.assert_close(gated_mix(a, b, torch.zeros(4)), b)
    torch.testing.assert_close(gated_mix(a, b, torch.tensor(0.25)), 0.25 * a + 0.75 * b)


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(0, 6), min_size=1, max_size=3),
       window=st.integers(0, 6), seed=st.integers(0, 2**16))
def test_masked_softmax_matches_reference(lengths, window, seed):
    torch.manual_seed(seed)
    n = max(max(lengths), 1)
    mask = padding_mask(torch.tensor(lengths), n)
    energy = torch.randn(len(lengths), n, n, dtype=torch.float64) * 5
    band = band_mask(n, window)
    weights = masked_softmax(energy, mask, band=band, query_mask=mask)
    allowed = mask[:, None, :] & band & mask[:, :, None]
    torch.testing.assert_close(weights, reference_softmax(energy, allowed))
