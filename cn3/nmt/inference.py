"""A trained translation run in use: load it, translate, score with sacreBLEU."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch

from cn3.nmt.config import NMTConfig, config_from_dict
from cn3.nmt.data import Tokenizer
from cn3.nmt.search import translate_lines
from cn3.nmt.transformer import ModelArgs, Seq2Seq
from cn3.runs.compat import upgrade_nmt_config
from cn3.runs.layout import RunDir
from cn3.train.checkpoint import Checkpoint
from cn3.train.kinds import TRANSLATION_CHECKPOINT
from cn3.util.console import progress
from cn3.util.errors import ConfigError, RunError


def bleu_score(hyps: list[str], refs: list[str]) -> tuple[float, str]:
    """sacreBLEU corpus BLEU of detokenized text (default 13a tokenization) and its signature."""
    from sacrebleu.metrics import BLEU

    metric = BLEU()
    result = metric.corpus_score(hyps, [refs])
    return result.score, str(metric.get_signature())


@dataclass
class LoadedRun:
    model: Seq2Seq
    config: NMTConfig
    tokenizer: Tokenizer
    checkpoint: Checkpoint
    path: Path


def load_run(path: str | Path, device: torch.device, which: str = "best") -> LoadedRun:
    """Rebuild a trained model from its run directory (``best.pt``, else ``latest.pt``)."""
    run = RunDir(path)
    if not run.path.is_dir():
        raise RunError(f"run directory not found: {run.path}")
    ckpt_path = run.best if which == "best" and run.best.is_file() else run.latest
    if not ckpt_path.is_file():
        raise RunError(f"{run.path} holds no checkpoint (best.pt/latest.pt); train it first with cn3 nmt train")
    ckpt = Checkpoint.load(ckpt_path)
    if ckpt.kind != TRANSLATION_CHECKPOINT:
        raise RunError(f"{ckpt_path} is not an NMT checkpoint (this command reads runs of cn3 nmt train)")
    try:
        cfg = config_from_dict(upgrade_nmt_config(ckpt.config, ckpt.cn3_version))
    except ConfigError as err:  # the checkpoint's own config: say which checkpoint
        raise ConfigError(f"{ckpt_path}: its recorded config does not load here: {err}") from None
    model = Seq2Seq(cfg.model, ModelArgs(**ckpt.model_args))
    model.load_state_dict(ckpt.model)
    model.to(device).eval()
    return LoadedRun(model, cfg, Tokenizer(ckpt.payload["spm"]), ckpt, run.path)


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
