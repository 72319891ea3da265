"""Sentence tasks (classification, pairs, tagging) as a run kind of the trainer (:mod:`cn3.train.trainer`)."""

from __future__ import annotations

from functools import partial

import torch
from rich.table import Table

from cn3.config import ConfigError
from cn3.metrics import score
from cn3.runs.layout import RunDir
from cn3.sentence.batching import DeviceBatches, GraphBatch, item_lengths, make_batch
from cn3.sentence.config import RunConfig
from cn3.sentence.inference import evaluate_dataset, gold_and_predictions, load_model
from cn3.sentence.model import SentenceGraphModel, model_args_from_dataset
from cn3.sentence.prepared import prepared_path
from cn3.train.adversarial import EmbeddingAdversary
from cn3.train.bucketing import bucketed_batches, epoch_seed
from cn3.train.compiled import CompiledForward, bucket_length, recompile_limit, use_compile
from cn3.train.distributed import World
from cn3.train.kinds import SENTENCE_CHECKPOINT
from cn3.train.optim import make_optimizer
from cn3.train.runtime import autocast, make_scaler, seed_everything
from cn3.train.state import TrainState
from cn3.train.trainer import loss_for_backward, summed_loss
from cn3.util.atomic import atomic_write_json

#: the manifest entries a checkpoint keeps, so that the run is scored and used without its dataset
MANIFEST_KEYS = ("task", "level", "labels", "tag_scheme", "annotator", "fingerprint", "n_edge_types", "settings",
                 "embeddings")


class SentenceTask:
    """A sentence run's model, batches, loss and scoring (a :class:`cn3.train.trainer.RunTask`).

    Args:
        cfg: the resolved config.
        ds: the prepared dataset (:func:`data_prep.dataset.load_prepared`), with train and dev splits.
        device: where the model trains.
        vocab_dict: the dataset's vocabularies as plain dicts, saved in every checkpoint.
        command: the command line that started the run, for ``results.json``.
    """

    unit = "items"
    checkpoint_kind = SENTENCE_CHECKPOINT
    loss_reduction = "mean"  # the model's loss is a mean over the batch's items

    def __init__(self, cfg: RunConfig, ds, device: torch.device, vocab_dict: dict, command: str | None = None):
        t = cfg.train
        self.cfg, self.ds, self.device, self.vocab_dict, self.command = cfg, ds, device, vocab_dict, command
        seed_everything(t.seed)
        self.args = model_args_from_dataset(ds)
        self.model = SentenceGraphModel(cfg.model, self.args, ds.embeddings).to(device)
        no_compile = "the adversarial loss hooks the embeddings" if t.adversarial else None
        compiled = use_compile(t.compile, device, no_compile)
        self.optimizer = make_optimizer(self.model, t.optimizer, t.lr, t.weight_decay,
                                        fused=compiled and device.type == "cuda")
        self.ema_decay = t.ema
        self.scaler = make_scaler(t.precision, device)
        self.adversary = EmbeddingAdversary(self.model.nodes.word, t.adversarial) if t.adversarial else None
        self.train_set, self.dev_set = ds.splits["train"], ds.splits["dev"]
        self.lengths = item_lengths(self.train_set)
        self.device_collate = t.use_device_batches(device, DeviceBatches.nbytes(self.train_set))
        # the batch loader's collation; not a bound method, which would take the model to spawned workers
        self.collate = (DeviceBatches(self.train_set, device) if self.device_collate
                        else partial(make_batch, self.train_set))
        self.compiled = CompiledForward(self._loss, device, recompile_limit(max(self.lengths))) if compiled else None

    def batches(self, epoch: int) -> list:
        t = self.cfg.train
        return bucketed_batches(self.lengths, t.batch_size, shuffle=True, seed=epoch_seed(t.seed, epoch),
                                max_tokens=t.max_tokens or None)

    def count(self, indices) -> int:
        return len(indices)

    def _loss(self, batch: GraphBatch) -> torch.Tensor:
        """The training loss of ``batch`` (what ``train.compile`` compiles)."""
        with autocast(self.device, self.cfg.train.precision):
            return self.model(batch).loss

    def forward_backward(self, batch: GraphBatch, count: int, weight=1.0) -> torch.Tensor:
        batch = batch.to(self.device)
        if self.compiled is not None:  # static shapes: positions padded up to a bucket
            loss = self.compiled(batch.padded_to(bucket_length(batch.width())))
            # weight outside the graph: a changing float would recompile it
            loss_for_backward(loss, self.loss_reduction, count, weight).backward()
            return summed_loss(loss, self.loss_reduction, count)
        losses = []

        def forward():
            with autocast(self.device, self.cfg.train.precision):
                out = self.model(batch)
            losses.append(out.loss)
            out.loss = loss_for_backward(out.loss, self.loss_reduction, count, weight)
            return out

        if self.adversary is None:
            forward().loss.backward()
        else:
            self.adversary.backward(forward)
        return summed_loss(losses[0], self.loss_reduction, count)  # the clean loss

    def lr(self, step: int, epoch: int) -> float:
        t = self.cfg.train
        warm = min(1.0, step / t.warmup) if t.warmup else 1.0
        return t.lr * t.lr_decay ** epoch * warm  # a function of step and epoch alone: resume needs no state

    def evaluate(self, model, bar) -> tuple[float, dict, str]:
        dev = evaluate_dataset(model, self.dev_set, self.ds.vocabs["labels"].itos, self.args.level,
                               self.ds.manifest.get("tag_scheme"), self.device, self.cfg.train.eval_batch_size)
        return dev["score"], {"dev": dev["score"], "metric": dev["metric"]}, f"dev {dev['metric']} {dev['score']:.2f}"

    def checkpoint_payload(self) -> dict:
        """The vocabularies and the manifest's :data:`MANIFEST_KEYS`."""
        m = self.ds.manifest
        return {"vocab": self.vocab_dict, "manifest": {k: m[k] for k in MANIFEST_KEYS}}

    def final_results(self, run: RunDir, state: TrainState) -> tuple[dict, Table, list[str]]:
        """Score the best checkpoint on dev and test and keep its predictions
        (``predictions/<split>.json.xz``); the results hold each split's coverage (how many of its
        words are outside the vocabulary, with and without a vector)."""
        from data_prep.coverage import coverage

        ds, cfg, device = self.ds, self.cfg, self.device
        loaded = load_model(run, device)
        labels = ds.vocabs["labels"].itos
        task, tag_scheme = ds.manifest["task"], ds.manifest.get("tag_scheme")
        results = {"task": task, "encoder": cfg.model.encoder, "seed": cfg.train.seed,
                   "parameters": loaded.model.n_parameters(), "steps": state.step, "best_step": state.best_step,
                   "seconds": round(state.seconds, 1), "device": str(device), "command": self.command,
                   "threads": torch.get_num_threads(), "processes": state.world_size,
                   "scores": {}, "predictions": {}}
        for split in ("dev", "test"):
            if split in ds.splits:
                gold, pred = gold_and_predictions(loaded.model, ds.splits[split], labels, ds.level, device,
                                                  cfg.train.eval_batch_size)
                res = score(ds.level, tag_scheme, gold, pred)
                results["scores"][split] = {"metric": res["metric"], "score": round(float(res["score"]), 2),
                                            "coverage": coverage(ds.splits[split], ds.vocabs)}
                results["predictions"][split] = run.write_predictions(split, gold, pred, res["metric"], tag_scheme,
                                                                      task)
        results["metric"] = results["scores"]["dev"]["metric"]
        table = Table(title=f"{results['task']} · {results['encoder']} · seed {results['seed']}")
        for col in ("split", results["metric"], "steps", "wall time", "parameters"):
            table.add_column(col)
        for split, s in results["scores"].items():
            table.add_row(split, f"{s['score']:.2f}", str(state.step), f"{state.seconds:.0f} s",
                          f"{results['parameters']:,}")
        return results, table, []


def build_task(cfg: RunConfig, run: RunDir, config_dict: dict, world: World, resume: bool, device: torch.device,
               command: str | None) -> tuple[SentenceTask, str]:
    """Prepare (or find) the dataset, create the run directory and build the :class:`SentenceTask`;
    returns it with the phrase the log names the run by.

    Raises:
        ConfigError: the dataset lacks a train or dev split.
    """
    from data_prep.dataset import load_prepared

    if not world.main:
        world.barrier()  # rank 0 prepares the data, the others then find it up to date
    prepared = prepared_path(cfg)
    if world.main:
        world.barrier()
    ds = load_prepared(prepared)
    if cfg.data.limit:
        ds.splits = {name: split.spread(cfg.data.limit) for name, split in ds.splits.items()}
    if "train" not in ds.splits or "dev" not in ds.splits:
        raise ConfigError(f"{prepared} needs train and dev splits to train")
    run.create(config_dict, resume)
    vocab_dict = {k: v.to_dict() for k, v in ds.vocabs.items()}
    if run.writes:
        atomic_write_json(run.vocab, vocab_dict)
    task = SentenceTask(cfg, ds, device, vocab_dict, command)
    processes = f", {world.size} processes" if world.active else ""
    gathered = ", batches gathered on the device" if task.device_collate else ""
    compiled = ", step compiled" if task.compiled is not None else ""
    what = (f"{cfg.model.encoder} on {ds.manifest['task']} ({task.model.n_parameters():,} parameters, "
            f"device {device}{processes}{gathered}{compiled})")
    return task, what
