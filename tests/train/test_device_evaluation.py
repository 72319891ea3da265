"""Scoring a split keeps the batches' outputs on the device and copies them to the host once (not once
per batch or per item), and predicts what scoring each item alone predicts."""

from __future__ import annotations

import sys

import pytest
import torch
from torch.overrides import TorchFunctionMode

from cn3.sentence import inference
from cn3.sentence.batching import make_batch
from cn3.sentence.inference import predict, predict_with_probabilities, probabilities
from tests.train.test_compiled import _task, prepared  # noqa: F401 - the module's prepared-data fixture
from tests.train.test_host_sync import READS

pytestmark = pytest.mark.usefixtures("one_thread")


class HostCopies(TorchFunctionMode):
    """Counts the reads of a tensor's values (``cpu``, ``item``, ``tolist``, ``__int__``, ...) that
    :mod:`cn3.sentence.inference` makes itself: the copies a CUDA run would wait on (the batches are
    collated on the host, and the model's own reads are the model's)."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in READS and sys._getframe(1).f_code.co_filename == inference.__file__:
            self.calls += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("level", ["graph", pytest.param("node", marks=pytest.mark.slow)])
def test_split_predictions_equal_item_by_item_and_copy_once(prepared, level):  # noqa: F811
    task = _task(prepared, level, "cn3")
    model, dev = task.model.eval(), task.dev_set
    reads = []
    for batch_size in (64, 8):
        with HostCopies() as copies:
            preds, _ = predict(model, dev, torch.device("cpu"), batch_size=batch_size)
        reads.append(copies.calls)
    assert len(dev) > 64 and reads == [2, 2]  # whatever the number of batches: .cpu(), then .tolist() of the copy
    with HostCopies() as copies:
        preds2, probs = predict_with_probabilities(model, dev, torch.device("cpu"), batch_size=8)
    assert copies.calls == 4  # predictions and probabilities
    assert preds2 == preds
    with torch.no_grad():
        for i in range(0, len(dev), 7):  # each item scored alone, read the plain way
            batch = make_batch(dev, [i])
            out = model(batch, with_loss=False)
            p = probabilities(model, batch, out)[0]
            if level == "node":
                assert preds[i] == out.pred[0].tolist()
                torch.testing.assert_close(torch.tensor(probs[i]), p, rtol=0, atol=1e-6)
            else:
                assert preds[i] == int(out.pred[0])
                assert probs[i] == pytest.approx(p.tolist(), abs=1e-6)
