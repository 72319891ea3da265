"""Is encoder A better than encoder B on a task? Two tests over runs of matched seeds (cn3.stats).

    .venv/bin/python bench/significance.py --a runs/zoo/trec-cn3-seed{1,2,3} --b runs/zoo/trec-lstm-seed{1,2,3}

* **Paired approximate randomization** (:func:`cn3.stats.paired_test`; Riezler & Maxwell, 2005): A's
  and B's predictions on the test split, the seeds' items pooled (seed s of A paired with seed s of
  B, the same sentences), the statistic the difference in accuracy; the null swaps A's and B's
  prediction of each sentence at random. With the 95% paired bootstrap interval of the difference.
* **Welch's t-test across seeds** (:func:`cn3.stats.welch`) on the per-seed test scores: does the
  difference survive seed variance? (Needs 2 seeds a side.)

Accuracy tasks only (TREC, SICK, ...). Both tests are two-sided. The predictions come from each run's
best checkpoint, so runs trained before cn3 0.3 (without RUN/predictions/) work too; for runs that
have them, ``cn3 compare`` compares two runs without a model. Run it from the directory the runs were
trained in (their prepared datasets are found from their configs, as ``cn3 evaluate`` finds them).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from cn3.metrics import accuracy
from cn3.runs.layout import RunDir
from cn3.sentence.inference import load_model, predict
from cn3.sentence.prepared import ensure_prepared
from cn3.stats import paired_test, welch
from data_prep.dataset import load_prepared


def run_predictions(run: Path, split: str) -> tuple[list[int], list[int]]:
    """The gold and predicted label ids of the run's best checkpoint on ``split`` (dataset order)."""
    loaded = load_model(RunDir(run), torch.device("cpu"))
    ds = load_prepared(ensure_prepared(loaded.config))
    preds, _ = predict(loaded.model, ds.splits[split], torch.device("cpu"))
    return ds.splits[split].t["y"].tolist(), list(preds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", nargs="+", type=Path, required=True, help="runs of A, one per seed")
    parser.add_argument("--b", nargs="+", type=Path, required=True, help="runs of B, the same seeds in the same order")
    parser.add_argument("--split", default="test")
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if len(args.a) != len(args.b):
        parser.error("give as many runs of A as of B (matched seeds)")
    torch.set_num_threads(1)
    a = [run_predictions(r, args.split) for r in args.a]
    b = [run_predictions(r, args.split) for r in args.b]
    for (gold_a, _), (gold_b, _), run_a, run_b in zip(a, b, args.a, args.b):
        if gold_a != gold_b:
            parser.error(f"{run_a} and {run_b} were not trained on the same {args.split} items")
    paired = paired_test([g for gold, _ in a for g in gold], [p for _, pred in a for p in pred],
                         [p for _, pred in b for p in pred], "accuracy", resamples=args.resamples)
    score_a, score_b = [100 * accuracy(*run) for run in a], [100 * accuracy(*run) for run in b]
    seeds = welch(score_a, score_b)
    result = {"a": [str(r) for r in args.a], "b": [str(r) for r in args.b], "split": args.split,
              "items": len(a[0][0]), "seeds": len(a),
              "a_mean": float(np.mean(score_a)), "a_std": float(np.std(score_a, ddof=1)) if len(a) > 1 else 0.0,
              "b_mean": float(np.mean(score_b)), "b_std": float(np.std(score_b, ddof=1)) if len(b) > 1 else 0.0,
              "difference": paired.difference, "ci95": [paired.ci_low, paired.ci_high],
              "p_paired_randomization": paired.p_value, "p_welch_seeds": seeds.p}
    print(f"A {result['a_mean']:.2f} ± {result['a_std']:.2f} vs B {result['b_mean']:.2f} ± {result['b_std']:.2f} "
          f"({len(a)} seeds, {result['items']} {args.split} items each)")
    print(f"seeds pooled: {paired.sentence(args.split)}")
    print(f"across seeds: Welch's t = {seeds.t:.2f}, p = {seeds.p:.4f}" if seeds.p is not None else
          f"across seeds: no Welch test ({seeds.reason})")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
