"""The training loop waits for the device only at log lines and evaluations, not at every update.

On CUDA, copying a tensor's value to the host (``.item()``, ``bool(t)``, ``.tolist()``, ...) waits
for every kernel queued before it, and so does a blocking host-to-device copy (``.to(device)``
without ``non_blocking``, ``torch.tensor(data, device=...)``). One such wait per update keeps the
GPU idle while Python prepares the next one. These tests train tiny runs (a sentence task with the
weight average, the adversarial loss and the fp16 loss scaler; a translation task) on CPU and count
those calls per update.

How the counting tells device tensors from host ones on a CPU run: :class:`DeviceCalls` is a
``TorchFunctionMode`` that follows the tensors a CUDA run would keep on the device: the model's
and the weight average's parameters and buffers, whatever ``.to(device)`` returns (the batch),
tensors created with ``device=`` a ``torch.device`` (not ``"cpu"``, how torch's optimizers keep
their step counts on the host) and every result of an operation on one of those (losses,
gradients read through ``.grad``, optimizer state, norms). It counts

* reads: ``item``, ``tolist``, ``__bool__``, ``__float__``, ``__int__``, ``__index__``, ``cpu``,
  ``numpy`` on such a tensor;
* blocking uploads: ``.to(device)`` of a host tensor without ``non_blocking=True``, and
  ``torch.tensor``/``torch.as_tensor`` with a ``device``.

Reads of tensors built on the host (the bucketed batch order from ``torch.randperm``, the CPU
batch's lengths) are not device syncs and are not counted; nor is anything during collation
(``adapter.collate``), which runs on the host, in the batch loader's workers on CUDA. Under
``train.device_batches`` collation gathers from the split padded on the device
(:class:`cn3.sentence.batching.DeviceBatches`): its tensors count as device tensors and collation is watched
like the rest of the update. An update runs from
one ``optimizer.zero_grad`` to the next, so the log line, evaluation and checkpoint that follow an
update count towards it. Evaluation and the final report read predictions by design and are not
counted. The counting sees the calls made by Python code (the loop, the trainers, the models'
``forward``, torch's optimizers and scaler), not those inside one torch operator.

The models: CN3 with the CNN context, and with the BiLSTM context on the padded path a CUDA run takes
(:func:`cn3.layers.packed.run_packed`; packing, the CPU eager default, reads the lengths on the host
once per recurrent layer and update); a Transformer encoder; then every encoder family a sentence
task offers (the registry) and CN3 with the character BiLSTM, on the path a CUDA run takes (the
recurrent layers padded, the ON-LSTM masking every step: :func:`cn3.layers.onlstm.padding_start`).
Each is asserted free of waits outside log lines, or named in :data:`HOST_READS` with its reason
(the Tree-LSTM and the syntactic GCN, which check their trees on the device); the tagging task the
tree encoders train on adds its CRF head's mask checks (:data:`CRF_HEAD`). The Triton ON-LSTM (CUDA
only) reads its barrier flag once per launch configuration, not per step
(:func:`cn3.layers.onlstm_triton._run_split`).

On CUDA, :func:`test_a_cuda_step_never_waits` runs training steps under
``torch.cuda.set_sync_debug_mode("error")``, which raises at any synchronising call.
"""

from __future__ import annotations

import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import torch
import torchcrf
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves
from torch.utils.weak import WeakIdKeyDictionary

import cn3.layers.packed
import cn3.sentence.heads
import cn3.train.trainer
from cn3.encoders.registry import get_spec
from cn3.kinds import train
from cn3.nmt.config import resolve_nmt_config
from cn3.nmt.data import absolutize
from cn3.sentence.resolve import resolve_config
from cn3.util.encoder_names import SENTENCE_LEVELS, encoder_levels
from data_prep.prepare import PrepareSettings, prepare
from tests.nmt.test_nmt_cli import TINY as NMT_TINY
from tests.nmt.test_nmt_cli import corpus
from tests.train.test_trainer import TINY

READS = {torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__bool__, torch.Tensor.__float__,
         torch.Tensor.__int__, torch.Tensor.__index__, torch.Tensor.cpu, torch.Tensor.numpy}
UPLOADS = {torch.tensor, torch.as_tensor}
TORCH = str(Path(torch.__file__).parent)
#: torch's GradScaler.step reads its inf/NaN check once per update (unless the optimizer is fused):
#: torch's own wait, tolerated in fp16 runs
SCALER = str(Path(TORCH) / "amp" / "grad_scaler.py")

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def no_display_refresh(monkeypatch):
    """Without a terminal the progress display re-reads the loss at the pace of its plain lines
    (cn3.train.monitor.loss_due); keep those out of these short runs, so every read counted is the
    loop's own."""
    monkeypatch.setattr("cn3.util.console.LOG_INTERVAL", math.inf)


@pytest.fixture(scope="module")
def trec(tmp_path_factory, data_root) -> Path:
    """TREC prepared once for the module (no annotator, no vectors)."""
    out = tmp_path_factory.mktemp("prepared") / "trec"
    prepare(PrepareSettings(task="trec", data=data_root, out=out, annotator="none"))
    return out


def _names_device(value) -> bool:
    """A ``device`` argument that is the run's device: a ``torch.device`` (code meaning the host
    spells it ``"cpu"``, as torch's optimizers do for their step counts), or a CUDA name."""
    return isinstance(value, torch.device) or (isinstance(value, str) and value.startswith("cuda"))


class DeviceCalls(TorchFunctionMode):
    """Counts the synchronising calls per update of one training loop (see the module docstring).

    ``calls[update]``: the ``(file, line)`` of each call made during that update (0: before the
    first); ``evaluated``: the updates after which an evaluation ran.
    """

    def __init__(self, trainer):
        super().__init__()
        adapter = trainer.task
        self.on_device = WeakIdKeyDictionary()
        modules = [adapter.model] + ([trainer.average.module] if trainer.average is not None else [])
        for module in modules:
            for tensor in (*module.parameters(), *module.buffers()):
                self.on_device[tensor] = True
        if adapter.device_collate:
            for tensor in adapter.collate.tensors():
                self.on_device[tensor] = True
        self.update, self.paused = 0, False
        self.calls: dict[int, list[tuple[str, int]]] = defaultdict(list)
        self.evaluated: set[int] = set()
        zero_grad, evaluate, report, collate = (adapter.optimizer.zero_grad, adapter.evaluate, adapter.final_results,
                                                adapter.collate)

        def next_update(*args, **kwargs):
            self.update += 1
            return zero_grad(*args, **kwargs)

        def unwatched(call, mark=False):
            def wrapper(*args, **kwargs):
                if mark:
                    self.evaluated.add(self.update)
                paused, self.paused = self.paused, True
                try:
                    return call(*args, **kwargs)
                finally:
                    self.paused = paused
            return wrapper

        adapter.optimizer.zero_grad = next_update
        adapter.evaluate, adapter.final_results = unwatched(evaluate, mark=True), unwatched(report)
        if not adapter.device_collate:
            adapter.collate = unwatched(collate)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.paused:
            return out
        inputs = [x for x in tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        device_input = any(x in self.on_device for x in inputs)
        moved = func is torch.Tensor.to and any(_names_device(x) for x in (*args[1:], kwargs.get("device")))
        created = _names_device(kwargs.get("device"))
        if (func in READS and device_input) or (func in UPLOADS and created) \
                or (moved and not device_input and not kwargs.get("non_blocking")):
            caller = sys._getframe(1)
            self.calls[self.update].append((caller.f_code.co_filename, caller.f_lineno))
        if device_input or moved or created:
            for x in tree_leaves(out):
                # an input returned as it is (an in-place operation, a grouping) keeps its own place
                if isinstance(x, torch.Tensor) and not any(x is i for i in inputs):
                    self.on_device[x] = True
        return out


def watch(monkeypatch) -> list[DeviceCalls]:
    """Instrument the next :meth:`Trainer.fit`; the list gets its counter."""
    counters: list[DeviceCalls] = []
    real = cn3.train.trainer.Trainer.fit

    def fit(trainer):
        counters.append(DeviceCalls(trainer))
        with counters[-1]:
            return real(trainer)

    monkeypatch.setattr(cn3.train.trainer.Trainer, "fit", fit)
    return counters


def check(calls: DeviceCalls, log_every: int, tolerated: str | None = None) -> None:
    """No synchronising call on an update without a log line or evaluation, and at most one (the
    running loss) on those with one. ``tolerated``: a file whose calls are counted apart, one on
    each quiet update (a checkpoint, at evaluations, adds its own)."""
    updates = range(1, calls.update + 1)
    logged = {u for u in updates if u % log_every == 0} | calls.evaluated
    quiet = [u for u in updates if u not in logged]
    assert len(quiet) >= 5 and calls.evaluated, (calls.update, calls.evaluated)
    for u in updates:
        ours = [c for c in calls.calls[u] if c[0] != tolerated]
        if tolerated is not None and u in quiet:
            assert len(calls.calls[u]) - len(ours) == 1, (u, calls.calls[u])
        allowed = 0 if u in quiet else 1
        assert len(ours) <= allowed, f"update {u} ({'quiet' if u in quiet else 'logged'}): {Counter(ours)}"


#: Encoder families whose training step reads the device by design: ``{family: (file, reason)}``. The
#: family test asserts that each does read there at every update (an entry whose reads are gone fails,
#: so the list cannot outlive its reason) and that nothing else reads.
HOST_READS = {
    "treelstm": ("cn3/encoders/treelstm.py", "checks each batch's trees (one head per word, one root per "
                 "sentence) and walks their levels deepest first: the depth and each level's words read on the "
                 "host, one read per level"),
    "pdgraph": ("cn3/encoders/pdgraph.py", "checks each batch's arc labels against its label count on the "
                "device (a ValueError naming the bound), one read per call"),
}
#: The tagging head's reads (the tree encoders train on UD POS tags, a tagging task, which the data
#: with gold trees serves): pytorch-crf asserts its mask's first step (``mask[0].all()``) in the loss and
#: :class:`cn3.sentence.heads.CRFHead` checks it with a message first. Reads of the head, not of an encoder.
CRF_HEAD = (str(Path(cn3.sentence.heads.__file__)), str(Path(torchcrf.__file__)))
#: Every encoder a sentence task offers (the registry, :mod:`cn3.util.encoder_names`), and CN3 with the
#: character BiLSTM (``model.char: lstm``) beside its default CNN-free attributes.
FAMILIES = [name for name, levels in encoder_levels().items() if set(levels) & set(SENTENCE_LEVELS)] + ["char-lstm"]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ud_gold(tmp_path_factory, data_root) -> Path:
    """UD POS with its gold trees, for the encoders that need trees."""
    out = tmp_path_factory.mktemp("prepared") / "ud_pos"
    prepare(PrepareSettings(task="ud_pos", data=data_root, out=out, annotator="gold"))
    return out


def test_the_families_are_the_registry_and_the_exceptions_are_among_them():
    assert {"cn3", "lstm", "transformer", "onlstm", "hybrid", "treelstm", "cnn", "nbow"} <= set(FAMILIES)
    assert set(HOST_READS) <= set(FAMILIES)
    assert all((REPO / file).is_file() for file, _ in HOST_READS.values())


@pytest.mark.slow  # one short training per family: about a minute in all
@pytest.mark.parametrize("family", FAMILIES)
def test_every_encoder_family_waits_only_to_log_or_is_a_named_exception(trec, ud_gold, tmp_path, monkeypatch, family):
    """Each family's updates on the path a CUDA run takes (padded recurrent layers, batches gathered on
    the device) wait for the device only to log, or read only where :data:`HOST_READS` says, at every
    update."""
    encoder, extra = ("cn3", ["model.char=lstm"]) if family == "char-lstm" else (family, [])
    if encoder.endswith("_san"):
        extra.append("model.graph_layers=2")  # recurrent layers under self-attention: at least one of each
    trees = get_spec(encoder).needs_trees
    monkeypatch.setattr("cn3.layers.packed.padded_by_default", lambda x: True)
    counters = watch(monkeypatch)
    cfg = resolve_config("ud_pos" if trees else "trec", None, {"data.prepared": ud_gold if trees else trec},
                         [*TINY, f"model.encoder={encoder}", *extra, "train.num_threads=1", "data.limit=120",
                          "train.epochs=1", "train.batch_size=16", "train.log_every=5", "train.device_batches=true"])
    train(cfg, tmp_path / "run", device_name="cpu")
    calls = counters[0]
    exception = str(REPO / HOST_READS[family][0]) if family in HOST_READS else None
    for u in range(1, calls.update + 1):
        if exception is not None:
            assert any(c[0] == exception for c in calls.calls[u]), (family, u, "no read: drop it from HOST_READS")
        calls.calls[u] = [c for c in calls.calls[u] if c[0] != exception and not (trees and c[0] in CRF_HEAD)]
    check(calls, log_every=5)


@pytest.mark.parametrize("ema, adversarial, precision, device_batches, context", [
    (0.0, 0.0, "fp32", False, "cnn"), (0.9, 0.05, "fp32", False, "cnn"), (0.0, 0.0, "fp16", False, "cnn"),
    (0.0, 0.0, "fp32", True, "cnn"), (0.0, 0.0, "fp32", True, "lstm")])
def test_sentence_updates_wait_for_the_device_only_to_log(trec, tmp_path, monkeypatch, ema, adversarial, precision,
                                                          device_batches, context):
    if precision == "fp16":  # the loss scaler's path on CPU (as tests/train/test_trainer.py's resume test)
        monkeypatch.setattr("cn3.train.runtime.FP16_DEVICE_TYPES", {"cuda", "cpu"})
    monkeypatch.setattr("cn3.layers.packed.padded_by_default", lambda x: True)  # the path a CUDA run takes
    counters = watch(monkeypatch)
    cfg = resolve_config("trec", None, {"data.prepared": trec},
                         [*TINY, f"model.context={context}", "train.num_threads=1", "data.limit=200", "train.epochs=2",
                          "train.batch_size=16", "train.log_every=5", f"train.ema={ema}",
                          f"train.adversarial={adversarial}", f"train.precision={precision}",
                          f"train.device_batches={str(device_batches).lower()}"])
    train(cfg, tmp_path / "run", device_name="cpu")
    check(counters[0], log_every=5, tolerated=SCALER if precision == "fp16" else None)


def test_translation_updates_wait_for_the_device_only_to_log(tmp_path, monkeypatch):
    src, tgt = corpus(tmp_path, "train", 120, seed=4)
    flags = {"model.encoder": "transformer", "data.corpus": "files", "data.train_src": src, "data.train_tgt": tgt}
    cfg = resolve_nmt_config(None, flags, [*NMT_TINY, "train.final_splits=[]", "train.max_tokens=120",
                                           "train.log_every=4", "train.clip=1.0", "train.num_threads=1"])
    absolutize(cfg)
    counters = watch(monkeypatch)
    train(cfg, tmp_path / "run", device_name="cpu")
    check(counters[0], log_every=4)


@pytest.mark.slow
def test_packing_reads_the_lengths_once_per_update(trec, tmp_path, monkeypatch):
    """The count the padded path removes: packing (the CPU eager default) reads the lengths on the host
    at every update, one read more than the loop's own."""
    monkeypatch.setattr("cn3.layers.packed.padded_by_default", lambda x: False)
    counters = watch(monkeypatch)
    cfg = resolve_config("trec", None, {"data.prepared": trec},
                         [*TINY, "train.num_threads=1", "data.limit=200", "train.epochs=1", "train.batch_size=16",
                          "train.log_every=5", "train.device_batches=true"])
    train(cfg, tmp_path / "run", device_name="cpu")
    calls = counters[0]
    packed = str(Path(cn3.layers.packed.__file__))
    for u in range(1, calls.update + 1):
        assert sum(c[0] == packed for c in calls.calls[u]) == 1, (u, calls.calls[u])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: set_sync_debug_mode watches CUDA syncs")
@pytest.mark.parametrize("compile_step", ["off", "on"])
def test_a_cuda_step_never_waits(trec, compile_step):
    """Updates of CN3 with its BiLSTM context on CUDA (batches gathered on the device) under
    ``set_sync_debug_mode("error")``: any wait for the device raises. The first updates, which set up
    cuDNN, cuBLAS and (compiled) the CUDA graphs, run before it is switched on."""
    from cn3.sentence.task import SentenceTask
    from data_prep.dataset import load_prepared

    cfg = resolve_config("trec", None, {"data.prepared": trec},
                         [*TINY, "train.device_batches=true", f"train.compile={compile_step}"])
    ds = load_prepared(trec)
    ds.splits = {name: split.spread(200) for name, split in ds.splits.items()}
    task = SentenceTask(cfg, ds, torch.device("cuda"), {})
    batches = [task.collate(indices) for indices in task.batches(0)[:6]]
    for batch in batches * 3:  # CUDA graphs: a warm-up run, the recording, a replay for each shape
        cn3.train.trainer.train_step(task, batch, len(batch), 1.0, 0.5, 5.0)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        total = sum(cn3.train.trainer.train_step(task, b, len(b), 1.0, 0.5, 5.0) for b in batches)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert math.isfinite(float(total))
