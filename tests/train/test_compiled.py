"""``train.compile``: the compiled training forward against the eager reference on the CPU.

The compiled loss and gradients equal the eager ones to rounding for every encoder of the registry at
every level it serves (one encoder in the quick suite, the sweep marked slow: seconds a case on the
shortest items, 41 cases); padding positions up to a bucket changes no score; compilations stay
bounded by the buckets (dynamo's counters).
"""

from __future__ import annotations

import os

import pytest
import torch
from torch._dynamo.utils import counters

from cn3.config import ConfigError
from cn3.encoders.registry import ENCODERS
from cn3.sentence.batching import make_batch
from cn3.sentence.resolve import resolve_config
from cn3.sentence.task import SentenceTask
from cn3.train.compiled import LENGTH_BUCKETS, CompiledForward, bucket_length, recompile_limit, use_compile
from data_prep.dataset import load_prepared
from data_prep.prepare import PrepareSettings, prepare
from tests.train.test_trainer import TINY

pytestmark = pytest.mark.usefixtures("one_thread")
CPU = torch.device("cpu")
#: a task per level: sentences, pairs, tags (gold trees, for the encoders that read them)
LEVEL_TASKS = {"graph": ("trec", "none"), "pair": ("sick", "none"), "node": ("ptb_pos", "gold")}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, data_root):
    base = tmp_path_factory.mktemp("prepared")

    def get(level: str):
        task, annotator = LEVEL_TASKS[level]
        out = base / task
        if not out.exists():
            prepare(PrepareSettings(task=task, data=data_root, out=out, annotator=annotator))
        return task, out

    return get


def _task(prepared, level: str, encoder: str, extra=()) -> SentenceTask:
    task, out = prepared(level)
    depth = ["model.graph_layers=2"] if encoder.endswith("_san") else []  # recurrent layers under attention
    cfg = resolve_config(task, None, {"data.prepared": out},
                         [*TINY, "train.num_threads=1", f"model.encoder={encoder}", "model.dropout=0.0",
                          "model.attention_dropout=0.0", "model.word_dropout=0.0", *depth, *extra])
    ds = load_prepared(out)
    ds.splits = {name: split.spread(300) for name, split in ds.splits.items()}
    return SentenceTask(cfg, ds, CPU, {})


def _loss_and_grads(task: SentenceTask, batch) -> tuple[torch.Tensor, list[torch.Tensor]]:
    torch.manual_seed(0)  # what draws random numbers (dropout left at 0 aside) draws the same
    task.model.zero_grad(set_to_none=True)
    loss = task.forward_backward(batch, len(batch))
    params = [p for p in task.model.parameters() if p.requires_grad]
    return loss, [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]


def _compiled_matches_eager(task: SentenceTask, batches: list, backend: str = "inductor") -> None:
    """Loss and gradients of each batch, compiled against eager (inductor drawing dropout masks as eager does)."""
    assert task.compiled is None  # auto is off on the CPU
    task.model.train()
    eager = [_loss_and_grads(task, b) for b in batches]
    task.compiled = CompiledForward(task._loss, CPU, recompile_limit(max(task.lengths)), backend=backend)
    graphs = counters["stats"]["unique_graphs"]
    with torch._inductor.config.patch(fallback_random=True):
        compiled = [_loss_and_grads(task, b) for b in batches]
    assert counters["stats"]["unique_graphs"] > graphs  # compiled, not fallen back to eager
    for (loss, grads), (ref_loss, ref_grads) in zip(compiled, eager, strict=True):
        torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-6)
        for g, r in zip(grads, ref_grads, strict=True):
            torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-5)


def test_bucket_boundaries():
    assert [bucket_length(n) for n in (0, 1, 8, 9, 17, 33, 100, 128, 129, 200)] == \
        [8, 8, 8, 16, 24, 48, 128, 128, 192, 256]
    assert recompile_limit(30) == 2 * 4 and recompile_limit(200) == 2 * (len(LENGTH_BUCKETS) + 2)


def test_compile_setting():
    cuda = torch.device("cuda")
    assert use_compile("auto", cuda) and not use_compile("auto", CPU)
    assert use_compile(True, CPU) and not use_compile(False, cuda)
    assert not use_compile("auto", cuda, "it cannot")
    with pytest.raises(ConfigError, match="train.compile=on: it cannot"):
        use_compile(True, cuda, "it cannot")


def test_compile_key_reads_on_off_auto_and_is_recorded(prepared):
    _, out = prepared("graph")
    for text, value in (("on", True), ("off", False), ("auto", "auto")):
        cfg = resolve_config("trec", None, {"data.prepared": out}, [f"train.compile={text}"])
        assert cfg.train.compile == value
    with pytest.raises(ConfigError, match="train.compile"):
        resolve_config("trec", None, {"data.prepared": out}, ["train.compile=fast"])
    with pytest.raises(ConfigError, match="adversarial"):
        _task(prepared, "graph", "nbow", ["train.compile=on", "train.adversarial=0.05"])


@pytest.mark.parametrize("level", ["graph", "pair", "node"])
def test_padding_to_a_bucket_changes_no_score(prepared, level):
    task = _task(prepared, level, "cn3")
    task.model.eval()
    batch = make_batch(task.train_set, list(range(20)))
    wider = batch.padded_to(bucket_length(batch.width()) + 8)
    assert wider.width() > batch.width()
    with torch.no_grad():
        out, out_wide = task.model(batch), task.model(wider)
    torch.testing.assert_close(out_wide.loss, out.loss, rtol=1e-5, atol=1e-6)
    n = batch.a.mask.shape[1]
    pred = out_wide.pred[:, :n] if level == "node" else out_wide.pred
    assert torch.equal(pred, out.pred)


def test_compiled_nbow_step_matches_eager_and_recompiles_per_bucket_only(prepared):
    """The quick case: one encoder, sentences, one batch; then lengths within its bucket and a second
    batch size compile one graph more at most."""
    task = _task(prepared, "graph", "nbow")
    by_bucket: dict[int, list[int]] = {}
    for i, n in enumerate(task.lengths):
        by_bucket.setdefault(bucket_length(n), []).append(i)
    _, items = max(by_bucket.items(), key=lambda kv: len(kv[1]))
    assert len({task.lengths[i] for i in items}) > 1  # lengths that differ within the bucket
    counters.clear()
    _compiled_matches_eager(task, [make_batch(task.train_set, items[:8])])
    assert counters["stats"]["unique_graphs"] == 1
    for rows in (items[-8:], items[:5], items[-5:], items[2:10]):  # other lengths, a second batch size
        task.forward_backward(make_batch(task.train_set, rows), len(rows))
    assert counters["stats"]["unique_graphs"] <= 2, dict(counters["stats"])


SWEEP = [(name, level) for name, spec in ENCODERS.items() for level in LEVEL_TASKS
         if level in spec.levels and (level == "node" or not spec.needs_trees)]


@pytest.mark.slow
@pytest.mark.parametrize("encoder, level", SWEEP)
def test_compiled_step_matches_eager_for_every_encoder(prepared, encoder, level):
    """Every encoder at every level through dynamo and AOTAutograd (the graphs the compiled step
    traces, its backward included), without inductor's code generation (which takes tens of seconds a
    model on the CPU: the inductor sweep is opt-in, ``CN3_INDUCTOR_SWEEP=1``)."""
    task = _task(prepared, level, encoder)
    _compiled_matches_eager(task, [make_batch(task.train_set, _short_rows(task))], backend="aot_eager")


def _short_rows(task: SentenceTask, n: int = 12) -> list[int]:
    """The ``n`` shortest training items of two words or more, at several lengths (so masks matter):
    dynamo unrolls pytorch-crf's loop over positions, so tagging cases cost time in the batch's width."""
    rows = sorted((i for i, length in enumerate(task.lengths) if length >= 2), key=task.lengths.__getitem__)[:n]
    assert len({task.lengths[i] for i in rows}) > 1
    return rows


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("CN3_INDUCTOR_SWEEP") != "1",
                    reason="inductor for every encoder: about 40 minutes on 2 CPU cores (CN3_INDUCTOR_SWEEP=1)")
@pytest.mark.parametrize("encoder, level", SWEEP)
def test_inductor_step_matches_eager_for_every_encoder(prepared, encoder, level):
    task = _task(prepared, level, encoder)
    _compiled_matches_eager(task, [make_batch(task.train_set, list(range(i, i + 12))) for i in (0, 40)])
