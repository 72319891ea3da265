"""10-fold cross-validation: the open-vocabulary runs against the transductive ones, fold by fold.

    .venv/bin/python docs/runs/open-vocab/cv_folds.py subj docs/runs/subj-cn3-fold{F}-seed1
    .venv/bin/python docs/runs/open-vocab/cv_folds.py mr docs/runs/tune/mr-adv2-fold{F}-seed1

Reads ``results.json`` of ``docs/runs/open-vocab/<task>-cn3-fold{F}-seed1`` and of the older records
(``{F}`` = 0..9), prints mean ± std (sample std, n = 10) of dev and test, the per-fold test scores and
differences, a paired t-test and a Wilcoxon signed-rank test over the folds (scipy.stats), and writes
``<task>_folds_significance.json`` beside this script. The same folds (the reader's seeded split)
are the pairs: each fold's test sentences are the same in both.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from scipy import stats

HERE = Path(__file__).resolve().parent


def scores(pattern: str) -> tuple[list[float], list[float]]:
    dev, test = [], []
    for fold in range(10):
        results = json.loads((Path(pattern.format(F=fold)) / "results.json").read_text())
        dev.append(results["scores"]["dev"]["score"])
        test.append(results["scores"]["test"]["score"])
    return dev, test


def main() -> None:
    task, old_pattern = sys.argv[1], sys.argv[2]
    new_dev, new_test = scores(str(HERE / f"{task}-cn3-fold{{F}}-seed1"))
    old_dev, old_test = scores(old_pattern)
    diff = [n - o for n, o in zip(new_test, old_test)]
    record = {
        "task": task, "old": old_pattern,
        "new": {"dev": f"{statistics.mean(new_dev):.2f} ± {statistics.stdev(new_dev):.2f}",
                "test": f"{statistics.mean(new_test):.2f} ± {statistics.stdev(new_test):.2f}", "test_folds": new_test},
        "old_scores": {"dev": f"{statistics.mean(old_dev):.2f} ± {statistics.stdev(old_dev):.2f}",
                       "test": f"{statistics.mean(old_test):.2f} ± {statistics.stdev(old_test):.2f}", "test_folds": old_test},
        "test_differences": [round(d, 2) for d in diff],
        "mean_difference": round(statistics.mean(diff), 2),
        "folds_lower": sum(d < 0 for d in diff),
        "paired_t_p": stats.ttest_rel(new_test, old_test).pvalue,
        "wilcoxon_p": stats.wilcoxon(new_test, old_test).pvalue,
    }
    print(json.dumps(record, indent=1))
    (HERE / f"{task}_folds_significance.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
