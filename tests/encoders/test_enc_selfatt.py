"""The attention-RNN baselines: Lin et al.'s structured self-attention (``selfatt1``) and Cheng et
al.'s LSTMN (``selfatt2``), each against a hand-run of the paper's equations."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from cn3.config import ConfigError
from cn3.encoders import EncoderArgs, build_encoder, get_spec
from cn3.encoders.lstmn import LSTMN
from cn3.encoders.options import SelfAttOptions
from cn3.encoders.registry import LEVELS
from cn3.encoders.self_attentive import AnnotationMatrix, StructuredSelfAttention, annotation_penalty
from tests.gradients import assert_gradients_match_finite_differences


@pytest.fixture(autouse=True, scope="module")
def float64(one_thread):
    """Every tensor and parameter in float64 (the literal references compare to 1e-7), restored after."""
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(torch.float32)


def _mask(lengths: list[int], n: int) -> torch.Tensor:
    return torch.arange(n).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


# ----------------------------------------------------------------------------- selfatt1 (Lin et al.)

def _lin_reference(H: torch.Tensor, length: int, W1: torch.Tensor, W2: torch.Tensor):
    """A, M and P of one sentence, entry by entry: H (N, 2u), W1 (d_a, 2u), W2 (r, d_a)."""
    r, d_a = W2.shape
    dim = H.shape[1]
    A = [[0.0] * H.shape[0] for _ in range(r)]
    for k in range(r):
        scores = []
        for j in range(length):
            hid = [math.tanh(sum(W1[m, l].item() * H[j, l].item() for l in range(dim))) for m in range(d_a)]
            scores.append(sum(W2[k, m].item() * hid[m] for m in range(d_a)))
        z = sum(math.exp(s) for s in scores)
        for j in range(length):
            A[k][j] = math.exp(scores[j]) / z
    M = [[sum(A[k][j] * H[j, l].item() for j in range(length)) for l in range(dim)] for k in range(r)]
    P = 0.0
    for k in range(r):
        for k2 in range(r):
            dot = sum(A[k][j] * A[k2][j] for j in range(H.shape[0]))
            P += (dot - (1.0 if k == k2 else 0.0)) ** 2
    return torch.tensor(A), torch.tensor(M), P


def _selfatt1(**kw) -> StructuredSelfAttention:
    torch.manual_seed(0)
    args = dict(in_dim=3, hidden=4, hops=2, att_hidden=3, penalty=0.7)
    args.update(kw)
    return StructuredSelfAttention(**args).eval()


def test_annotation_matrix_literal_on_given_states():
    torch.manual_seed(1)
    att = AnnotationMatrix(dim=4, att_hidden=3, hops=2).eval()
    H = torch.randn(2, 5, 4)
    mask = _mask([5, 3], 5)
    H = H * mask.unsqueeze(-1)
    A = att(H, mask)
    for b, length in enumerate([5, 3]):
        A_ref, _, P_ref = _lin_reference(H[b], length, att.ws1.weight, att.ws2.weight)
        assert_close(A[b], A_ref)
        assert annotation_penalty(A)[b].item() == pytest.approx(P_ref, rel=1e-12)


def test_selfatt1_literal_A_M_and_penalty_through_the_encoder():
    enc = _selfatt1()
    lengths = [4, 2]
    x = torch.randn(2, 4, 3)
    mask = _mask(lengths, 4)
    h, info = enc(x, mask)
    W1, W2 = enc.attention.ws1.weight, enc.attention.ws2.weight
    refs = [_lin_reference(h[b], lengths[b], W1, W2) for b in range(2)]
    A = info["alphas"][0]
    assert A.shape == (2, 2, 4)  # (B, r, N): hops x tokens
    M = enc.pool(h, mask, info)
    assert M.shape == (2, enc.pool_dim) and enc.pool_dim == 2 * 4
    for b, (A_ref, M_ref, _) in enumerate(refs):
        assert_close(A[b], A_ref)
        assert_close(M[b], M_ref.flatten())  # rows of M = A H, concatenated
    expected = 0.7 * sum(P for _, _, P in refs) / 2  # coefficient * batch mean of per-sentence P
    assert info["loss"].item() == pytest.approx(expected, rel=1e-12)


def test_selfatt1_bilstm_halves_are_the_two_directions():
    """h = [forward; backward] states: the forward half of token 0 sees token 0 only, the backward
    half of the last real token sees that token only."""
    enc = _selfatt1()
    x = torch.randn(1, 3, 3)
    h, _ = enc(x, _mask([3], 3))
    h_first, _ = enc(x[:, :1], _mask([1], 1))
    h_last, _ = enc(x[:, 2:], _mask([1], 1))
    assert_close(h[0, 0, :2], h_first[0, 0, :2])
    assert_close(h[0, 2, 2:], h_last[0, 0, 2:])


def test_penalty_zero_for_orthogonal_one_hot_rows_positive_otherwise():
    one_hot = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]])
    assert annotation_penalty(one_hot).item() == 0.0
    same = torch.tensor([[[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]])
    assert annotation_penalty(same).item() == pytest.approx(2.0)  # the two off-diagonal ones
    spread = torch.tensor([[[0.5, 0.5], [0.5, 0.5]]])
    # A A^T - I = [[-.5, .5], [.5, -.5]]: four entries of 0.25
    assert annotation_penalty(spread).item() == pytest.approx(1.0)


def _padded_and_alone(enc):
    """``enc`` on a padded batch (row 0: 3 real tokens of 6) and on row 0 alone; the states of row 0
    must agree and be zero at its padding."""
    x = torch.randn(2, 6, 3)
    mask = _mask([3, 6], 6)
    h, info = enc(x, mask)
    h_alone, info_alone = enc(x[:1, :3], _mask([3], 3))
    assert_close(h[0, :3], h_alone[0])
    assert torch.all(h[0, 3:] == 0)
    return x, mask, h, info, h_alone, info_alone


def test_selfatt1_padding_invariance_and_masked_attention():
    enc = _selfatt1()
    x, mask, h, info, h_alone, info_alone = _padded_and_alone(enc)
    A = info["alphas"][0]
    assert_close(A[0, :, :3], info_alone["alphas"][0][0])
    assert torch.all(A[0, :, 3:] == 0)  # padded tokens get exactly zero attention
    assert_close(A.sum(-1), torch.ones(2, 2))
    assert_close(enc.pool(h, mask, info)[0], enc.pool(h_alone, _mask([3], 3), info_alone)[0])
    assert_close(annotation_penalty(A)[0], annotation_penalty(info_alone["alphas"][0])[0])


def test_selfatt1_empty_sentence_is_finite_and_zero():
    enc = _selfatt1()
    mask = _mask([0, 2], 3)
    h, info = enc(torch.randn(2, 3, 3), mask)
    assert torch.all(h[0] == 0) and torch.all(info["alphas"][0][0] == 0)
    assert torch.isfinite(info["loss"])


def test_selfatt1_gradients_match_finite_differences():
    enc = _selfatt1().double()
    x = torch.randn(2, 4, 3, dtype=torch.float64)
    mask = _mask([4, 2], 4)

    def loss():
        h, info = enc(x, mask)
        return enc.pool(h, mask, info).pow(2).sum() + info["loss"]

    assert_gradients_match_finite_differences(enc, loss)


def test_selfatt1_init_as_documented():
    torch.manual_seed(0)
    enc = StructuredSelfAttention(in_dim=50, hidden=100, hops=3, att_hidden=20, penalty=0.0)
    for name, p in enc.lstm.named_parameters():
        if name.startswith("bias"):
            assert torch.all(p == 0), name
        else:
            assert abs(p.mean().item()) < 0.01 and p.std().item() == pytest.approx(0.1, rel=0.05), name
    for lin in (enc.attention.ws1, enc.attention.ws2):
        assert lin.bias is None
        fan_out, fan_in = lin.weight.shape
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        assert lin.weight.abs().max() <= bound and lin.weight.abs().max() > 0.8 * bound


def test_selfatt1_from_the_registry():
    spec = get_spec("selfatt1")
    assert spec.levels == LEVELS and not spec.needs_trees and not spec.uses_attrs
    enc = build_encoder("selfatt1", EncoderArgs(in_dim=5, d=6, dropout=0.2,
                                                selfatt=SelfAttOptions(hops=3, att_hidden=7, penalty=0.5)))
    assert isinstance(enc, StructuredSelfAttention)
    assert enc.out_dim == 6 and enc.pool_dim == 18 and enc.penalty == 0.5
    assert enc.attention.ws1.weight.shape == (7, 6) and enc.attention.ws2.weight.shape == (3, 7)
    assert enc.lstm.hidden_size == 3 and enc.lstm.bidirectional
    enc.eval()
    h, info = enc(torch.randn(2, 4, 5), _mask([4, 1], 4))
    assert h.shape == (2, 4, 6) and info["alphas"][0].shape == (2, 3, 4) and info["loss"].dim() == 0
    no_penalty = build_encoder("selfatt1", EncoderArgs(in_dim=5, d=6, selfatt=SelfAttOptions(penalty=0.0)))
    assert "loss" not in no_penalty(torch.randn(1, 2, 5), _mask([2], 2))[1]
    with pytest.raises(ConfigError):
        build_encoder("selfatt1", EncoderArgs(in_dim=5, d=7))


# ----------------------------------------------------------------------------- selfatt2 (Cheng et al.)

def _lstmn_reference(enc: LSTMN, x: torch.Tensor):
    """h_t and s^t of one sentence, step by step and slot by slot. x (N, in_dim)."""
    Wh, Wx, Wt, v = enc.w_h.weight, enc.w_x.weight, enc.w_summary.weight, enc.v.weight[0]
    W = torch.cat([enc.gates_h.weight, enc.gates_x.weight], dim=1)  # W acting on [h~_t; x_t]
    bias = enc.gates_x.bias
    d = enc.hidden
    n = x.shape[0]
    hs, cs, S = [], [], torch.zeros(n, n)
    h_sum, c_sum = torch.zeros(d), torch.zeros(d)
    for t in range(n):
        if t > 0:
            a = [(v @ torch.tanh(Wh @ hs[i] + Wx @ x[t] + Wt @ h_sum)).item() for i in range(t)]
            z = sum(math.exp(ai) for ai in a)
            s = [math.exp(ai) / z for ai in a]
            h_sum = sum(s[i] * hs[i] for i in range(t))
            c_sum = sum(s[i] * cs[i] for i in range(t))
            S[t, :t] = torch.tensor(s)
        pre = W @ torch.cat([h_sum, x[t]]) + bias
        c, h = torch.zeros(d), torch.zeros(d)
        for k in range(d):
            i_g, f_g, o_g = _sigmoid(pre[k].item()), _sigmoid(pre[d + k].item()), _sigmoid(pre[2 * d + k].item())
            c_hat = math.tanh(pre[3 * d + k].item())
            c[k] = f_g * c_sum[k].item() + i_g * c_hat
            h[k] = o_g * math.tanh(c[k].item())
        hs.append(h)
        cs.append(c)
    return torch.stack(hs), S


def _lstmn(**kw) -> LSTMN:
    torch.manual_seed(0)
    args = dict(in_dim=3, hidden=4)
    args.update(kw)
    return LSTMN(**args).eval()


def test_lstmn_literal_four_tokens():
    enc = _lstmn()
    x = torch.randn(1, 4, 3)
    h, info = enc(x, _mask([4], 4))
    h_ref, S_ref = _lstmn_reference(enc, x[0])
    assert_close(h[0], h_ref)
    assert_close(info["alphas"][0][0], S_ref)


def test_lstmn_padding_invariance_and_zero_padding():
    enc = _lstmn()
    x, mask, h, info, h_alone, info_alone = _padded_and_alone(enc)
    S = info["alphas"][0]
    assert_close(S[0, :3, :3], info_alone["alphas"][0][0])
    assert torch.all(S[0, 3:] == 0) and torch.all(S[0, :, 3:] == 0)
    h_ref, _ = _lstmn_reference(enc, x[1])  # the full row: the batched loop handles it like one sentence
    assert_close(h[1], h_ref)


def test_lstmn_attention_rows_over_previous_steps():
    enc = _lstmn()
    _, info = enc(torch.randn(2, 5, 3), _mask([5, 4], 5))
    S = info["alphas"][0]
    assert S.shape == (2, 5, 5)
    assert torch.all(S[:, 0] == 0)  # row 0: no previous step
    assert torch.all(torch.triu(S) == 0)  # s^t lives on i < t only
    assert_close(S[0, 1:].sum(-1), torch.ones(4))
    assert_close(S[1, 1:4].sum(-1), torch.ones(3))
    assert torch.all(S[1, 4] == 0)


def test_lstmn_empty_sentence_is_finite_and_zero():
    h, info = _lstmn()(torch.randn(2, 3, 3), _mask([0, 3], 3))
    assert torch.all(h[0] == 0) and torch.all(info["alphas"][0][0] == 0) and torch.isfinite(h).all()


def test_lstmn_gradients_match_finite_differences():
    enc = _lstmn().double()
    x, mask = torch.randn(2, 4, 3, dtype=torch.float64), _mask([4, 3], 4)
    assert_gradients_match_finite_differences(enc, lambda: enc(x, mask)[0].pow(2).sum())


def test_lstmn_dropout_only_in_training():
    enc = _lstmn(dropout=0.5)
    x, mask = torch.randn(1, 4, 3), _mask([4], 4)
    assert_close(enc(x, mask)[0], enc(x, mask)[0])
    enc.train()
    torch.manual_seed(3)
    assert not torch.allclose(enc(x, mask)[0], enc.eval()(x, mask)[0])


def test_lstmn_init_as_documented():
    torch.manual_seed(0)
    enc = LSTMN(in_dim=10, hidden=25)
    bound = 1.0 / math.sqrt(25)
    for name, p in enc.named_parameters():
        assert p.abs().max() <= bound and p.abs().max() > 0.8 * bound, name


def test_lstmn_from_the_registry():
    spec = get_spec("selfatt2")
    assert spec.levels == LEVELS and not spec.needs_trees and not spec.uses_attrs
    enc = build_encoder("selfatt2", EncoderArgs(in_dim=5, d=6, dropout=0.3))
    assert isinstance(enc, LSTMN) and enc.out_dim == 6 and enc.dropout == 0.3
    h, info = enc.eval()(torch.randn(2, 4, 5), _mask([4, 2], 4))
    assert h.shape == (2, 4, 6) and info["alphas"][0].shape == (2, 4, 4)


def test_transformer_sees_words_at_the_scale_of_its_positions():
    """Sentence inputs (random words in U(-0.1, 0.1), or GloVe's) are normalised before the sinusoidal
    positions are added, as Vaswani et al.'s sqrt(d) scaling intends: the output does not depend on
    the input's scale, so small random word vectors are not drowned by the positions."""
    from cn3.encoders.san import SelfAttentionEncoder

    torch.manual_seed(0)
    enc = SelfAttentionEncoder(in_dim=6, d=8, layers=2, heads=2, ff=16, positions=True).eval()
    x, mask = torch.randn(2, 5, 6), torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    h, _ = enc(x, mask)
    for scale in (0.2, 20.0):  # the same up to LayerNorm's eps
        assert torch.allclose(enc(x * scale, mask)[0], h, atol=1e-3)
    plain = SelfAttentionEncoder(in_dim=6, d=8, layers=2, heads=2, ff=16, positions=False).eval()
    assert plain.input_norm is None  # translation: embeddings arrive scaled and with their positions
