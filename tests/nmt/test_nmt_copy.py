"""End to end learning check: a tiny model learns to copy random token sequences in a few hundred steps."""

from __future__ import annotations

import pytest
import torch

from cn3.config import from_dict
from cn3.nmt.config import NMTModelConfig
from cn3.nmt.data import BOS, EOS, pad
from cn3.nmt.search import greedy_search
from cn3.nmt.task import learning_rate
from cn3.nmt.transformer import ModelArgs, Seq2Seq
from cn3.train.optim import make_optimizer

# slow: tiny translation models trained to copy (`pytest -m "not slow"` is the quick loop)
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.slow]


def copy_batch(g: torch.Generator, rows: int, vocab: int):
    seqs = [torch.randint(4, vocab, (int(torch.randint(2, 7, (1,), generator=g)),), generator=g).tolist()
            for _ in range(rows)]
    return seqs, pad([s + [EOS] for s in seqs]), pad([[BOS] + s for s in seqs]), pad([s + [EOS] for s in seqs])


@pytest.mark.parametrize("encoder", ["hybrid", "onlstm_san"])
def test_tiny_model_learns_to_copy(encoder):
    torch.manual_seed(0)
    vocab = 14
    cfg = from_dict(NMTModelConfig, {"encoder": encoder, "d_model": 32, "heads": 2, "ff": 64, "encoder_layers": 2,
                                     "decoder_layers": 1, "dropout": 0.0, "attention_dropout": 0.0,
                                     "rnn": {"layers": 1, "chunk_size": 4}, "hybrid": {"layers": 1}})
    model = Seq2Seq(cfg, ModelArgs(vocab, vocab))
    optimizer = make_optimizer(model, "adam", 3e-3, betas=(0.9, 0.98), eps=1e-9)
    g = torch.Generator().manual_seed(1)
    model.train()
    for step in range(1, 351):
        _, src, tgt_in, tgt_out = copy_batch(g, 32, vocab)
        loss, _ = model.loss(model(src, tgt_in), tgt_out, smoothing=0.0)
        optimizer.zero_grad()
        (loss / (tgt_out != 0).sum()).backward()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, 3e-3, 50)
        optimizer.step()
    seqs, src, _, _ = copy_batch(torch.Generator().manual_seed(99), 100, vocab)
    out = greedy_search(model, src)
    exact = sum(o == s for o, s in zip(out, seqs)) / len(seqs)
    assert exact >= 0.9, f"copied {exact:.0%} exactly"
