"""Translation as a run kind of the trainer (:mod:`cn3.train.trainer`).

Run directory (:class:`cn3.runs.layout.RunDir` paths plus the subword models)::

    RUN/config.yaml          resolved config          RUN/spm.joint.model   (or spm.src/spm.tgt.model)
    RUN/log.txt              everything printed        RUN/metrics.jsonl     one record per evaluation
    RUN/latest.pt            every epoch end, stop, ``checkpoint_every`` steps and Ctrl-C
    RUN/best.pt              best dev BLEU so far (weights, no optimizer state)
    RUN/results.json         final BLEU per split
    RUN/translations/        the final hypotheses per split
    RUN/predictions/         the same per split with their references (``<split>.json.xz``, :mod:`cn3.runs.layout`)
    RUN/curves.png           train and dev loss, dev BLEU against step

The learning rate is a pure function of the step and the subword model is read back from the run
directory, so a resumed run ends with the same parameters as an uninterrupted one. Checkpoints are
self-describing (``kind: cn3-nmt``): config, model arguments, the subword models' bytes, weights;
``cn3 nmt translate`` needs nothing else.
"""

from __future__ import annotations

import math
from functools import partial

import torch
from rich.table import Table

from cn3.config import ConfigError
from cn3.nmt.analysis import gate_summary, has_gates
from cn3.nmt.config import NMTConfig
from cn3.nmt.data import Batch, EncodedPairs, Tokenizer, encode_pairs, final_splits, load_split, make_batch
from cn3.nmt.inference import load_run, score_pairs
from cn3.nmt.transformer import ModelArgs, Seq2Seq
from cn3.runs.layout import RunDir
from cn3.train.bucketing import bucketed_batches, epoch_seed
from cn3.train.compiled import use_compile
from cn3.train.distributed import World
from cn3.train.kinds import TRANSLATION_CHECKPOINT
from cn3.train.optim import make_optimizer
from cn3.train.runtime import autocast, make_scaler, seed_everything
from cn3.train.state import TrainState
from cn3.train.trainer import loss_for_backward, summed_loss
from cn3.util.atomic import atomic_write, atomic_write_text
from cn3.util.console import console


def learning_rate(step: int, peak: float, warmup: int) -> float:
    """Linear warm-up to ``peak`` over ``warmup`` steps, then ``peak * sqrt(warmup / step)``."""
    step = max(step, 1)
    if warmup <= 0:
        return peak
    return peak * min(step / warmup, math.sqrt(warmup / step))


def token_lengths(data: EncodedPairs) -> list[int]:
    """Each pair's padded width: the longer of the source and the target with ``<s>``/``</s>``."""
    return [max(len(s), len(t) + 1) for s, t in zip(data.src, data.tgt)]


@torch.no_grad()
def validation_loss(model: Seq2Seq, data: EncodedPairs, max_tokens: int, smoothing: float, device) -> float:
    """Per-token NLL (no smoothing in the number; natural log) of ``data``, summed on the device (in
    float64) and read once."""
    model.eval()
    nll_sum, tokens = torch.zeros((), dtype=torch.float64, device=device), 0
    for indices in bucketed_batches(token_lengths(data), 0, shuffle=False, max_tokens=max_tokens, pool=0):
        batch = make_batch(data, indices)
        tokens += batch.tokens  # counted before the copy: on the device it would be waited for
        batch = batch.to(device)
        _, nll = model.loss(model(batch.src, batch.tgt_in), batch.tgt_out, smoothing)
        nll_sum += nll.double()
    return float(nll_sum) / max(tokens, 1)


def _tokenizer(run: RunDir, cfg: NMTConfig, train_pairs, read_back: bool) -> Tokenizer:
    """Train the subword model and write it into the run, or (``read_back``: resuming, or a torchrun
    rank other than 0) read the run's."""
    if read_back:
        tok = Tokenizer.from_dir(run.path)
        if tok is None:
            raise ConfigError(f"cannot resume: {run.path} has no subword model (spm.*.model)")
        return tok
    with console.status("training the sentencepiece BPE model on the training split"):
        tok = Tokenizer.train(train_pairs, cfg.data)
    for name, blob in tok.files().items():
        atomic_write(run.path / name, lambda handle, b=blob: handle.write(b))
    return tok


def corpus_name(cfg: NMTConfig) -> str:
    d = cfg.data
    if d.corpus == "multi30k":
        return f"multi30k {d.src_lang}-{d.tgt_lang}"
    return f"{d.train_src} -> {d.train_tgt}"


class TranslationTask:
    """A translation run's model, batches, loss and scoring (a :class:`cn3.train.trainer.RunTask`).

    Args:
        cfg: the resolved config.
        tok: the run's subword model.
        train_data, val_data: the encoded training and validation pairs.
        val_pairs: the validation pairs as text (dev BLEU).
        device: where the model trains.
    """

    unit = "tgt tok"
    device_collate = False  # batches are built on the host (LoopConfig.device_batches is the sentence tasks')
    checkpoint_kind = TRANSLATION_CHECKPOINT
    loss_reduction = "sum"  # Seq2Seq.loss sums over the batch's target tokens
    ema_decay = 0.0  # no weight average

    def __init__(self, cfg: NMTConfig, tok: Tokenizer, train_data: EncodedPairs, val_data: EncodedPairs,
                 val_pairs: list, device: torch.device):
        t = cfg.train
        self.cfg, self.tok, self.device = cfg, tok, device
        self.train_data, self.val_data, self.val_pairs = train_data, val_data, val_pairs
        use_compile(t.compile, device, "translation runs train eager (their batches are cut by tokens)")
        seed_everything(t.seed)
        self.args = ModelArgs(tok.src_vocab, tok.tgt_vocab)
        self.model = Seq2Seq(cfg.model, self.args).to(device)
        self.scaler = make_scaler(t.precision, device)
        self.optimizer = make_optimizer(self.model, "adam", t.lr, t.l2, betas=(0.9, 0.98), eps=1e-9)
        self.lengths = token_lengths(train_data)
        # the batch loader's collation; not a bound method, which would take the model to spawned workers
        self.collate = partial(make_batch, train_data)

    def batches(self, epoch: int) -> list:
        t = self.cfg.train
        return bucketed_batches(self.lengths, 0, shuffle=True, seed=epoch_seed(t.seed, epoch),
                                max_tokens=t.max_tokens, pool=0)

    def count(self, indices) -> int:
        return sum(len(self.train_data.tgt[i]) + 1 for i in indices)  # target tokens with </s>: Batch.tokens

    def forward_backward(self, batch: Batch, count: int, weight=1.0) -> torch.Tensor:
        batch = batch.to(self.device)
        with autocast(self.device, self.cfg.train.precision):
            logits = self.model(batch.src, batch.tgt_in)
        loss, _ = self.model.loss(logits.float(), batch.tgt_out, self.cfg.train.label_smoothing)
        loss_for_backward(loss, self.loss_reduction, count, weight).backward()
        return summed_loss(loss, self.loss_reduction, count)

    def lr(self, step: int, epoch: int) -> float:
        return learning_rate(step, self.cfg.train.lr, self.cfg.train.warmup)

    def evaluate(self, model, bar) -> tuple[float, dict, str]:
        t = self.cfg.train
        val_loss = (validation_loss(model, self.val_data, t.max_tokens, t.label_smoothing, self.device)
                    if len(self.val_data) else float("nan"))
        bleu, _, _ = score_pairs(model, self.tok, self.val_pairs, t.eval_beam, t.alpha, t.eval_batch_size,
                                 self.device, label="dev BLEU", bar=bar)
        ppl = math.exp(min(val_loss, 50)) if val_loss == val_loss else float("nan")
        return bleu, {"dev_loss": round(val_loss, 4), "dev_bleu": round(bleu, 2)}, \
            f"dev loss {val_loss:.3f} (ppl {ppl:.1f}), dev BLEU {bleu:.2f}"

    def checkpoint_payload(self) -> dict:
        """The format, the learning rate's schedule, the subword models' bytes and the corpus."""
        t = self.cfg.train
        return {"format": 1,
                "scheduler": {"type": "linear_warmup_inverse_sqrt", "lr": t.lr, "warmup": t.warmup},
                "spm": self.tok.models,
                "data": {"corpus": corpus_name(self.cfg), "train_pairs": len(self.train_data),
                         "skipped": self.train_data.skipped}}

    def final_results(self, run: RunDir, state: TrainState) -> tuple[dict, Table | None, list[str]]:
        """Score the best checkpoint on ``train.final_splits`` and keep its translations (plain and,
        with their references, as ``predictions/<split>.json.xz``); under a hybrid encoder, the mean
        local gate on val."""
        cfg, device = self.cfg, self.device
        loaded = load_run(run.path, device)
        t = cfg.train
        results = {"corpus": corpus_name(cfg), "encoder": cfg.model.encoder, "seed": t.seed,
                   "parameters": loaded.model.n_parameters(), "steps": state.step, "best_step": state.best_step,
                   "best_epoch": state.best_epoch, "seconds": round(state.seconds, 1), "beam": t.final_beam,
                   "alpha": t.alpha, "processes": state.world_size, "scores": {}, "predictions": {}}
        read: dict[str, list[tuple[str, str]]] = {}  # the splits scored, so the gates' val is read once
        for name in final_splits(t.final_splits, cfg.data.corpus):
            try:
                pairs = read[name] = load_split(cfg.data, name, t.seed)
            except ConfigError as err:
                run.log(f"[yellow]skipping final split {name}[/]: {err}")
                continue
            bleu, signature, hyps = score_pairs(loaded.model, loaded.tokenizer, pairs, t.final_beam, t.alpha,
                                                t.eval_batch_size, device, label=f"{name} BLEU")
            atomic_write_text(run.path / "translations" / f"{name}.beam{t.final_beam}.txt", "\n".join(hyps) + "\n")
            # one schema for every kind of run: metric and score
            results["scores"][name] = {"metric": "bleu", "score": round(bleu, 2), "signature": signature,
                                       "sentences": len(pairs)}
            results["predictions"][name] = run.write_predictions(name, [ref for _, ref in pairs], hyps, "bleu", None,
                                                                 results["corpus"])
        if has_gates(cfg.model):
            pairs = read.get("val") or load_split(cfg.data, "val", t.seed)  # never a test split: a diagnostic
            results["gates"] = gate_summary(loaded.model, loaded.tokenizer, [src for src, _ in pairs], "val", device)
            run.log(f"mean local gate g on val: {results['gates']['mean']:.3f} "
                    f"(per layer {', '.join(f'{g:.3f}' for g in results['gates']['per_layer'])})")
        table = Table(title=f"nmt · {results['encoder']} · {results['corpus']} · seed {results['seed']}")
        for col in ("split", "BLEU", "sentences", "beam", "steps", "wall time", "parameters"):
            table.add_column(col)
        for split, s in results["scores"].items():
            table.add_row(split, f"{s['score']:.2f}", str(s["sentences"]), str(t.final_beam), str(state.step),
                          f"{state.seconds:.0f} s", f"{results['parameters']:,}")
        if not results["scores"]:
            return results, None, []
        return results, table, [f"sacreBLEU signature: {next(iter(results['scores'].values()))['signature']}"]


def build_task(cfg: NMTConfig, run: RunDir, config_dict: dict, world: World, resume: bool, device: torch.device,
               command: str | None = None) -> tuple[TranslationTask, str]:
    """Read the corpus, create the run directory, train (or read back) the subword model and build
    the :class:`TranslationTask`; returns it with the phrase the log names the run by. ``command``
    is not recorded for translation runs.

    Raises:
        ConfigError: a bad final split name, or no training pair within ``data.max_len``.
    """
    t = cfg.train
    final_splits(t.final_splits, cfg.data.corpus)  # a typo fails now, not after training
    train_pairs = load_split(cfg.data, "train", t.seed)
    val_pairs = load_split(cfg.data, "val", t.seed)
    run.create(config_dict, resume)
    if not world.main:
        world.barrier()  # rank 0 trains the subword model (or finds it), the others read it
    tok = _tokenizer(run, cfg, train_pairs, resume or not world.main)
    if world.main:
        world.barrier()
    train_data = encode_pairs(tok, train_pairs, cfg.data.max_len)
    val_data = encode_pairs(tok, val_pairs, cfg.data.max_len)
    if not len(train_data):
        raise ConfigError(f"no training pair is within data.max_len={cfg.data.max_len} subwords")
    task = TranslationTask(cfg, tok, train_data, val_data, val_pairs, device)
    processes = f" × {world.size} processes" if world.active else ""
    what = (f"nmt/{cfg.model.encoder} on {corpus_name(cfg)} ({len(train_data):,} pairs, {train_data.skipped:,} "
            f"skipped by length; {len(val_pairs):,} dev pairs; vocabulary {tok.src_vocab:,}/{tok.tgt_vocab:,}; "
            f"{task.model.n_parameters():,} parameters; device {device}{processes})")
    return task, what
