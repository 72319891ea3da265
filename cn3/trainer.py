"""Training, evaluation and prediction over prepared sentence graphs.

Exact resume: the batch order of epoch ``e`` is a pure function of ``(seed, e)`` and every
checkpoint stores the model, optimiser, all RNG states, the epoch and the number of batches done
in it, so ``--resume`` after an interruption replays nothing and skips nothing: the final metrics
equal those of an uninterrupted run with the same seed.
"""

from __future__ import annotations

import math
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import torch

import cn3
from cn3.adversarial import EmbeddingAdversary
from cn3.atomic import atomic_torch_save, atomic_write_json
from cn3.averaging import ema_state, make_ema
from cn3.batching import bucketed_batches, item_lengths, make_batch
from cn3.config import ConfigError, from_dict
from cn3.console import console, progress
from cn3.metrics import score
from cn3.models.model import ModelArgs, SentenceGraphModel, model_args_from_dataset
from cn3.run_config import RunConfig
from cn3.run_dir import RunDir
from cn3.runtime import open_run, restore_checkpoint, rng_state, seed_everything, sigterm_as_interrupt

#: Settings a resumed run may change (how long to go on, and how many CPU threads or how often to
#: checkpoint, which do not change what is computed); anything else must match the run.
RESUMABLE_CHANGES = {("train", "epochs"), ("train", "max_steps"), ("train", "patience"),
                     ("train", "num_threads"), ("train", "checkpoint_every")}


def ensure_prepared(cfg: RunConfig) -> Path:
    """The prepared dataset for ``cfg.data``, built (or found up to date) with ``cn3 prepare``."""
    from data_prep.prepare import PrepareSettings, prepare
    from data_prep.taskspec import TaskOptions

    from data_prep.paths import data_root

    d = cfg.data
    embeddings = d.embeddings
    if embeddings is not None and not embeddings.is_absolute() and not embeddings.exists():
        embeddings = data_root(d.data) / embeddings  # configs name vectors relative to the data root
    settings = PrepareSettings(task=d.task, data=d.data, out=d.prepared, annotator=d.annotator,
                               max_len=d.max_len, min_freq=d.min_freq, embeddings=embeddings,
                               vectors_vocab=d.vectors_vocab, options=TaskOptions(fold=d.fold, fine=d.fine))
    result = prepare(settings)
    state = "up to date" if result.up_to_date else "prepared"
    console.print(f"dataset {state}: {result.out} (annotator {result.manifest['annotator']['name']})")
    return result.out


def make_optimizer(model: torch.nn.Module, cfg: RunConfig) -> torch.optim.Optimizer:
    t = cfg.train
    params = [p for p in model.parameters() if p.requires_grad]
    if t.optimizer == "adadelta":
        return torch.optim.Adadelta(params, lr=t.lr, rho=0.95, eps=1e-6, weight_decay=t.weight_decay)
    if t.optimizer == "adam":
        return torch.optim.Adam(params, lr=t.lr, weight_decay=t.weight_decay)
    return torch.optim.SGD(params, lr=t.lr, weight_decay=t.weight_decay)


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
    ckpt = torch.load(path, map_location=device, weights_only=False)
    config = from_dict(RunConfig, ckpt["config"])
    model = SentenceGraphModel(config.model, ModelArgs(**ckpt["model_args"]))
    model.load_state_dict(ckpt["model"])
    model.to(device).eval()
    vocabs = {k: Vocab.from_dict(v) for k, v in ckpt["vocab"].items()}
    return LoadedModel(model, config, vocabs, ckpt["manifest"], ckpt)


@torch.no_grad()
def predict(model: SentenceGraphModel, dataset, device: torch.device, batch_size: int = 128,
            keep_info: bool = False) -> tuple[list, list]:
    """Predictions for every item of ``dataset`` in dataset order: class ids, or tag-id lists.

    Returns ``(predictions, infos)``; ``infos`` holds each batch's attention/gate outputs when
    ``keep_info`` (for visualisation), else is empty.
    """
    model.eval()
    lengths = item_lengths(dataset)
    preds: list = [None] * len(dataset)
    infos = []
    for indices in bucketed_batches(lengths, batch_size, shuffle=False):
        batch = make_batch(dataset, indices).to(device)
        out = model(batch, with_loss=False)
        if model.args.level == "node":
            for row, i in enumerate(indices):
                preds[i] = out.pred[row, : lengths[i]].tolist()
        else:
            for row, i in enumerate(indices):
                preds[i] = int(out.pred[row])
        if keep_info:
            infos.append((indices, out.info))
    return preds, infos


def evaluate_dataset(model, dataset, labels: list[str], level: str, tag_scheme: str | None,
                     device, batch_size: int = 128) -> dict:
    """Score ``model`` on a dataset whose items carry gold labels."""
    preds, _ = predict(model, dataset, device, batch_size)
    if level == "node":
        gold = [[labels[t] for t in dataset[i].y.tolist()] for i in range(len(dataset))]
        pred = [[labels[t] for t in p] for p in preds]
    else:
        gold = [labels[int(y)] for y in dataset.t["y"]]
        pred = [labels[p] for p in preds]
    return score(level, tag_scheme, gold, pred)


def train(cfg: RunConfig, run_path: Path, resume: bool = False, device_name: str = "auto",
          command: str | None = None) -> dict:
    """Train ``cfg`` into ``run_path``; returns the final results (also in ``results.json``).

    ``command``: the command line that started the run, recorded in ``results.json``.
    """
    from data_prep.dataset import load_prepared

    device, run, config_dict = open_run(cfg, run_path, resume, device_name, RESUMABLE_CHANGES)
    given = cfg.data.prepared
    prepared = given if given and (Path(given) / "manifest.json").is_file() else ensure_prepared(cfg)
    ds = load_prepared(prepared)
    if cfg.data.limit:
        ds.splits = {name: split.spread(cfg.data.limit) for name, split in ds.splits.items()}
    run.create(config_dict, resume)
    vocab_dict = {k: v.to_dict() for k, v in ds.vocabs.items()}
    atomic_write_json(run.vocab, vocab_dict)
    if "train" not in ds.splits or "dev" not in ds.splits:
        raise ConfigError(f"{prepared} needs train and dev splits to train")

    seed_everything(cfg.train.seed)
    args = model_args_from_dataset(ds)
    model = SentenceGraphModel(cfg.model, args, ds.embeddings).to(device)
    optimizer = make_optimizer(model, cfg)
    ema = make_ema(model, cfg.train.ema)
    evaluated = ema.module if ema is not None else model  # the weights scored on dev and kept in best.pt
    # after make_ema: the average's copy of the model must not carry the adversary's hook
    adversary = EmbeddingAdversary(model.nodes.word, cfg.train.adversarial) if cfg.train.adversarial else None
    labels = ds.vocabs["labels"].itos
    tag_scheme = ds.manifest.get("tag_scheme")
    state = {"epoch": 0, "batch_in_epoch": 0, "step": 0, "best_score": -math.inf, "best_step": 0,
             "bad_evals": 0, "seconds": 0.0}
    if resume:
        state = restore_checkpoint(run.latest, model, optimizer, device, ema)
        run.log(f"resuming {run.path} at epoch {state['epoch'] + 1}, batch {state['batch_in_epoch']}, "
                f"step {state['step']} (best dev {state['best_score']:.2f})")
    else:
        run.log(f"cn3 {cn3.__version__}: training {cfg.model.encoder} on {ds.manifest['task']} "
                f"({model.n_parameters():,} parameters, device {device}) into {run.path}")

    def checkpoint(path: Path) -> None:
        # "model" is always what evaluation uses (the average under train.ema); the raw weights that
        # training goes on from are kept beside it only when they differ.
        atomic_torch_save(path, {
            "cn3_version": cn3.__version__, "config": config_dict, "model_args": args.__dict__,
            "model": evaluated.state_dict(), **ema_state(ema, model),
            "optimizer": optimizer.state_dict(), "scheduler": None,
            "rng": rng_state(), "state": dict(state), "vocab": vocab_dict,
            "manifest": {k: ds.manifest[k] for k in ("task", "level", "labels", "tag_scheme", "annotator",
                                                      "fingerprint", "n_edge_types", "settings")},
        })

    train_set, dev_set = ds.splits["train"], ds.splits["dev"]
    lengths = item_lengths(train_set)
    t = cfg.train
    start_time = time.perf_counter() - state["seconds"]
    stopped = False
    previous_sigterm = sigterm_as_interrupt()
    try:
        with progress(transient=False) as bar:
            while state["epoch"] < t.epochs and not stopped:
                epoch = state["epoch"]
                batches = bucketed_batches(lengths, t.batch_size, shuffle=True, seed=t.seed * 100_003 + epoch,
                                           max_tokens=t.max_tokens or None)
                eval_points = {round(len(batches) * (k + 1) / t.evals_per_epoch) for k in range(t.evals_per_epoch)}
                for group in optimizer.param_groups:  # a function of the epoch alone, so resume needs no state
                    group["lr"] = t.lr * t.lr_decay ** epoch
                task = bar.add_task(f"epoch {epoch + 1}/{t.epochs}", total=len(batches),
                                    completed=state["batch_in_epoch"], rate="")
                model.train()
                seen, loss_sum, tick = 0, 0.0, time.perf_counter()
                for b in range(state["batch_in_epoch"], len(batches)):
                    batch = make_batch(train_set, batches[b]).to(device)
                    optimizer.zero_grad(set_to_none=True)
                    if adversary is None:
                        out = model(batch)
                        out.loss.backward()
                    else:
                        out = adversary.backward(lambda: model(batch))
                    if t.clip:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), t.clip)
                    optimizer.step()
                    if ema is not None:
                        ema.update_parameters(model)
                    state["step"] += 1
                    state["batch_in_epoch"] = b + 1
                    seen += len(batch)
                    loss_sum += out.loss.item() * len(batch)
                    rate = seen / max(time.perf_counter() - tick, 1e-9)
                    bar.update(task, completed=b + 1, rate=f"loss {loss_sum / seen:.3f} {rate:,.0f} items/s")
                    if b + 1 in eval_points:
                        dev = evaluate_dataset(evaluated, dev_set, labels, args.level, tag_scheme, device,
                                               t.eval_batch_size)
                        model.train()
                        state["seconds"] = time.perf_counter() - start_time
                        record = {"epoch": epoch + 1, "batch": b + 1, "step": state["step"],
                                  "train_loss": loss_sum / seen, "dev": dev["score"], "metric": dev["metric"],
                                  "seconds": round(state["seconds"], 1)}
                        improved = dev["score"] > state["best_score"]
                        if improved:
                            state.update(best_score=dev["score"], best_step=state["step"], bad_evals=0)
                            checkpoint(run.best)
                        else:
                            state["bad_evals"] += 1
                        run.append_metrics(record)
                        run.log(f"epoch {epoch + 1} step {state['step']}: train loss {loss_sum / seen:.4f}, "
                                f"dev {dev['metric']} {dev['score']:.2f}" + (" [green](best)[/]" if improved else ""))
                        if state["bad_evals"] >= t.patience:
                            run.log(f"early stop: no better dev score in {t.patience} evaluations")
                            stopped = True
                    if t.max_steps and state["step"] >= t.max_steps:
                        stopped = True
                    if stopped or (t.checkpoint_every and state["step"] % t.checkpoint_every == 0):
                        state["seconds"] = time.perf_counter() - start_time
                        checkpoint(run.latest)
                    if stopped:
                        break
                bar.remove_task(task)
                if not stopped:
                    state["epoch"] += 1
                    state["batch_in_epoch"] = 0
                    state["seconds"] = time.perf_counter() - start_time
                    checkpoint(run.latest)
    except KeyboardInterrupt:
        state["seconds"] = time.perf_counter() - start_time
        checkpoint(run.latest)
        run.log(f"interrupted at step {state['step']}: saved {run.latest}; continue with --resume")
        raise
    finally:
        if previous_sigterm is not None:
            signal.signal(signal.SIGTERM, previous_sigterm)
    return finish(run, ds, device, cfg, state, command)


def finish(run: RunDir, ds, device, cfg: RunConfig, state: dict, command: str | None = None) -> dict:
    """Score the best checkpoint on dev and test; write ``results.json``; print the final table."""
    from rich.table import Table

    if not run.best.is_file():
        raise ConfigError("training ended before the first evaluation: no best checkpoint "
                          "(raise train.max_steps or lower train.evals_per_epoch)")
    loaded = load_model(run, device)
    labels = ds.vocabs["labels"].itos
    results = {"task": ds.manifest["task"], "encoder": cfg.model.encoder, "seed": cfg.train.seed,
               "parameters": loaded.model.n_parameters(), "steps": state["step"], "best_step": state["best_step"],
               "seconds": round(state["seconds"], 1), "device": str(device), "command": command,
               "threads": torch.get_num_threads(), "scores": {}}
    for split in ("dev", "test"):
        if split in ds.splits:
            res = evaluate_dataset(loaded.model, ds.splits[split], labels, ds.level, ds.manifest.get("tag_scheme"),
                                   device, cfg.train.eval_batch_size)
            results["scores"][split] = {"metric": res["metric"], "score": round(res["score"], 2)}
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
        handle.write(f"results: {results}\n")
    return results
