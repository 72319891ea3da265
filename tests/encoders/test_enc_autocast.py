"""Every encoder of the zoo under ``torch.autocast`` (bf16 on CPU) computes, forward and backward, what
it computes in fp32, to bf16's precision: the mixed-precision path of the scale-out work starts from here.
(The CN3 layer's gradients are checked against fp32 in tests/layers/test_dynamic_graph.py.)"""

from __future__ import annotations

import pytest
import torch

from cn3.encoders import ENCODERS, build_encoder
from cn3.encoders.registry import EncoderArgs
from tests.references import chain_tree

pytestmark = pytest.mark.usefixtures("one_thread")


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a.flatten().double(), b.flatten().double(), dim=0))


@pytest.mark.parametrize("name", list(ENCODERS))
def test_encoder_under_bf16_autocast_computes_what_fp32_computes(name):
    """Under autocast (bf16 on CPU) each encoder's output and every gradient are the fp32 ones to bf16's
    precision (8 bits of mantissa: a cosine above 0.99 for vectors, not a bit-exact match), the gradients
    land in the fp32 weights, and the padded item's rows stay what they are in fp32."""
    torch.manual_seed(0)
    batch, n, dim = 3, 9, 32
    encoder = build_encoder(name, EncoderArgs(in_dim=dim, d=dim, layers=2, heads=2, ff=64, dropout=0.0,
                                              attention_dropout=0.0, level="graph", n_edge_types=5))
    x = torch.randn(batch, n, dim)
    mask = torch.ones(batch, n, dtype=torch.bool)
    mask[0, 6:] = False
    extra = {"edge_type": chain_tree(batch, n)} if ENCODERS[name].needs_trees else {}

    def forward_backward(autocast: bool):
        encoder.zero_grad(set_to_none=True)
        inputs = x.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            h, info = encoder(inputs, mask, **extra)
            # Lin et al.'s annotation matrix (selfatt1) lives in the encoder's own pooling
            pooled = encoder.pool(h, mask, info) if hasattr(encoder, "pool") else h
        # a fixed random projection: the plain sum's gradient through a softmax is ~0, all rounding
        weight = torch.randn(pooled.shape, generator=torch.Generator().manual_seed(1))
        ((pooled.float() * weight).sum() + info.get("loss", 0.0)).backward()
        grads = {k: p.grad.clone() for k, p in encoder.named_parameters() if p.requires_grad}
        return pooled.float().detach(), inputs.grad, grads

    pooled32, x_grad32, grads32 = forward_backward(False)
    pooled16, x_grad16, grads16 = forward_backward(True)
    assert _cosine(pooled16, pooled32) > 0.99, name
    assert torch.isfinite(x_grad16).all() and _cosine(x_grad16, x_grad32) > 0.99, name
    assert all(g.dtype == torch.float32 for g in grads16.values()), name
    if not grads32:  # nbow: nothing to train
        return
    every16, every32 = (torch.cat([g.flatten() for g in gs.values()]) for gs in (grads16, grads32))
    assert _cosine(every16, every32) > 0.99, name
    largest = max(g.norm() for g in grads32.values())
    for k, g in grads16.items():  # each parameter whose gradient is not lost in bf16's rounding of the rest
        if grads32[k].norm() > 1e-2 * largest:
            assert _cosine(g, grads32[k]) > 0.95, (name, k, _cosine(g, grads32[k]))


def test_the_probe_tells_whether_onednn_runs_a_bf16_lstm_here():
    from cn3.layers.lstm import cpu_bf16_lstm_supported

    plain = torch.nn.LSTM(4, 3)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            plain(torch.randn(5, 2, 4))
        runs = True
    except RuntimeError:  # AVX2-only CPUs: "could not create a primitive descriptor for the LSTM ..."
        runs = False
    assert cpu_bf16_lstm_supported() is runs


def test_the_probe_leaves_the_random_stream_alone():
    """It runs at a model's first bf16 forward: drawing from the global generator there would shift
    the dropout masks after it, and a resumed run (which probes again) would differ from a straight one."""
    from cn3.layers.lstm import cpu_bf16_lstm_supported

    cpu_bf16_lstm_supported.cache_clear()
    before = torch.random.get_rng_state()
    cpu_bf16_lstm_supported()
    assert torch.equal(torch.random.get_rng_state(), before)


@pytest.mark.parametrize("packed", [False, True])
def test_lstm_without_a_bf16_kernel_runs_in_float32_under_autocast(monkeypatch, packed):
    from torch.nn.utils.rnn import pack_padded_sequence

    from cn3.layers import lstm as lstm_module

    monkeypatch.setattr(lstm_module, "cpu_bf16_lstm_supported", lambda: False)
    torch.manual_seed(0)
    layer = lstm_module.LSTM(4, 3, batch_first=True, bidirectional=True)
    reference = torch.nn.LSTM(4, 3, batch_first=True, bidirectional=True)
    reference.load_state_dict(layer.state_dict())  # same parameters and keys as nn.LSTM
    x = torch.randn(2, 5, 4)
    hx = (torch.randn(2, 2, 3), torch.randn(2, 2, 3))

    def run(module, inputs, state):
        if packed:
            inputs = pack_padded_sequence(inputs, torch.tensor([5, 3]), batch_first=True)
        out, (h, c) = module(inputs, state)
        return (out.data if packed else out), h, c

    x16, hx16 = x.bfloat16(), tuple(t.bfloat16() for t in hx)  # what a bf16 layer below hands it
    expected = run(reference, x16.float(), tuple(t.float() for t in hx16))  # float32 on the same values
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = run(layer, x16, hx16)
    for g, e in zip(got, expected):
        assert g.dtype == torch.float32
        torch.testing.assert_close(g, e, rtol=0, atol=0)


def test_bf16_on_a_cpu_without_native_bf16_is_flagged(monkeypatch):
    from cn3.train.runtime import slow_precision_note

    cpu = torch.device("cpu")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    assert "AVX2" in slow_precision_note("bf16", cpu) and "fp32" in slow_precision_note("bf16", cpu)
    assert slow_precision_note("fp32", cpu) is None
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    assert slow_precision_note("bf16", cpu) is None
