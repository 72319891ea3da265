"""ON-LSTM (Shen et al., 2019): cumax, master-gate order, a step-by-step reference, padding; the scan
with its hand-written backward against the previous step loop (literal values), against the step
loop under autograd that the layer keeps as the reference, and against finite differences."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cn3.layers.attention import padding_mask
from cn3.layers.onlstm import ONLSTM, RecurrentStack, _ONLSTMScan, cumax, padding_start
from cn3.layers.packed import reverse_within_lengths

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
    out = reverse_within_lengths(x, torch.tensor([3, 4]))
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


def fixed(shape, phase: float) -> torch.Tensor:
    """Deterministic values in [-1, 1] that do not depend on torch's random generator."""
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n, dtype=torch.float64) * 0.7 + phase).sin().view(shape)


# Recorded once by running the layer as it was before the scan (the step loop under autograd, commit
# 0a2b4a5) on the inputs of test_scan_matches_the_previous_step_loop_literally: per tensor,
# (sum, sum of tensor * fixed(shape, 1.3)).
PREVIOUS_STEP_LOOP = {
    "out": (-0.9323119067688443, -0.6510441839115539),
    "h": (-0.8554076176581867, 1.23288528261986),
    "c": (-1.7322824476784358, 1.980742841496115),
    "master": (29.353442921026637, 1.3094332717575672),
    "x.grad": (0.29062846735373743, 0.7104084270608052),
    "h0.grad": (1.4000752556217906, 0.572954737384288),
    "c0.grad": (0.3239321766811232, 6.267621445227218),
    "ih.weight.grad": (2.472763634294128, 0.08693772152386431),
    "ih.bias.grad": (1.9971971129580737, -0.30381913526897714),
    "hh.weight.grad": (-0.18420260941105482, 0.9379352078215213),
}
PREVIOUS_OUT_1_2 = [-0.2751887168057396, 0.028873026075873755, -0.2707507146881154, 0.11925258596054276,
                    0.16237248398142468, 0.31968442377916517]


def test_scan_matches_the_previous_step_loop_literally():
    """Outputs, state, master gates and every gradient, with padding (a row of one real step) and an
    initial state, equal what the previous implementation computed."""
    layer = ONLSTM(4, 6, chunk_size=2).double()
    with torch.no_grad():
        layer.ih.weight.copy_(fixed(layer.ih.weight.shape, 0.1) * 0.8)
        layer.ih.bias.copy_(fixed(layer.ih.bias.shape, 0.2) * 0.3)
        layer.hh.weight.copy_(fixed(layer.hh.weight.shape, 0.3) * 0.6)
    x = fixed((3, 5, 4), 0.4).requires_grad_()
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2, [True] + [False] * 4])
    h0 = (fixed((3, 6), 0.5) * 0.5).requires_grad_()
    c0 = (fixed((3, 6), 0.6) * 0.5).requires_grad_()
    out, (h, c), master = layer(x, mask, (h0, c0), return_master=True)
    loss = sum((t * fixed(t.shape, 0.9)).sum() for t in (out, h, c, master))
    loss.backward()
    got = {"out": out, "h": h, "c": c, "master": master, "x.grad": x.grad, "h0.grad": h0.grad,
           "c0.grad": c0.grad, "ih.weight.grad": layer.ih.weight.grad, "ih.bias.grad": layer.ih.bias.grad,
           "hh.weight.grad": layer.hh.weight.grad}
    for name, (total, weighted) in PREVIOUS_STEP_LOOP.items():
        t = got[name].detach()
        assert float(t.sum()) == pytest.approx(total, rel=1e-12, abs=1e-12), name
        assert float((t * fixed(t.shape, 1.3)).sum()) == pytest.approx(weighted, rel=1e-12, abs=1e-12), name
    torch.testing.assert_close(out[1, 2].detach(), torch.tensor(PREVIOUS_OUT_1_2, dtype=torch.float64),
                               rtol=1e-13, atol=1e-13)


def run_layer(layer, x, mask, state, return_master, step_loop: bool):
    """Outputs and gradients (x, state, parameters) of the layer's scan or of its autograd step loop."""
    x = x.clone().requires_grad_()
    state = None if state is None else tuple(s.clone().requires_grad_() for s in state)
    layer.zero_grad(set_to_none=True)
    if step_loop:
        b, n, _ = x.shape
        h, c = state if state is not None else (x.new_zeros(b, layer.hidden), x.new_zeros(b, layer.hidden))
        res = layer._step_loop(x, *padding_start(mask, n, x.device), h, c, return_master)
    else:
        res = layer(x, mask, state, return_master=return_master)
    tensors = [res[0], *res[1]] + ([res[2]] if return_master else [])
    generator = torch.Generator().manual_seed(7)
    sum(((t * torch.randn(t.shape, generator=generator, dtype=t.dtype)).sum() for t in tensors)).backward()
    grads = [x.grad] + ([] if state is None else [s.grad for s in state]) + [p.grad for p in layer.parameters()]
    return [t.detach() for t in tensors] + grads


@pytest.mark.parametrize("padding", ["none", "right", "left", "all_full", "empty_row"])
@pytest.mark.parametrize("with_state, return_master", [(False, False), (True, True)])
def test_scan_equals_the_autograd_step_loop(padding, with_state, return_master):
    torch.manual_seed(5)
    b, n = 4, 7
    layer = ONLSTM(5, 16, chunk_size=4)
    x = torch.randn(b, n, 5)
    lengths = torch.tensor([7, 4, 6, 1])
    mask = {"none": None, "right": padding_mask(lengths, n), "left": padding_mask(lengths, n).flip(1),
            "all_full": torch.ones(b, n, dtype=torch.bool),
            "empty_row": padding_mask(torch.tensor([7, 0, 3, 5]), n)}[padding]
    state = (torch.randn(b, 16), torch.randn(b, 16)) if with_state else None
    scan = run_layer(layer, x, mask, state, return_master, step_loop=False)
    loop = run_layer(layer, x, mask, state, return_master, step_loop=True)
    assert len(scan) == len(loop)
    for a, b_ in zip(scan, loop):
        torch.testing.assert_close(a, b_, rtol=1e-5, atol=1e-6)


def test_scan_backward_against_finite_differences():
    torch.manual_seed(6)
    n, b, nc, cs = 5, 3, 3, 2
    hid = nc * cs
    width = 2 * nc + 4 * hid
    pre = torch.randn(n, b, width, dtype=torch.float64, requires_grad=True)
    weight = (0.5 * torch.randn(width, hid, dtype=torch.float64)).requires_grad_()
    h0 = torch.randn(b, hid, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(b, hid, dtype=torch.float64, requires_grad=True)
    keep = padding_mask(torch.tensor([5, 2, 4]), n)
    for mask, full in ((None, n), (keep, 2)):
        assert torch.autograd.gradcheck(
            lambda *args: _ONLSTMScan.apply(*args, mask, full, nc, True), (pre, weight, h0, c0))


def test_inference_and_training_forward_agree():
    torch.manual_seed(8)
    layer = ONLSTM(6, 8, chunk_size=2)
    x = torch.randn(3, 6, 6)
    mask = padding_mask(torch.tensor([6, 3, 5]), 6)
    out, (h, c) = layer(x, mask)
    with torch.no_grad():
        out_eval, (h_eval, c_eval) = layer(x, mask)
    torch.testing.assert_close(out_eval, out.detach(), rtol=0, atol=0)
    torch.testing.assert_close(h_eval, h.detach(), rtol=0, atol=0)
    torch.testing.assert_close(c_eval, c.detach(), rtol=0, atol=0)


def test_autocast_runs_close_to_fp32():
    torch.manual_seed(9)
    layer = ONLSTM(16, 16, chunk_size=4)
    x = torch.randn(3, 6, 16, requires_grad=True)
    mask = padding_mask(torch.tensor([6, 2, 4]), 6)
    reference, _ = layer(x, mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, (h, c) = layer(x, mask)
    out.float().sum().backward()
    torch.testing.assert_close(out.float(), reference.detach(), rtol=0.05, atol=0.05)
    assert (out[1, 2:] == 0).all()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all()
               for p in layer.parameters())


@pytest.mark.parametrize("cell", ["onlstm", "lstm"])
def test_residual_stack_adds_each_later_layers_input(cell):
    """GNMT's residual: ``x_1 = f_0(x_0)`` (the first layer may change the width), then
    ``x_{l+1} = x_l + f_l(x_l)``; padding stays zero and the rows do not see each other."""
    torch.manual_seed(5)
    stack = RecurrentStack(8, 3, cell, chunk_size=2, in_dim=5, residual=True).eval().double()
    plain = RecurrentStack(8, 3, cell, chunk_size=2, in_dim=5).eval().double()
    plain.load_state_dict(stack.state_dict())
    x = torch.randn(2, 6, 5, dtype=torch.float64)
    mask = padding_mask(torch.tensor([6, 4]))

    def layer(i, inp):  # one layer of the plain stack alone
        one = RecurrentStack(8, 1, cell, chunk_size=2, in_dim=inp.shape[-1]).eval().double()
        one.layers[0].load_state_dict(plain.layers[i].state_dict())
        return one(inp, mask)

    x1 = layer(0, x)
    x2 = x1 + layer(1, x1)
    expected = x2 + layer(2, x2)
    out = stack(x, mask)
    torch.testing.assert_close(out, expected)
    assert not torch.allclose(out, plain(x, mask))
    assert (out[1, 4:] == 0).all()
    alone = stack(x[1:, :4], torch.ones(1, 4, dtype=torch.bool))
    torch.testing.assert_close(out[1, :4], alone[0])
