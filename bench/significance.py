"""Is encoder A better than encoder B on a task? Two tests over runs of matched seeds.

    .venv/bin/python bench/significance.py --a runs/zoo/trec-cn3-seed{1,2,3} --b runs/zoo/trec-lstm-seed{1,2,3}

* **Paired approximate randomization** (``scipy.stats.permutation_test``, paired samples): the
  per-sentence correctness of A's and B's predictions on the test split, the seeds' predictions pooled
  (seed s of A paired with seed s of B, the same sentences), the statistic the mean difference in
  accuracy; the null swaps A's and B's outcome on each sentence at random.
* **Welch's t-test across seeds** (``scipy.stats.ttest_ind(equal_var=False)``) on the per-seed test
  scores: does the difference survive seed variance?

Accuracy tasks only (TREC, SICK, ...). Both tests are two-sided; the script prints both p-values,
the mean difference and a 95% bootstrap interval of it (``scipy.stats.bootstrap``, paired).
Run it from the directory the runs were trained in (their prepared datasets are found from their
configs, as ``cn3 evaluate`` finds them).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from scipy import stats

from cn3.run_dir import RunDir
from cn3.trainer import ensure_prepared, load_model, predict
from data_prep.dataset import load_prepared


def correctness(run: Path, split: str) -> np.ndarray:
    """1.0 where the run's best checkpoint labels a ``split`` item right, else 0.0 (dataset order)."""
    loaded = load_model(RunDir(run), torch.device("cpu"))
    ds = load_prepared(ensure_prepared(loaded.config))
    preds, _ = predict(loaded.model, ds.splits[split], torch.device("cpu"))
    gold = ds.splits[split].t["y"].tolist()
    return np.array([float(p == g) for p, g in zip(preds, gold)])


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
    a = [correctness(r, args.split) for r in args.a]
    b = [correctness(r, args.split) for r in args.b]
    xa, xb = np.concatenate(a), np.concatenate(b)
    rng = np.random.default_rng(0)
    paired = stats.permutation_test((xa, xb), lambda x, y, axis: np.mean(x - y, axis=axis), vectorized=True,
                                    permutation_type="samples", n_resamples=args.resamples, random_state=rng)
    interval = stats.bootstrap((xa, xb), lambda x, y, axis: np.mean(x - y, axis=axis), paired=True,
                               vectorized=True, n_resamples=args.resamples, random_state=rng).confidence_interval
    score_a, score_b = [100 * x.mean() for x in a], [100 * x.mean() for x in b]
    welch = stats.ttest_ind(score_a, score_b, equal_var=False)
    result = {"a": [str(r) for r in args.a], "b": [str(r) for r in args.b], "split": args.split,
              "items": int(len(a[0])), "seeds": len(a),
              "a_mean": float(np.mean(score_a)), "a_std": float(np.std(score_a, ddof=1)) if len(a) > 1 else 0.0,
              "b_mean": float(np.mean(score_b)), "b_std": float(np.std(score_b, ddof=1)) if len(b) > 1 else 0.0,
              "difference": float(100 * (xa.mean() - xb.mean())),
              "ci95": [float(100 * interval.low), float(100 * interval.high)],
              "p_paired_randomization": float(paired.pvalue), "p_welch_seeds": float(welch.pvalue)}
    print(f"A {result['a_mean']:.2f} ± {result['a_std']:.2f} vs B {result['b_mean']:.2f} ± {result['b_std']:.2f} "
          f"({len(a)} seeds, {result['items']} {args.split} items each): A - B = {result['difference']:+.2f} points, "
          f"95% CI [{result['ci95'][0]:+.2f}, {result['ci95'][1]:+.2f}]; paired randomization p = "
          f"{result['p_paired_randomization']:.4f}; Welch across seeds p = {result['p_welch_seeds']:.4f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
