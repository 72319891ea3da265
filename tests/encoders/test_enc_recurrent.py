"""The recurrent and self-attention encoders of the zoo against literal references: Elman's RNN
hand-run, Hao et al.'s short-cut ``H = H_rnn + H_san`` and the stack orders, the Transformer stack."""

from __future__ import annotations

import pytest
import torch

from cn3.encoders import EncoderArgs, build_encoder
from cn3.encoders.options import RecurrentOptions
from cn3.layers.attention import padding_mask
from cn3.layers.transformer import sinusoidal_positions

pytestmark = pytest.mark.usefixtures("one_thread")


def test_elman_rnn_matches_a_hand_run_in_both_directions():
    torch.manual_seed(0)
    enc = build_encoder("rnn", EncoderArgs(in_dim=3, d=4)).double().eval()  # 2 units per direction
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    mask = padding_mask(torch.tensor([3, 5]), 5)
    h, _ = enc(x, mask)
    rnn = enc.rnn

    def run(xs, suffix):
        w_ih, w_hh = getattr(rnn, f"weight_ih_l0{suffix}"), getattr(rnn, f"weight_hh_l0{suffix}")
        b = getattr(rnn, f"bias_ih_l0{suffix}") + getattr(rnn, f"bias_hh_l0{suffix}")
        state, out = torch.zeros(2, dtype=torch.float64), []
        for x_t in xs:
            state = torch.tanh(w_ih @ x_t + w_hh @ state + b)  # h_t = tanh(W x_t + U h_{t-1} + b)
            out.append(state)
        return torch.stack(out)

    forward = run(x[0, :3], "")
    backward = run(x[0, :3].flip(0), "_reverse").flip(0)
    torch.testing.assert_close(h[0, :3], torch.cat([forward, backward], -1))
    assert torch.all(h[0, 3:] == 0)


@pytest.mark.parametrize("order, shortcut", [("rnn_first", True), ("rnn_first", False), ("san_first", True)])
def test_recurrent_san_is_the_sum_of_its_stacks(order, shortcut):
    """Hao et al. eq. 10: ``H = H_rnn + H_san``, the SAN stack on the recurrent stack's output."""
    torch.manual_seed(1)
    args = EncoderArgs(in_dim=8, d=8, layers=3, heads=2, ff=16, level="translation", positions=False,
                       rnn=RecurrentOptions(layers=1, chunk_size=2, order=order, shortcut=shortcut))
    enc = build_encoder("onlstm_san", args).double().eval()
    assert len(enc.rnn.layers) == 1 and len(enc.san.layers) == 2  # K = 1 under 3 - 1 self-attention layers
    x = torch.randn(2, 4, 8, dtype=torch.float64)
    mask = padding_mask(torch.tensor([4, 2]), 4)
    h, _ = enc(x, mask)
    if order == "rnn_first":
        h_rnn = enc.rnn(x, mask)
        h_san, _ = enc.san(h_rnn, mask)
        expected = h_rnn + h_san if shortcut else h_san
    else:
        h_san, _ = enc.san(x, mask)
        h_rnn = enc.rnn(h_san, mask)
        expected = h_rnn + h_san
    torch.testing.assert_close(h, expected.masked_fill(~mask.unsqueeze(-1), 0.0))


def test_sentence_transformer_is_projection_norm_positions_layers_and_final_norm():
    torch.manual_seed(2)
    enc = build_encoder("transformer", EncoderArgs(in_dim=5, d=8, layers=2, heads=2, ff=16)).double().eval()
    x = torch.randn(1, 4, 5, dtype=torch.float64)
    mask = torch.ones(1, 4, dtype=torch.bool)
    h, info = enc(x, mask)
    projected = enc.proj(x)  # (1, 4, 8), normalised per token before the positions are added
    normalised = (projected - projected.mean(-1, keepdim=True)) / (projected.var(-1, unbiased=False, keepdim=True)
                                                                    + 1e-5).sqrt()
    state = normalised * enc.input_norm.weight + enc.input_norm.bias + sinusoidal_positions(4, 8).double()
    for layer in enc.layers:  # pre-norm: x + Att(LN(x)), then x + FF(LN(x))
        state = state + layer.attn(layer.norm1(state), mask)[0]
        state = state + layer.ffn(layer.norm2(state))
    torch.testing.assert_close(h, enc.final_norm(state))
    assert len(info["alphas"]) == 2 and info["alphas"][0].shape == (1, 4, 4)  # head-averaged, outside training
    torch.testing.assert_close(info["alphas"][0].sum(-1), torch.ones(1, 4, dtype=torch.float64))


@pytest.mark.parametrize("encoder", ["lstm", "onlstm", "onlstm_san"])
def test_rnn_residual_reaches_the_recurrent_stack(encoder):
    args = {"in_dim": 8, "d": 8, "layers": 3, "heads": 2, "ff": 16, "level": "translation"}
    on = build_encoder(encoder, EncoderArgs(**args, rnn=RecurrentOptions(layers=2, chunk_size=2, residual=True)))
    off = build_encoder(encoder, EncoderArgs(**args, rnn=RecurrentOptions(layers=2, chunk_size=2)))
    off.load_state_dict(on.state_dict())  # the same weights: only the residual differs
    x, mask = torch.randn(2, 4, 8), torch.ones(2, 4, dtype=torch.bool)
    on.eval(), off.eval()
    assert on.rnn.residual and not off.rnn.residual
    assert not torch.allclose(on(x, mask)[0], off(x, mask)[0])
