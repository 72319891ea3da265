"""bf16 autocast against fp32, forward + backward, in one process.

    .venv/bin/python bench/precision.py                 # layers, then whole training steps
    .venv/bin/python bench/precision.py --quick         # fewer repeats, no Transformer-base shapes
    .venv/bin/python bench/precision.py --only training

1. Layers (``train.precision=bf16`` runs exactly this: the forward pass under
   ``torch.autocast(device, bfloat16)``, the backward pass following its dtypes, fp32 parameters):
   the CN3 dynamic-graph layer at the four shapes of ``bench/cn3_layer.py`` (d=300, energy 100;
   with ``nn.MultiheadAttention`` in fp32 as the outside reference the targets name), the
   NMT Transformer encoder layer and the hybrid local/global layer (pre-norm, 4/8 heads), and the
   ON-LSTM layer (chunk 8). The same module runs in fp32 and in bf16, alternating call by call, so
   both see the same machine load; ratio = median over back-to-back pairs of fp32 time / bf16 time
   (> 1: bf16 is faster).
2. Whole training steps (collate + forward + backward + clipping + optimizer), with the shipped
   configs: SNLI (``cn3/configs/snli.yaml``, pairs/s) and Multi30k en-de with the small NMT config
   (``cn3/configs/nmt/small.yaml``, hybrid encoder, target tokens/s). Two copies of the model with
   the same init take the same batches in turn, one in fp32 and one under bf16 autocast.

Targets: whole-training speed-up >= 1.5x for the NMT small config and >= 1.3x for SNLI;
the CN3 layer in bf16 <= 3x MHA at 1 x 1000 and <= 5x at 1 x 2500.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cn3.layers import DynamicGraphLayer  # noqa: E402
from cn3.layers.attention import padding_mask  # noqa: E402
from cn3.layers.hybrid_attention import HybridSelfAttention  # noqa: E402
from cn3.layers.onlstm import ONLSTM  # noqa: E402
from cn3.layers.transformer import EncoderLayer, MultiHeadAttention  # noqa: E402

CN3_SHAPES = [(64, 20), (8, 200), (1, 1000), (1, 2500)]
NMT_SHAPES = [(64, 25, 256, 4), (32, 50, 512, 8), (8, 200, 512, 8)]
RNN_SHAPES = [(64, 25, 256), (32, 50, 512)]


def bf16(enabled: bool):
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled)


def pair_race(run, warmup: int, repeats: int) -> tuple[float, float, float]:
    """``run(bf16: bool)`` alternately in fp32 and bf16: (fp32 ms, bf16 ms, median pair ratio)."""
    for _ in range(warmup):
        run(False)
        run(True)
    fp32, half = [], []
    for _ in range(repeats):
        for enabled, times in ((False, fp32), (True, half)):
            start = time.perf_counter()
            run(enabled)
            times.append(time.perf_counter() - start)
    ratio = statistics.median(a / b for a, b in zip(fp32, half))
    return statistics.median(fp32) * 1e3, statistics.median(half) * 1e3, ratio


def layer_step(module: nn.Module, x: torch.Tensor, mask: torch.Tensor | None, call):
    def run(enabled: bool) -> None:
        module.zero_grad(set_to_none=True)
        x.grad = None
        with bf16(enabled):
            out = call(module, x, mask)
        out.float().sum().backward()
    return run


def bench_layers(args) -> None:
    warmup, repeats = args.warmup, args.repeats
    print(f"\n1. layers: fp32 vs bf16 autocast, forward + backward, threads={torch.get_num_threads()}, "
          f"median of {repeats} after {warmup} warm-up")
    print(f"{'layer':<28} {'shape':>16} {'fp32 ms':>9} {'bf16 ms':>9} {'speed-up':>9}")
    for batch, n in CN3_SHAPES[: 3 if args.quick else None]:
        torch.manual_seed(0)
        x = torch.randn(batch, n, 300, requires_grad=True)
        mask = torch.ones(batch, n, dtype=torch.bool)
        cn3 = DynamicGraphLayer(300, energy_dim=100)
        mha = nn.MultiheadAttention(300, 1, batch_first=True)
        f, h, r = pair_race(layer_step(cn3, x, mask, lambda m, x, k: m(x, k)[0]), warmup, repeats)
        # the targets' reference: fp32 MHA, timed back to back with the bf16 CN3 layer
        mha_fp32, cn3_bf16, _ = pair_race(
            _against(layer_step(mha, x, None, lambda m, x, k: m(x, x, x, need_weights=False)[0]),
                     layer_step(cn3, x, mask, lambda m, x, k: m(x, k)[0])), warmup, repeats)
        print(f"{'CN3 layer (d 300, e 100)':<28} {f'{batch} x {n}':>16} {f:9.1f} {h:9.1f} {r:8.2f}x"
              f"   bf16 CN3 / fp32 MHA: {cn3_bf16 / mha_fp32:.2f}x", flush=True)
    for batch, n, d, heads in NMT_SHAPES[: 2 if args.quick else None]:
        torch.manual_seed(0)
        x = torch.randn(batch, n, d, requires_grad=True)
        lengths = torch.randint(max(1, n // 2), n + 1, (batch,))
        lengths[0] = n
        mask = padding_mask(lengths, n)
        for name, attn in (("Transformer encoder layer", MultiHeadAttention(d, heads)),
                           ("hybrid encoder layer (m=1)", HybridSelfAttention(d, heads, window=1))):
            layer = EncoderLayer(attn, d, 4 * d if d < 512 else 2048, 0.1)
            f, h, r = pair_race(layer_step(layer, x, mask, lambda m, x, k: m(x, k)[0]), warmup, repeats)
            print(f"{name:<28} {f'{batch} x {n} x {d}':>16} {f:9.1f} {h:9.1f} {r:8.2f}x", flush=True)
    for batch, n, d in RNN_SHAPES:
        torch.manual_seed(0)
        x = torch.randn(batch, n, d, requires_grad=True)
        mask = torch.ones(batch, n, dtype=torch.bool)
        rnn = ONLSTM(d, d, chunk_size=8)
        f, h, r = pair_race(layer_step(rnn, x, mask, lambda m, x, k: _first(m(x, k))), warmup, repeats)
        print(f"{'ON-LSTM layer (chunk 8)':<28} {f'{batch} x {n} x {d}':>16} {f:9.1f} {h:9.1f} {r:8.2f}x", flush=True)


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def _against(reference, candidate):
    """A pair_race body: the reference in its "fp32" turn, the candidate under bf16 in its turn."""
    def run(enabled: bool) -> None:
        (candidate if enabled else reference)(enabled)
    return run


# ----------------------------------------------------------------------------- whole training steps


def sentence_steps(args) -> None:
    from cn3.sentence.batching import item_lengths, make_batch
    from cn3.sentence.model import SentenceGraphModel, model_args_from_dataset
    from cn3.sentence.prepared import ensure_prepared
    from cn3.sentence.resolve import resolve_config
    from cn3.train.bucketing import bucketed_batches
    from cn3.train.optim import make_optimizer
    from cn3.train.runtime import autocast, seed_everything
    from data_prep.dataset import load_prepared

    cfg = resolve_config("snli", None, {}, [])
    ds = load_prepared(ensure_prepared(cfg))
    train = ds.splits["train"]
    batches = bucketed_batches(item_lengths(train), cfg.train.batch_size, shuffle=True, seed=0)
    batches = batches[: args.warmup + args.steps]
    models = {}
    for precision in ("fp32", "bf16"):
        seed_everything(0)
        model = SentenceGraphModel(cfg.model, model_args_from_dataset(ds), ds.embeddings).train()
        models[precision] = (model, make_optimizer(model, cfg.train.optimizer, cfg.train.lr, cfg.train.weight_decay))
    device = torch.device("cpu")

    def step(precision: str, indices) -> int:
        model, optimizer = models[precision]
        batch = make_batch(train, indices)
        with autocast(device, precision):
            out = model(batch)
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.clip)
        optimizer.step()
        return len(indices)

    report("SNLI (cn3/configs/snli.yaml)", "pairs/s", step, batches, args.warmup, 1.3)


def translation_steps(args) -> None:
    import yaml

    from cn3.nmt.config import config_from_dict
    from cn3.nmt.data import Tokenizer, encode_pairs, load_split, make_batch
    from cn3.nmt.task import token_lengths
    from cn3.nmt.transformer import ModelArgs, Seq2Seq
    from cn3.train.bucketing import bucketed_batches
    from cn3.train.optim import make_optimizer
    from cn3.train.runtime import autocast, seed_everything

    root = Path(__file__).resolve().parents[1]
    raw = yaml.safe_load((root / "cn3/configs/nmt/small.yaml").read_text())
    raw.setdefault("model", {})["encoder"] = "hybrid"
    cfg = config_from_dict(raw)
    pairs = load_split(cfg.data, "train", cfg.train.seed)
    tok = Tokenizer.train(pairs, cfg.data)
    data = encode_pairs(tok, pairs, cfg.data.max_len)
    batches = bucketed_batches(token_lengths(data), 0, shuffle=True, seed=0, max_tokens=cfg.train.max_tokens,
                               pool=0)[: args.warmup + args.steps]
    models = {}
    for precision in ("fp32", "bf16"):
        seed_everything(0)
        model = Seq2Seq(cfg.model, ModelArgs(tok.src_vocab, tok.tgt_vocab)).train()
        models[precision] = (model, make_optimizer(model, "adam", cfg.train.lr, cfg.train.l2,
                                                   betas=(0.9, 0.98), eps=1e-9))
    device = torch.device("cpu")

    def step(precision: str, indices) -> int:
        model, optimizer = models[precision]
        batch = make_batch(data, indices)
        with autocast(device, precision):
            logits = model(batch.src, batch.tgt_in)
        loss, _ = model.loss(logits.float(), batch.tgt_out, cfg.train.label_smoothing)
        optimizer.zero_grad(set_to_none=True)
        (loss / batch.tokens).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.clip)
        optimizer.step()
        return batch.tokens

    report("Multi30k en-de, nmt/small.yaml, hybrid", "tgt tok/s", step, batches, args.warmup, 1.5)


def report(name: str, unit: str, step, batches, warmup: int, target: float) -> None:
    counts = {"fp32": 0, "bf16": 0}
    seconds = {"fp32": 0.0, "bf16": 0.0}
    ratios = []
    for i, indices in enumerate(batches):
        pair = {}
        for precision in ("fp32", "bf16"):
            start = time.perf_counter()
            n = step(precision, indices)
            pair[precision] = time.perf_counter() - start
            if i >= warmup:
                counts[precision] += n
                seconds[precision] += pair[precision]
        if i >= warmup:
            ratios.append(pair["fp32"] / pair["bf16"])
    rates = {p: counts[p] / seconds[p] for p in counts}
    speedup = statistics.median(ratios)
    print(f"{name:<42} fp32 {rates['fp32']:9,.0f} {unit}  bf16 {rates['bf16']:9,.0f} {unit}  "
          f"speed-up {rates['bf16'] / rates['fp32']:.2f}x (median per batch {speedup:.2f}x; target >= {target}x)",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and shapes")
    parser.add_argument("--only", choices=("layers", "training"), default=None)
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per layer and precision")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=None, help="timed training steps per precision")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    args.repeats = args.repeats or (3 if args.quick else 7)
    args.steps = args.steps or (15 if args.quick else 40)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {args.threads}, load average before {os.getloadavg()[0]:.2f}")
    if args.only in (None, "layers"):
        bench_layers(args)
    if args.only in (None, "training"):
        print(f"\n2. whole training steps, {args.steps} timed batches after {args.warmup} (alternating fp32 / bf16)")
        sentence_steps(args)
        translation_steps(args)
    print(f"\nload average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
