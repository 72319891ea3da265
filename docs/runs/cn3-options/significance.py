"""Each option run of one task against plain CN3 (`base`), on dev and test: paired approximate
randomization over the per-item predictions of the matched seeds pooled, Holm over the options per
split, and Welch's t across the seeds (cn3.stats, scipy).

    .venv/bin/python docs/runs/cn3-options/significance.py RUNS_DIR [TASK]      # TASK: trec (default)

Writes significance.json beside this script (significance-TASK.json for a task other than TREC).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cn3.runs.records import load_predictions
from cn3.stats import format_p, holm, paired_test, welch

HERE = Path(__file__).resolve().parent


def pooled(runs: Path, task: str, option: str, seeds: list[int], split: str):
    gold, pred, scores = [], [], []
    for seed in seeds:
        p = load_predictions(runs / f"{task}-{option}-seed{seed}", split)
        gold += list(p.gold)
        pred += list(p.pred)
        scores.append(json.loads((runs / f"{task}-{option}-seed{seed}" / "results.json").read_text())["scores"][split]["score"])
    return gold, pred, scores


def main() -> None:
    runs = Path(sys.argv[1])
    task = sys.argv[2] if len(sys.argv) > 2 else "trec"
    options = sorted({r.name.removeprefix(f"{task}-").rsplit("-seed", 1)[0] for r in runs.glob(f"{task}-*-seed*")} - {"base"})
    record = {}
    for split in ("dev", "test"):
        rows = []
        for option in options:
            seeds = sorted(int(r.name.rsplit("seed", 1)[1]) for r in runs.glob(f"{task}-{option}-seed*")
                           if (r / "results.json").is_file() and (runs / f"{task}-base-seed{r.name.rsplit('seed', 1)[1]}" / "results.json").is_file())
            gold, pred, scores = pooled(runs, task, option, seeds, split)
            gold_b, pred_b, scores_b = pooled(runs, task, "base", seeds, split)
            assert gold == gold_b
            test = paired_test(gold, pred, pred_b, "accuracy")
            w = welch(scores, scores_b)
            rows.append({"option": option, "seeds": seeds, "difference": round(test.difference, 2),
                         "ci": [round(test.ci_low, 2), round(test.ci_high, 2)], "p": test.p_value,
                         "welch_p": w.p, "welch_note": w.reason})
        for row, p in zip(rows, holm([r["p"] for r in rows])):
            row["p_holm"] = p
            print(f"{split:4} {row['option']:8} seeds {row['seeds']}: {row['difference']:+.2f} "
                  f"[{row['ci'][0]:+.2f}, {row['ci'][1]:+.2f}], paired p {format_p(row['p'])}, Holm {format_p(p)}, "
                  f"Welch p {format_p(row['welch_p']) if row['welch_p'] is not None else row['welch_note']}")
        record[split] = rows
    (HERE / ("significance.json" if task == "trec" else f"significance-{task}.json")).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
