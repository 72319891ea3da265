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
