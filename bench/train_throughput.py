"""Training throughput on SNLI-shaped pairs with the default SNLI model (cn3/configs/snli.yaml).

    .venv/bin/python bench/train_throughput.py [--steps 40] [--threads 2]

Prints pairs/s for the full training step (collate + forward + backward + AdaDelta update) and,
as the same-process reference, the paper's BiLSTM-only ablation on the same batches, so the ratio
shows what the dynamic graph layer costs. Target: >= 600 pairs/s.
"""

from __future__ import annotations

import argparse
import time

import torch

from cn3.sentence.batching import item_lengths, make_batch
from cn3.sentence.model import SentenceGraphModel, model_args_from_dataset
from cn3.sentence.prepared import ensure_prepared
from cn3.sentence.resolve import resolve_config
from cn3.train.bucketing import bucketed_batches
from cn3.train.optim import make_optimizer
from cn3.train.runtime import seed_everything
from data_prep.dataset import load_prepared


def pairs_per_second(cfg, ds, batches, warmup: int) -> float:
    seed_everything(0)
    model = SentenceGraphModel(cfg.model, model_args_from_dataset(ds), ds.embeddings)
    optimizer = make_optimizer(model, cfg.train.optimizer, cfg.train.lr, cfg.train.weight_decay)
    train = ds.splits["train"]
    model.train()
    n, start = 0, None
    for step, indices in enumerate(batches):
        if step == warmup:
            n, start = 0, time.perf_counter()
        batch = make_batch(train, indices)
        out = model(batch)
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.clip)
        optimizer.step()
        n += len(indices)
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    cfg = resolve_config("snli", None, {}, [])
    ds = load_prepared(ensure_prepared(cfg))
    lengths = item_lengths(ds.splits["train"])
    batches = bucketed_batches(lengths, cfg.train.batch_size, shuffle=True, seed=0)[: args.warmup + args.steps]
    cn3_rate = pairs_per_second(cfg, ds, batches, args.warmup)
    ablation = resolve_config("snli", None, {}, ["model.encoder=lstm"])
    lstm_rate = pairs_per_second(ablation, ds, batches, args.warmup)
    print(f"SNLI training, batch {cfg.train.batch_size}, {args.steps} steps, {args.threads} threads:")
    print(f"  CN3 (snli.yaml)           {cn3_rate:7,.0f} pairs/s  (target >= 600)")
    print(f"  BiLSTM-only, same batches {lstm_rate:7,.0f} pairs/s")
    print(f"  time ratio CN3 / BiLSTM   {lstm_rate / cn3_rate:7.2f}x")


if __name__ == "__main__":
    main()
