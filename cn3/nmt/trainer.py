"""Training and scoring NMT runs; the design mirrors :mod:`cn3.trainer`.

Run directory (:class:`cn3.run_dir.RunDir` paths plus the subword models)::

    RUN/config.yaml          resolved config          RUN/spm.joint.model   (or spm.src/spm.tgt.model)
    RUN/log.txt              everything printed        RUN/metrics.jsonl     one record per evaluation
    RUN/latest.pt            every epoch end, stop, ``checkpoint_every`` steps and Ctrl-C
    RUN/best.pt              best dev BLEU so far (weights, no optimizer state)
    RUN/results.json         final BLEU per split
    RUN/translations/        the final hypotheses per split

Exact resume: the batch order of epoch ``e`` is a pure function of ``(seed, e)``; checkpoints hold
the model, the Adam state, all RNG states, the epoch and the batches done in it, and the learning
rate is a pure function of the step; the subword model is read back from the run directory, so a
resumed run ends with the same parameters as an uninterrupted one.

Checkpoints are self-describing dicts (``kind: cn3-nmt``): config, model arguments, the subword
models' bytes, weights; ``cn3 nmt translate`` needs nothing else.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch

import cn3
from cn3.atomic import atomic_torch_save, atomic_write, atomic_write_json, atomic_write_text
from cn3.config import ConfigError
from cn3.console import console, progress
from cn3.nmt.config import NMTConfig, config_from_dict
from cn3.nmt.data import EncodedPairs, Tokenizer, encode_pairs, final_splits, load_split, make_batch, token_batches
from cn3.nmt.search import translate_lines
from cn3.nmt.transformer import ModelArgs, Seq2Seq
from cn3.run_dir import RunDir
from cn3.runtime import open_run, restore_checkpoint, rng_state, seed_everything, sigterm_as_interrupt

CHECKPOINT_KIND = "cn3-nmt"

#: Settings a resumed run may change; anything else must match the run.
RESUMABLE_CHANGES = {("train", k) for k in ("epochs", "max_steps", "patience", "num_threads", "eval_batch_size",
                                             "final_beam", "final_splits", "alpha", "checkpoint_every",
                                             "log_every")}
RESUMABLE_CHANGES |= {("data", "data")}


# ----------------------------------------------------------------------------- small helpers
# (kept here rather than imported from cn3.trainer, whose imports pull in torch_geometric)


def learning_rate(step: int, peak: float, warmup: int) -> float:
    """Linear warm-up to ``peak`` over ``warmup`` steps, then ``peak * sqrt(warmup / step)``."""
    step = max(step, 1)
    if warmup <= 0:
        return peak
    return peak * min(step / warmup, math.sqrt(warmup / step))


def make_optimizer(model: torch.nn.Module, cfg: NMTConfig) -> torch.optim.Adam:
    return torch.optim.Adam(model.parameters(), lr=cfg.train.lr, betas=(0.9, 0.98), eps=1e-9,
                            weight_decay=cfg.train.l2)


def bleu_score(hyps: list[str], refs: list[str]) -> tuple[float, str]:
    """sacreBLEU corpus BLEU of detokenized text (default 13a tokenization) and its signature."""
    from sacrebleu.metrics import BLEU

    metric = BLEU()
    result = metric.corpus_score(hyps, [refs])
    return result.score, str(metric.get_signature())


# ----------------------------------------------------------------------------- loading runs


@dataclass
class LoadedRun:
    model: Seq2Seq
    config: NMTConfig
    tokenizer: Tokenizer
    checkpoint: dict
    path: Path


def load_run(path: str | Path, device: torch.device, which: str = "best") -> LoadedRun:
    """Rebuild a trained model from its run directory (``best.pt``, else ``latest.pt``)."""
    run = RunDir(path)
    if not run.path.is_dir():
        raise ConfigError(f"run directory not found: {run.path}")
    ckpt_path = run.best if which == "best" and run.best.is_file() else run.latest
    if not ckpt_path.is_file():
        raise ConfigError(f"{run.path} holds no checkpoint (best.pt/latest.pt); train it first with cn3 nmt train")
    ckpt = torch.load(ckpt_path, map_location=device, weights_only=False)
    if not isinstance(ckpt, dict) or ckpt.get("kind") != CHECKPOINT_KIND:
        raise ConfigError(f"{ckpt_path} is not an NMT checkpoint (this command reads runs of cn3 nmt train)")
    cfg = config_from_dict(ckpt["config"])
    model = Seq2Seq(cfg.model, ModelArgs(**ckpt["model_args"]))
    model.load_state_dict(ckpt["model"])
    model.to(device).eval()
    return LoadedRun(model, cfg, Tokenizer(ckpt["spm"]), ckpt, run.path)


@contextmanager
def sentence_progress(label: str, total: int, bar=None) -> Iterator:
    """``on_batch(n)`` callback advancing a progress task (on ``bar`` if given: rich allows one live
    display at a time, so evaluation inside training reuses the training bar)."""
    with (nullcontext(bar) if bar is not None else progress()) as live:
        task = live.add_task(label, total=total, rate="")
        start, done = time.perf_counter(), [0]

        def on_batch(n: int) -> None:
            done[0] += n
            live.update(task, advance=n, rate=f"{done[0] / max(time.perf_counter() - start, 1e-9):,.1f} sent/s")

        try:
            yield on_batch
        finally:
            live.remove_task(task)


def score_pairs(model: Seq2Seq, tok: Tokenizer, pairs: list[tuple[str, str]], beam: int, alpha: float,
                batch_size: int, device, label: str = "translating", bar=None) -> tuple[float, str, list[str]]:
    """Translate the sources of ``pairs``; ``(BLEU, signature, hypotheses)`` against the targets."""
    sources = [s for s, _ in pairs]
    with sentence_progress(label, len(sources), bar) as on_batch:
        hyps = translate_lines(model, tok, sources, beam, alpha, batch_size, device, on_batch)
    score, signature = bleu_score(hyps, [t for _, t in pairs])
    return score, signature, hyps


@torch.no_grad()
def validation_loss(model: Seq2Seq, data: EncodedPairs, max_tokens: int, smoothing: float, device) -> float:
    """Per-token NLL (no smoothing in the number; natural log) of ``data``."""
    model.eval()
    nll_sum, tokens = 0.0, 0
    for indices in token_batches([len(s) for s in data.src], [len(t) for t in data.tgt], max_tokens):
        batch = make_batch(data, indices).to(device)
        _, nll = model.loss(model(batch.src, batch.tgt_in), batch.tgt_out, smoothing)
        nll_sum += float(nll)
        tokens += batch.tokens
    return nll_sum / max(tokens, 1)




def _tokenizer(run: RunDir, cfg: NMTConfig, train_pairs, resume: bool) -> Tokenizer:
    if resume:
        tok = Tokenizer.from_dir(run.path)
        if tok is None:
            raise ConfigError(f"cannot resume: {run.path} has no subword model (spm.*.model)")
        return tok
    with console.status("training the sentencepiece BPE model on the training split"):
        tok = Tokenizer.train(train_pairs, cfg.data)
    for name, blob in tok.files().items():
        atomic_write(run.path / name, lambda handle, b=blob: handle.write(b))
    return tok


# ----------------------------------------------------------------------------- training


def train(cfg: NMTConfig, run_path: str | Path, resume: bool = False, device_name: str = "auto") -> dict:
    """Train ``cfg`` into ``run_path``; returns the final results (also in ``results.json``)."""
    device, run, config_dict = open_run(cfg, run_path, resume, device_name, RESUMABLE_CHANGES)
    t = cfg.train
    final_splits(t.final_splits, cfg.data.corpus)  # a typo fails now, not after training
    train_pairs = load_split(cfg.data, "train", t.seed)
    val_pairs = load_split(cfg.data, "val", t.seed)
    run.create(config_dict, resume)
    tok = _tokenizer(run, cfg, train_pairs, resume)
    train_data = encode_pairs(tok, train_pairs, cfg.data.max_len)
    val_data = encode_pairs(tok, val_pairs, cfg.data.max_len)
    if not len(train_data):
        raise ConfigError(f"no training pair is within data.max_len={cfg.data.max_len} subwords")

    seed_everything(t.seed)
    args = ModelArgs(tok.src_vocab, tok.tgt_vocab)
    model = Seq2Seq(cfg.model, args).to(device)
    optimizer = make_optimizer(model, cfg)
    state = {"epoch": 0, "batch_in_epoch": 0, "step": 0, "best_score": -math.inf, "best_step": 0,
             "best_epoch": 0, "bad_evals": 0, "seconds": 0.0}
    if resume:
        state = restore_checkpoint(run.latest, model, optimizer, device)
        run.log(f"resuming {run.path} at epoch {state['epoch'] + 1}, batch {state['batch_in_epoch']}, "
                f"step {state['step']} (best dev BLEU {state['best_score']:.2f})")
    else:
        run.log(f"cn3 {cn3.__version__}: training nmt/{cfg.model.encoder} on {_corpus_name(cfg)} "
                f"({len(train_data):,} pairs, {train_data.skipped:,} skipped by length; {len(val_pairs):,} dev pairs; "
                f"vocabulary {tok.src_vocab:,}/{tok.tgt_vocab:,}; {model.n_parameters():,} parameters; "
                f"device {device}) into {run.path}")

    def checkpoint(path: Path) -> None:
        """``latest.pt`` holds everything resuming needs; ``best.pt`` leaves out the Adam moments
        (twice the model's size) and RNG states, which only resuming reads."""
        full = path == run.latest
        atomic_torch_save(path, {
            "kind": CHECKPOINT_KIND, "format": 1, "cn3_version": cn3.__version__, "config": config_dict,
            "model_args": args.__dict__, "model": model.state_dict(),
            "optimizer": optimizer.state_dict() if full else None,
            "scheduler": {"type": "linear_warmup_inverse_sqrt", "lr": t.lr, "warmup": t.warmup,
                          "step": state["step"]},
            "rng": rng_state() if full else None, "state": dict(state), "spm": tok.models,
            "data": {"corpus": _corpus_name(cfg), "train_pairs": len(train_data), "skipped": train_data.skipped},
        })

    def evaluate(epoch: int, loss: float, bar, stop_eval: bool = False) -> None:
        """Dev BLEU (+ loss); epoch ends update best/patience, a stop before any epoch end only
        writes ``best.pt`` if there is none (so the patience state stays that of the full run)."""
        val_loss = validation_loss(model, val_data, t.max_tokens, t.label_smoothing, device) if len(val_data) else float("nan")
        bleu, _, _ = score_pairs(model, tok, val_pairs, t.eval_beam, t.alpha, t.eval_batch_size, device,
                                 label="dev BLEU", bar=bar)
        model.train()
        state["seconds"] = time.perf_counter() - start_time
        record = {"epoch": epoch, "step": state["step"], "train_loss": round(loss, 4),
                  "dev_loss": round(val_loss, 4), "dev_bleu": round(bleu, 2), "seconds": round(state["seconds"], 1)}
        if stop_eval:
            record["stop"] = True
            improved = not run.best.is_file()
        else:
            improved = bleu > state["best_score"]
            if improved:
                state.update(best_score=bleu, best_step=state["step"], best_epoch=epoch, bad_evals=0)
            else:
                state["bad_evals"] += 1
        if improved:
            checkpoint(run.best)
        run.append_metrics(record)
        ppl = math.exp(min(val_loss, 50)) if val_loss == val_loss else float("nan")
        run.log(f"epoch {epoch} step {state['step']}: train loss {loss:.4f}, dev loss {val_loss:.3f} "
                f"(ppl {ppl:.1f}), dev BLEU {bleu:.2f}" + (" [green](best)[/]" if improved else ""))

    src_lens = [len(s) for s in train_data.src]
    tgt_lens = [len(x) for x in train_data.tgt]
    start_time = time.perf_counter() - state["seconds"]
    stopped = bool(t.max_steps and state["step"] >= t.max_steps)  # resumed with nothing left to do
    model.train()
    previous_sigterm = sigterm_as_interrupt()
    try:
        with progress(transient=False) as bar:
            while state["epoch"] < t.epochs and not stopped:
                epoch = state["epoch"]
                batches = token_batches(src_lens, tgt_lens, t.max_tokens, t.seed, epoch)
                task = bar.add_task(f"epoch {epoch + 1}/{t.epochs}", total=len(batches),
                                    completed=state["batch_in_epoch"], rate="")
                model.train()
                loss_sum, tokens, tick = 0.0, 0, time.perf_counter()
                for b in range(state["batch_in_epoch"], len(batches)):
                    batch = make_batch(train_data, batches[b]).to(device)
                    loss, _ = model.loss(model(batch.src, batch.tgt_in), batch.tgt_out, t.label_smoothing)
                    n = batch.tokens
                    optimizer.zero_grad(set_to_none=True)
                    (loss / n).backward()
                    if t.clip:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), t.clip)
                    lr = learning_rate(state["step"] + 1, t.lr, t.warmup)
                    for group in optimizer.param_groups:
                        group["lr"] = lr
                    optimizer.step()
                    state["step"] += 1
                    state["batch_in_epoch"] = b + 1
                    loss_sum += float(loss.detach())
                    tokens += n
                    rate = tokens / max(time.perf_counter() - tick, 1e-9)
                    bar.update(task, completed=b + 1,
                               rate=f"loss {loss_sum / tokens:.3f} lr {lr:.2e} {rate:,.0f} tgt tok/s")
                    if t.log_every and state["step"] % t.log_every == 0:
                        run.log(f"epoch {epoch + 1} batch {b + 1}/{len(batches)} step {state['step']}: "
                                f"train loss {loss_sum / tokens:.4f}, lr {lr:.2e}, {rate:,.0f} tgt tok/s")
                    if t.max_steps and state["step"] >= t.max_steps:
                        stopped = True
                    if stopped or (t.checkpoint_every and state["step"] % t.checkpoint_every == 0):
                        state["seconds"] = time.perf_counter() - start_time
                        checkpoint(run.latest)
                    if stopped:
                        break
                bar.remove_task(task)
                if stopped:
                    if state["batch_in_epoch"] < len(batches):
                        if not run.best.is_file():
                            evaluate(epoch + 1, loss_sum / max(tokens, 1), bar, stop_eval=True)
                        run.log(f"stopped at train.max_steps={t.max_steps} (epoch {epoch + 1}, batch "
                                f"{state['batch_in_epoch']}/{len(batches)})")
                        break
                    stopped = False  # the last batch of the epoch: finish the epoch normally
                # Ctrl-C during this evaluation resumes into it (the epoch counter moves after it).
                evaluate(epoch + 1, loss_sum / max(tokens, 1), bar)
                state["epoch"] += 1
                state["batch_in_epoch"] = 0
                if state["bad_evals"] >= t.patience:
                    run.log(f"early stop: no better dev BLEU in {t.patience} epochs")
                    stopped = True
                if t.max_steps and state["step"] >= t.max_steps:
                    stopped = True
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
    return finish(run, cfg, device, state)


def _corpus_name(cfg: NMTConfig) -> str:
    d = cfg.data
    if d.corpus == "multi30k":
        return f"multi30k {d.src_lang}-{d.tgt_lang}"
    return f"{d.train_src} -> {d.train_tgt}"


def finish(run: RunDir, cfg: NMTConfig, device, state: dict) -> dict:
    """Score the best checkpoint on ``train.final_splits``; write ``results.json`` and print a table."""
    from rich.table import Table

    if not run.best.is_file():
        raise ConfigError("training ended before the first evaluation: no best checkpoint")
    loaded = load_run(run.path, device)
    t = cfg.train
    results = {"corpus": _corpus_name(cfg), "encoder": cfg.model.encoder, "seed": t.seed,
               "parameters": loaded.model.n_parameters(), "steps": state["step"], "best_step": state["best_step"],
               "best_epoch": state["best_epoch"], "seconds": round(state["seconds"], 1), "beam": t.final_beam,
               "alpha": t.alpha, "scores": {}}
    for name in final_splits(t.final_splits, cfg.data.corpus):
        try:
            pairs = load_split(cfg.data, name, t.seed)
        except ConfigError as err:
            run.log(f"[yellow]skipping final split {name}[/]: {err}")
            continue
        bleu, signature, hyps = score_pairs(loaded.model, loaded.tokenizer, pairs, t.final_beam, t.alpha,
                                            t.eval_batch_size, device, label=f"{name} BLEU")
        atomic_write_text(run.path / "translations" / f"{name}.beam{t.final_beam}.txt", "\n".join(hyps) + "\n")
        results["scores"][name] = {"bleu": round(bleu, 2), "signature": signature, "sentences": len(pairs)}
    atomic_write_json(run.results, results)
    table = Table(title=f"nmt · {results['encoder']} · {results['corpus']} · seed {results['seed']}")
    for col in ("split", "BLEU", "sentences", "beam", "steps", "wall time", "parameters"):
        table.add_column(col)
    for split, s in results["scores"].items():
        table.add_row(split, f"{s['bleu']:.2f}", str(s["sentences"]), str(t.final_beam), str(state["step"]),
                      f"{state['seconds']:.0f} s", f"{results['parameters']:,}")
    if results["scores"]:
        console.print(table)
        console.print(f"sacreBLEU signature: {next(iter(results['scores'].values()))['signature']}")
    with open(run.log_file, "a", encoding="utf-8") as handle:
        handle.write(f"results: {results}\n")
    return results
