"""Sentence tasks on the shared training loop: the task adapter, evaluation and prediction.

:func:`train` builds a :class:`SentenceTask` (model, batches, loss, dev scoring, learning rate,
checkpoint contents, final report) and hands it to :func:`cn3.loop.run_loop`, the loop that
``cn3 nmt train`` runs too; exact resume, checkpoints and early stopping live there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch

from cn3.adversarial import EmbeddingAdversary
from cn3.averaging import ema_state, make_ema
from cn3.sentence.batching import DeviceBatches, GraphBatch, item_lengths, make_batch
from cn3.bucketing import bucketed_batches, epoch_seed
from cn3.compat import check_sentence_run, upgrade_sentence_config
from cn3.config import ConfigError, from_dict
from cn3.distributed import World, shutdown
from cn3.loop import check_tensorboard, make_optimizer, run_loop, start
from cn3.loop_config import RESUMABLE_CHANGES
from cn3.metrics import score
from cn3.sentence.model import ModelArgs, SentenceGraphModel, model_args_from_dataset
from cn3.sentence.config import RunConfig
from cn3.run_dir import RunDir
from cn3.run_kinds import SENTENCE
from cn3.runtime import autocast, deterministic_algorithms, load_checkpoint, make_scaler, open_run, seed_everything
from cn3.util.atomic import atomic_write_json
from cn3.util.console import console

#: the ``kind`` of a sentence-task checkpoint (translation runs have their own)
CHECKPOINT_KIND = SENTENCE.checkpoint_kind


def _prepare_settings(cfg: RunConfig):
    """What ``cn3 prepare`` is asked for by ``cfg.data``."""
    from data_prep.paths import data_root
    from data_prep.prepare import PrepareSettings
    from data_prep.taskspec import TaskOptions

    d = cfg.data
    embeddings = d.embeddings
    if embeddings is not None and not embeddings.is_absolute() and not embeddings.exists():
        embeddings = data_root(d.data) / embeddings  # configs name vectors relative to the data root
    return PrepareSettings(task=d.task, data=d.data, out=d.prepared, annotator=d.annotator,
                           max_len=d.max_len, min_freq=d.min_freq, embeddings=embeddings,
                           options=TaskOptions(fold=d.fold, fine=d.fine))


def prepared_path(cfg: RunConfig, prepare: bool = True) -> Path:
    """The prepared dataset a sentence run of ``cfg`` trains (or trained) on, worked out here for
    training, ``cn3 evaluate``/``predict`` and reports alike: ``data.prepared`` when it holds a
    dataset, else the one ``cn3 prepare`` builds or finds up to date for ``cfg.data``
    (:func:`ensure_prepared`). ``prepare=False`` (a report): never prepares; the dataset must exist.
    """
    given = cfg.data.prepared
    if given and (Path(given) / "manifest.json").is_file():
        return Path(given)
    if prepare:
        return ensure_prepared(cfg)
    from data_prep.paths import default_prepared_dir
    from data_prep.prepare import default_out_name, resolve_spec

    settings = _prepare_settings(cfg)
    out = Path(given) if given else default_prepared_dir(default_out_name(resolve_spec(settings), settings.options))
    if not (out / "manifest.json").is_file():
        raise ConfigError(f"{out} holds no prepared dataset: a report reads the data its runs trained on but never "
                          f"prepares it; run `cn3 prepare --task {cfg.data.task}` with the runs' data options first")
    return out


def ensure_prepared(cfg: RunConfig) -> Path:
    """The prepared dataset for ``cfg.data``, built (or found up to date) with ``cn3 prepare``."""
    from data_prep.prepare import prepare

    result = prepare(_prepare_settings(cfg))
    state = "up to date" if result.up_to_date else "prepared"
    console.print(f"dataset {state}: {result.out} (annotator {result.manifest['annotator']['name']})")
    return result.out


@dataclass
class LoadedModel:
    model: SentenceGraphModel
    config: RunConfig
    vocabs: dict
    manifest: dict
    checkpoint: dict


def load_model(run: RunDir, device: torch.device, which: str = "best") -> LoadedModel:
    """Rebuild a trained model from its self-describing checkpoint (its ``model`` weights)."""
    from data_prep.vocab import Vocab

    run.require()
    path = run.best if which == "best" and run.best.is_file() else run.latest
    ckpt = load_checkpoint(path)
    check_sentence_run(ckpt["config"], ckpt.get("cn3_version"), str(path))
    config = from_dict(RunConfig, upgrade_sentence_config(ckpt["config"], ckpt.get("cn3_version")))
    model = SentenceGraphModel(config.model, ModelArgs(**ckpt["model_args"]))
    model.load_state_dict(ckpt["model"])
    model.to(device).eval()
    vocabs = {k: Vocab.from_dict(v) for k, v in ckpt["vocab"].items()}
    return LoadedModel(model, config, vocabs, ckpt["manifest"], ckpt)


def scored_batches(model: SentenceGraphModel, dataset, device: torch.device, batch_size: int = 128):
    """The model's outputs over ``dataset`` in length-sorted batches, in eval mode and without
    gradients: yields ``(batch, out, rows)`` where ``rows`` pairs each row with its item and length.

    Words of ``dataset`` outside the model's vocabulary that have a pretrained vector are embedded
    with it (``dataset.open_vectors``; see :func:`data_prep.store.open_vocabulary`)."""
    model.eval()
    lengths = item_lengths(dataset)
    with torch.no_grad(), model.nodes.open_vocabulary(getattr(dataset, "open_vectors", None)):
        for indices in bucketed_batches(lengths, batch_size, shuffle=False):
            batch = make_batch(dataset, indices).to(device)
            yield batch, model(batch, with_loss=False), [(row, i, lengths[i]) for row, i in enumerate(indices)]


def predict(model: SentenceGraphModel, dataset, device: torch.device, batch_size: int = 128,
            keep_info: bool = False) -> tuple[list, list]:
    """Predictions for every item of ``dataset`` in dataset order: class ids, or tag-id lists.

    Returns ``(predictions, infos)``; ``infos`` holds each batch's attention/gate outputs when
    ``keep_info`` (for visualisation), else is empty.
    """
    preds: list = [None] * len(dataset)
    infos = []
    for batch, out, rows in scored_batches(model, dataset, device, batch_size):
        for row, i, n in rows:
            preds[i] = out.pred[row, :n].tolist() if model.args.level == "node" else int(out.pred[row])
        if keep_info:
            infos.append(([i for _, i, _ in rows], out.info))
    return preds, infos


def gold_and_predictions(model, dataset, labels: list[str], level: str, device,
                         batch_size: int = 128) -> tuple[list, list]:
    """``(gold, pred)`` for a dataset whose items carry gold labels, in dataset order, as label strings
    (or tag-string lists for ``level == "node"``): what :func:`cn3.metrics.score` scores and what a
    run's ``predictions/<split>.jsonl`` keeps, so one pass of the model serves both."""
    preds, _ = predict(model, dataset, device, batch_size)
    if level == "node":
        gold = [[labels[t] for t in dataset[i].y.tolist()] for i in range(len(dataset))]
        pred = [[labels[t] for t in p] for p in preds]
    else:
        gold = [labels[int(y)] for y in dataset.t["y"]]
        pred = [labels[p] for p in preds]
    return gold, pred


def evaluate_dataset(model, dataset, labels: list[str], level: str, tag_scheme: str | None,
                     device, batch_size: int = 128) -> dict:
    """Score ``model`` on a dataset whose items carry gold labels."""
    return score(level, tag_scheme, *gold_and_predictions(model, dataset, labels, level, device, batch_size))


class SentenceTask:
    """The sentence side of the training loop (see :class:`cn3.loop.TaskAdapter`)."""

    unit = "items"

    def __init__(self, cfg: RunConfig, ds, device: torch.device, vocab_dict: dict, command: str | None = None):
        t = cfg.train
        self.cfg, self.ds, self.device, self.vocab_dict = cfg, ds, device, vocab_dict
        self.command = command  # the command line that started the run, for results.json
        seed_everything(t.seed)
        self.args = model_args_from_dataset(ds)
        self.model = SentenceGraphModel(cfg.model, self.args, ds.embeddings).to(device)
        self.optimizer = make_optimizer(self.model, t.optimizer, t.lr, t.weight_decay)
        self.ema = make_ema(self.model, t.ema)
        self.scaler = make_scaler(t.precision, device)
        self.evaluated = self.ema.module if self.ema is not None else self.model
        # after make_ema: the average's copy of the model must not carry the adversary's hook
        self.adversary = (EmbeddingAdversary(self.model.nodes.word, t.adversarial) if t.adversarial else None)
        self.train_set, self.dev_set = ds.splits["train"], ds.splits["dev"]
        self.lengths = item_lengths(self.train_set)
        self.device_collate = t.use_device_batches(device, DeviceBatches.nbytes(self.train_set))
        # the batch loader's collation; not a bound method, which would take the model to spawned workers
        self.collate = (DeviceBatches(self.train_set, device) if self.device_collate
                        else partial(make_batch, self.train_set))

    def batches(self, epoch: int) -> list:
        t = self.cfg.train
        return bucketed_batches(self.lengths, t.batch_size, shuffle=True, seed=epoch_seed(t.seed, epoch),
                                max_tokens=t.max_tokens or None)

    def count(self, indices) -> int:
        return len(indices)  # the loss is a mean over items

    def train_step(self, batch: GraphBatch, count: int, weight=1.0) -> torch.Tensor:
        batch = batch.to(self.device)
        losses = []

        def forward():
            with autocast(self.device, self.cfg.train.precision):
                out = self.model(batch)
            losses.append(out.loss.detach())
            # weight: a rank's share of a global batch (cn3.distributed), times the fp16 loss scale
            out.loss = out.loss * weight
            return out

        if self.adversary is None:
            forward().loss.backward()
        else:
            self.adversary.backward(forward)
        return losses[0].double() * count  # the clean loss, summed over the items

    def lr(self, step: int, epoch: int) -> float:
        t = self.cfg.train
        warm = min(1.0, step / t.warmup) if t.warmup else 1.0
        return t.lr * t.lr_decay ** epoch * warm  # a function of step and epoch alone: resume needs no state

    def after_update(self) -> None:
        if self.ema is not None:
            self.ema.update_parameters(self.model)

    def evaluate(self, bar) -> tuple[float, dict, str]:
        dev = evaluate_dataset(self.evaluated, self.dev_set, self.ds.vocabs["labels"].itos, self.args.level,
                               self.ds.manifest.get("tag_scheme"), self.device, self.cfg.train.eval_batch_size)
        return dev["score"], {"dev": dev["score"], "metric": dev["metric"]}, f"dev {dev['metric']} {dev['score']:.2f}"

    def report(self, run: RunDir, state: dict) -> dict:
        return finish(run, self.ds, self.device, self.cfg, state, self.command)

    def checkpoint_extra(self, full: bool) -> dict:
        # "model" (written by the loop) is what evaluation uses, the average under train.ema; the raw
        # weights that training goes on from are kept beside it only when they differ.
        m = self.ds.manifest
        return {"kind": CHECKPOINT_KIND, **(ema_state(self.ema, self.model) if full else {}),
                "vocab": self.vocab_dict,
                "manifest": {k: m[k] for k in ("task", "level", "labels", "tag_scheme", "annotator",
                                               "fingerprint", "n_edge_types", "settings", "embeddings")}}


def train(cfg: RunConfig, run_path: Path, resume: bool = False, device_name: str = "auto",
          command: str | None = None) -> dict:
    """Train ``cfg`` into ``run_path``; returns the final results (also in ``results.json``; under
    torchrun, on rank 0, the other ranks return ``{}``).

    ``command``: the command line that started the run, recorded in ``results.json``.
    """
    check_tensorboard(cfg.train)
    device, run, config_dict, world = open_run(cfg, run_path, resume, device_name, RESUMABLE_CHANGES)
    try:
        with run.training():  # one trainer per run directory
            return _train(cfg, run, config_dict, world, resume, device, command)
    finally:
        shutdown(world)


def _train(cfg: RunConfig, run: RunDir, config_dict: dict, world: World, resume: bool, device: torch.device,
           command: str | None) -> dict:
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
    state = start(task, run, resume, f"{cfg.model.encoder} on {ds.manifest['task']} "
                                     f"({task.model.n_parameters():,} parameters, device {device}{processes}{gathered})",
                  world)
    with deterministic_algorithms(cfg.train.deterministic):
        return run_loop(task, cfg.train, run, config_dict, task.args.__dict__, state, world)


def finish(run: RunDir, ds, device, cfg: RunConfig, state: dict, command: str | None = None) -> dict:
    """Score the best checkpoint on dev and test and keep its predictions (``predictions/<split>.jsonl``);
    write ``results.json`` (with each split's coverage: how many of its words are outside the
    vocabulary, with and without a vector); print the final table."""
    from rich.table import Table

    from data_prep.coverage import coverage

    loaded = load_model(run, device)
    labels = ds.vocabs["labels"].itos
    task, tag_scheme = ds.manifest["task"], ds.manifest.get("tag_scheme")
    results = {"task": task, "encoder": cfg.model.encoder, "seed": cfg.train.seed,
               "parameters": loaded.model.n_parameters(), "steps": state["step"], "best_step": state["best_step"],
               "seconds": round(state["seconds"], 1), "device": str(device), "command": command,
               "threads": torch.get_num_threads(), "processes": state.get("world_size", 1),
               "scores": {}, "predictions": {}}
    for split in ("dev", "test"):
        if split in ds.splits:
            gold, pred = gold_and_predictions(loaded.model, ds.splits[split], labels, ds.level, device,
                                              cfg.train.eval_batch_size)
            res = score(ds.level, tag_scheme, gold, pred)
            results["scores"][split] = {"metric": res["metric"], "score": round(float(res["score"]), 2),
                                        "coverage": coverage(ds.splits[split], ds.vocabs)}
            results["predictions"][split] = run.write_predictions(split, gold, pred, res["metric"], tag_scheme, task)
    results["metric"] = results["scores"]["dev"]["metric"]
    atomic_write_json(run.results, results)
    table = Table(title=f"{results['task']} · {results['encoder']} · seed {results['seed']}")
    for col in ("split", results["metric"], "steps", "wall time", "parameters"):
        table.add_column(col)
    for split, s in results["scores"].items():
        table.add_row(split, f"{s['score']:.2f}", str(state["step"]), f"{state['seconds']:.0f} s",
                      f"{results['parameters']:,}")
    console.print(table)
    with open(run.log_file, "a", encoding="utf-8") as handle:
        handle.write(f"results: {json.dumps(results, ensure_ascii=False)}\n")  # as results.json has it
    return results
