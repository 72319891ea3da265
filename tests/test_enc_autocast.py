"""Every encoder of the zoo runs forward and backward under ``torch.autocast`` (bf16 on CPU): the
mixed-precision path of the scale-out work starts from here. (The CN3 layer's gradients are
checked against fp32 in tests/test_dynamic_graph.py.)"""

from __future__ import annotations

import pytest
import torch

from cn3.encoders import ENCODERS, build_encoder
from cn3.encoders.registry import EncoderArgs
from tests.references import chain_tree

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("name", list(ENCODERS))
def test_encoder_forward_and_backward_under_bf16_autocast(name):
    torch.manual_seed(0)
    batch, n, dim = 3, 9, 32
    encoder = build_encoder(name, EncoderArgs(in_dim=dim, d=dim, layers=2, heads=2, ff=64, dropout=0.0,
                                              attention_dropout=0.0, level="graph", n_edge_types=5))
    x = torch.randn(batch, n, dim, requires_grad=True)
    mask = torch.ones(batch, n, dtype=torch.bool)
    mask[0, 6:] = False
    extra = {"edge_type": chain_tree(batch, n)} if ENCODERS[name].needs_trees else {}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h, info = encoder(x, mask, **extra)
        # Lin et al.'s annotation matrix (selfatt1) lives in the encoder's own pooling
        pooled = encoder.pool(h, mask, info) if hasattr(encoder, "pool") else h
    (pooled.float().sum() + info.get("loss", 0.0)).backward()
    assert h.shape[:2] == (batch, n)
    grads = [p.grad for p in encoder.parameters() if p.requires_grad]
    assert all(g is not None and g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads), name
    assert torch.isfinite(x.grad).all()


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
    from cn3.runtime import slow_precision_note

    cpu = torch.device("cpu")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    assert "AVX2" in slow_precision_note("bf16", cpu) and "fp32" in slow_precision_note("bf16", cpu)
    assert slow_precision_note("fp32", cpu) is None
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    assert slow_precision_note("bf16", cpu) is None
