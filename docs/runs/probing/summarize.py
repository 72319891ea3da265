"""Probing results, mean ± std over seeds, in the layout of Xu et al. Table 3 / Hao et al. Table 3.

    # for each run R, named <model>-seed<S>:
    cn3 probe R --out docs/runs/probing/<model>-seed<S>
    .venv/bin/python docs/runs/probing/summarize.py

One row per model and feature set (a sentence run's vector; a translation run's final encoder
output, and for onlstm_san also H_onlstm and H_san apart), test accuracy in % per probing task and
the mean per group; the majority-class baseline first. Writes summary.json here.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: rows in the order of RESULTS.md (Xu et al. Table 3, then Hao et al. Table 3, then the sentence encoders);
#: any other model after them
ORDER = ["nmt-transformer", "nmt-local", "nmt-hybrid", "nmt-onlstm_san", "nmt-san6", "trec-cn3", "trec-lstm"]


def fmt(values: list[float]) -> str:
    values = [100 * v for v in values]
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def main() -> None:
    scores: dict = defaultdict(lambda: defaultdict(list))  # (model, features) -> task -> [accuracy per seed]
    majority, groups, order = {}, {}, []
    for path in sorted(HERE.glob("*/probe.json")):
        record = json.loads(path.read_text())
        model = path.parent.name.rsplit("-seed", 1)[0]
        for task in record["tasks"]:
            name = task["task"].removeprefix("probe_")
            if name not in order:
                order.append(name)
            majority[name], groups[name] = task["majority"]["accuracy"], task["group"]
            for features, result in task["features"].items():
                scores[(model, features)][name].append(result["test_accuracy"])
    group_names = list(dict.fromkeys(groups[t] for t in order))
    header = [*order, *(f"{g} mean" for g in group_names)]
    print("| model · features | seeds | " + " | ".join(header) + " |")
    print("|---|---|" + "---|" * len(header))

    def group_means(per_task: dict[str, list[float]]) -> list[str]:
        out = []
        for g in group_names:
            tasks = [t for t in order if groups[t] == g and per_task.get(t)]
            seeds = min(len(per_task[t]) for t in tasks)
            out.append(fmt([statistics.mean(per_task[t][s] for t in tasks) for s in range(seeds)]))
        return out

    base = {t: [majority[t]] for t in order}
    print("| majority class | – | " + " | ".join([*(fmt(base[t]) for t in order), *group_means(base)]) + " |")
    summary = {"majority": majority, "groups": groups, "rows": {}}
    rank = {m: i for i, m in enumerate(ORDER)}
    for (model, features), per_task in sorted(scores.items(), key=lambda kv: rank.get(kv[0][0], len(ORDER))):
        seeds = max(len(v) for v in per_task.values())
        cells = [fmt(per_task[t]) if per_task.get(t) else "–" for t in order]
        print(f"| {model} · {features} | {seeds} | " + " | ".join([*cells, *group_means(per_task)]) + " |")
        summary["rows"][f"{model} · {features}"] = {t: per_task[t] for t in order if per_task.get(t)}
    (HERE / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
