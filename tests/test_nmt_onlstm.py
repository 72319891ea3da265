"""ON-LSTM (Shen et al., 2019): cumax, master-gate order, a step-by-step reference, padding."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cn3.attention import padding_mask
from cn3.layers.onlstm import ONLSTM, RecurrentStack, cumax, reverse_padded


pytestmark = pytest.mark.usefixtures("one_thread")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-30, 30), min_size=1, max_size=12))
def test_cumax_is_a_monotone_gate_from_0_to_1(values):
    g = cumax(torch.tensor(values, dtype=torch.float64))
    assert (g.diff() >= 0).all()
    assert (g >= 0).all() and (g <= 1 + 1e-12).all()
    assert abs(float(g[-1]) - 1.0) < 1e-9


def reference_onlstm(layer: ONLSTM, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Shen et al. eq. 3-9 for ONE unpadded sentence ``(N, d_in)``, one step at a time, written
    from the paper (master gates expanded to neuron level with repeat_interleave)."""
    nc, cs, hid = layer.n_chunks, layer.chunk_size, layer.hidden
    w_ih, b_ih, w_hh = layer.ih.weight, layer.ih.bias, layer.hh.weight
    h, c = torch.zeros(hid, dtype=x.dtype), torch.zeros(hid, dtype=x.dtype)
    outs = []
    for x_t in x:
        z = w_ih @ x_t + b_ih + w_hh @ h
        zf, zi, rest = z[:nc], z[nc : 2 * nc], z[2 * nc :]
        f, i, o, chat = rest.view(4, hid)
        f_t, i_t, o_t, chat_t = torch.sigmoid(f), torch.sigmoid(i), torch.sigmoid(o), torch.tanh(chat)
        master_f = torch.cumsum(torch.softmax(zf, 0), 0).repeat_interleave(cs)  # eq. 6
        master_i = 1 - torch.cumsum(torch.softmax(zi, 0), 0).repeat_interleave(cs)  # eq. 7
        omega = master_f * master_i  # eq. 8
        f_hat = f_t * omega + (master_f - omega)
        i_hat = i_t * omega + (master_i - omega)
        c = f_hat * c + i_hat * chat_t  # eq. 9
        h = o_t * torch.tanh(c)
        outs.append(h)
    return torch.stack(outs), h, c


def test_batched_layer_matches_the_step_by_step_reference():
    torch.manual_seed(0)
    layer = ONLSTM(6, 12, chunk_size=3).double()
    lengths = [5, 2, 4, 1]
    x = torch.randn(len(lengths), max(lengths), 6, dtype=torch.float64)
    mask = padding_mask(torch.tensor(lengths))
    x[~mask] = 123.0  # garbage under padding must not matter
    out, (h, c) = layer(x, mask)
    for row, n in enumerate(lengths):
        ref_out, ref_h, ref_c = reference_onlstm(layer, x[row, :n])
        torch.testing.assert_close(out[row, :n], ref_out)
        assert (out[row, n:] == 0).all()
        torch.testing.assert_close(h[row], ref_h)  # the state after the last real step
        torch.testing.assert_close(c[row], ref_c)


def test_master_forget_gate_rises_along_the_neuron_order():
    torch.manual_seed(1)
    layer = ONLSTM(5, 16, chunk_size=4)
    x = torch.randn(3, 6, 5)
    _, _, master = layer(x, torch.ones(3, 6, dtype=torch.bool), return_master=True)
    assert master.shape == (3, 6, 4)
    assert (master.diff(dim=-1) >= -1e-6).all()
    torch.testing.assert_close(master[..., -1], torch.ones(3, 6))


def test_left_padding_is_handled_too():
    """Masking is general (not only right padding): padded steps keep the state."""
    torch.manual_seed(2)
    layer = ONLSTM(4, 8, chunk_size=2).double()
    x = torch.randn(2, 5, 4, dtype=torch.float64)
    mask = torch.tensor([[False, False, True, True, True], [True] * 5])
    out, (h, _) = layer(x, mask)
    ref_out, ref_h, _ = reference_onlstm(layer, x[0, 2:])
    torch.testing.assert_close(out[0, 2:], ref_out)
    torch.testing.assert_close(h[0], ref_h)
    assert (out[0, :2] == 0).all()


def test_reverse_padded_reverses_within_each_length():
    x = torch.arange(8).view(2, 4, 1)
    out = reverse_padded(x, torch.tensor([3, 4]))
    assert out[..., 0].tolist() == [[2, 1, 0, 3], [7, 6, 5, 4]]


@pytest.mark.parametrize("cell", ["onlstm", "lstm"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_recurrent_stack_is_padding_invariant(cell, bidirectional):
    torch.manual_seed(3)
    stack = RecurrentStack(8, 2, cell, chunk_size=2, bidirectional=bidirectional).eval().double()
    lengths = [6, 3, 1]
    x = torch.randn(3, 6, 8, dtype=torch.float64)
    mask = padding_mask(torch.tensor(lengths))
    batched = stack(x, mask)
    for row, n in enumerate(lengths):
        alone = stack(x[row : row + 1, :n], torch.ones(1, n, dtype=torch.bool))
        torch.testing.assert_close(batched[row, :n], alone[0])
        assert (batched[row, n:] == 0).all()


def test_bidirectional_backward_half_reads_right_to_left():
    torch.manual_seed(4)
    stack = RecurrentStack(4, 1, "onlstm", chunk_size=2, bidirectional=True).double()
    x = torch.randn(1, 5, 4, dtype=torch.float64)
    out = stack(x, torch.ones(1, 5, dtype=torch.bool))
    ref_back, _, _ = reference_onlstm(stack.layers[0][1], x[0].flip(0))
    torch.testing.assert_close(out[0, :, 2:], ref_back.flip(0))
