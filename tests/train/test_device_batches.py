"""``train.device_batches``: the training split padded once and gathered on the device gives the
batches :func:`cn3.sentence.batching.make_batch` builds, value for value, and the same training."""

from __future__ import annotations

import random
from dataclasses import fields

import pytest
import torch

from cn3.sentence.batching import DeviceBatches, SideBatch, make_batch
from cn3.train.config import LoopConfig
from data_prep.dataset import load_prepared
from data_prep.prepare import PrepareSettings, prepare

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("task, annotator", [("trec", "none"), ("sick", "none"), ("ptb_pos", "gold")])
def test_device_batches_equal_make_batch(task, annotator, data_root, tmp_path):
    """Sentences, pairs (two sides of their own widths), tags with trees (``edge_type``)."""
    out = tmp_path / task
    prepare(PrepareSettings(task=task, data=data_root, out=out, annotator=annotator))
    train = load_prepared(out).splits["train"].spread(600)
    gathered = DeviceBatches(train, torch.device("cpu"))
    assert 0 < sum(t.numel() * t.element_size() for t in gathered.tensors()) <= DeviceBatches.nbytes(train)
    rng = random.Random(0)
    for size in (1, 5, 32, 32, 32):
        indices = rng.sample(range(len(train)), size)
        expected, got = make_batch(train, indices), gathered(indices)
        assert torch.equal(got.y, expected.y) and torch.equal(got.index, expected.index)
        for side in ("a", "b"):
            e, g = getattr(expected, side), getattr(got, side)
            assert (e is None) == (g is None)
            for name in [f.name for f in fields(SideBatch)] if e is not None else []:
                x, y = getattr(e, name), getattr(g, name)
                assert (x is None) == (y is None), name
                if x is not None:
                    assert x.dtype == y.dtype and torch.equal(x, y), (side, name)
    if annotator == "gold":
        assert got.a.edge_type is not None


def test_device_batches_default_on_cuda_within_the_budget():
    t, cuda, cpu = LoopConfig(), torch.device("cuda"), torch.device("cpu")
    assert t.use_device_batches(cuda, 2**20) and not t.use_device_batches(cuda, 2**40)
    assert not t.use_device_batches(cpu, 2**20)
    t.device_batches = True
    assert t.use_device_batches(cpu, 2**40)
    t.device_batches = False
    assert not t.use_device_batches(cuda, 2**20)


def test_training_with_device_batches_is_the_same_training(data_root, tmp_path):
    from cn3.kinds import train
    from cn3.sentence.resolve import resolve_config
    from cn3.train.checkpoints import load_checkpoint
    from tests.train.test_trainer import TINY

    out = tmp_path / "trec"
    prepare(PrepareSettings(task="trec", data=data_root, out=out, annotator="none"))
    for flag in ("false", "true"):
        cfg = resolve_config("trec", None, {"data.prepared": out},
                             [*TINY, "train.num_threads=1", "data.limit=200", "train.epochs=1", "train.batch_size=16",
                              f"train.device_batches={flag}"])
        train(cfg, tmp_path / flag, device_name="cpu")
    a, b = (load_checkpoint(tmp_path / flag / "latest.pt")["model"] for flag in ("false", "true"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert "batches gathered on the device" in (tmp_path / "true" / "log.txt").read_text()
