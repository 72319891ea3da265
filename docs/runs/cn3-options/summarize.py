"""CN3's structure options on one task: accuracy and graph statistics per run, mean ± std per option.

    # runs: cn3 train --task TASK --seed S --run-dir runs/opt/TASK-<option>-seedS --set train.num_threads=1 [--set ...]
    # graphs: cn3 analyze graphs runs/opt/TASK-<option>-seedS --split dev --out graphs/TASK-<option>-seedS
    .venv/bin/python docs/runs/cn3-options/summarize.py RUNS_DIR GRAPHS_DIR [TASK]     # TASK: trec (default)
    .venv/bin/python docs/runs/cn3-options/summarize.py docs/runs/cn3-options docs/runs/cn3-options/graphs sick

Prints one row per option (dev and test accuracy, and the dev-split graph statistics of layer 1:
hub share, row entropy / log n, query dependence (mean Jensen-Shannon between a sentence's rows),
Brody et al.'s static share, tree agreement and its chance rate), and writes summary.json here
(summary-TASK.json for a task other than TREC).
For ``energy_heads`` runs the statistics are of the heads' mean attention (``info["alphas"]``).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
STATS = ("hub_share", "entropy", "query_dependence", "static_share", "tree_agreement", "tree_chance")


def mean_std(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    values = [v * scale for v in values]
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def main() -> None:
    runs, graphs = Path(sys.argv[1]), Path(sys.argv[2])
    task = sys.argv[3] if len(sys.argv) > 3 else "trec"
    table: dict = defaultdict(lambda: defaultdict(list))
    for run in sorted(runs.glob(f"{task}-*-seed*")):
        results = run / "results.json"
        if not results.is_file():
            continue
        option = run.name.removeprefix(f"{task}-").rsplit("-seed", 1)[0]
        r = json.loads(results.read_text())
        table[option]["seeds"].append(r["seed"])
        table[option]["dev"].append(r["scores"]["dev"]["score"])
        table[option]["test"].append(r["scores"]["test"]["score"])
        g = graphs / run.name / "graphs.json"  # cn3 analyze graphs --out GRAPHS/<run>
        g = g if g.is_file() else graphs / f"{run.name}.json"  # as archived here
        if g.is_file():
            stats = json.loads(g.read_text())["layers"][0]["stats"]
            for key in STATS:
                table[option][key].append(stats[key]["mean"])
    out = {}
    print("| option | seeds | dev | test | hub share % | entropy | query dep. | static % | tree agr. % (chance) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for option, t in table.items():
        out[option] = {k: list(v) for k, v in t.items()}
        percent = ("hub_share", "static_share", "tree_agreement", "tree_chance")
        g = {k: (mean_std(t[k], 100) if k in percent else mean_std(t[k], digits=3)) if t[k] else "–" for k in STATS}
        print(f"| {option} | {','.join(map(str, t['seeds']))} | {mean_std(t['dev'])} | {mean_std(t['test'])} | "
              f"{g['hub_share']} | {g['entropy']} | {g['query_dependence']} | {g['static_share']} | "
              f"{g['tree_agreement']} ({g['tree_chance']}) |")
    (HERE / ("summary.json" if task == "trec" else f"summary-{task}.json")).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
