"""CN3's edge-weight options against the paper's softmax: accuracy (the grid's report) beside the graph
statistics of layer 1 on dev (``analyze.sh``), mean ± std over seeds, and the readable-default test.

    cn3 experiment run graphs --budget cpu --jobs 2 --threads 1 --out runs     # the grid
    cn3 experiment report graphs --budget cpu --runs runs --out docs/runs/experiments/graphs-cpu/report
    bash docs/runs/graphs-options/analyze.sh runs/graphs-cpu                   # graphs.json, energy.json per cell
    .venv/bin/python docs/runs/graphs-options/summarize.py                     # summary.md, summary.json here

A variant is the readable default when, on every task of the spec (TREC, SICK, SST-2) at three seeds,
it is not worse than softmax by the paired test (Holm-adjusted p >= 0.05 or a difference >= 0) and its
dev graphs have hub share <= 50%, query share >= 20% and row entropy <= 0.6 of its maximum. Softmax
cells reused from docs/runs/cn3-options (trained before their checkpoints were kept) take their graph
statistics from docs/runs/collapse, which measured the same runs (no head agreement or best tree there).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNS = HERE.parent
REPORT = Path(__import__("os").environ.get("GRAPHS_REPORT", RUNS / "experiments" / "graphs-cpu" / "report" / "report.json"))
TASKS = ("trec", "sick", "sst2")
GRAPH = ("hub_share", "entropy", "query_dependence", "tree_agreement", "head_agreement", "head_chance",
         "tree_attachment")
ENERGY = ("query_share",)
PERCENT = {"hub_share", "tree_agreement", "head_agreement", "head_chance", "tree_attachment", "query_share"}
CRITERIA = {"hub_share": (0.50, "<="), "query_share": (0.20, ">="), "entropy": (0.60, "<=")}


def cell_statistics(task: str, variant: str, seed: str) -> dict[str, float]:
    """Layer 1's dev statistics of one cell (its own analysis, or the collapse record of a reused softmax run)."""
    folder = HERE / f"{task}-{variant}-seed{seed}"
    if not folder.is_dir() and variant == "softmax":
        folder = RUNS / "collapse" / f"{task}-base-seed{seed}"
    out: dict[str, float] = {}
    graphs, energy = folder / "graphs.json", folder / "energy.json"
    if graphs.is_file():
        stats = json.loads(graphs.read_text())["layers"][0]["stats"]
        out.update({name: stats[name]["mean"] for name in GRAPH if name in stats})
    if energy.is_file():
        stats = json.loads(energy.read_text())["trained"][0]["stats"]
        out.update({name: stats[name] for name in ENERGY if name in stats})
    return out


def fmt(values: list[float], name: str) -> str:
    if not values:
        return "–"
    scale, digits = (100, 1) if name in PERCENT else (1, 2)
    values = [v * scale for v in values]
    unit = "%" if name in PERCENT else ""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}{unit}"
    return f"{statistics.mean(values):.{digits}f}{unit} ± {statistics.stdev(values):.{digits}f}"


def pvalue(p: float) -> str:
    """Two decimals, or two significant digits below 0.01 (a permutation p is never 0)."""
    return f"{p:.2f}" if p >= 0.01 else f"{p:.2g}"


def comparison(row: dict) -> str:
    test = row.get("test")
    if not test:
        return "(baseline)" if row["variant"] == "softmax" else "–"
    return (f"{test['difference']:+.2f} [{test['ci95'][0]:+.2f}, {test['ci95'][1]:+.2f}] p {pvalue(test['p_holm'])}, "
            f"Welch {pvalue(test['welch_p'])} (detectable {test['welch_detectable']:.2f})")


def not_worse(row: dict) -> bool | None:
    test = row.get("test")
    if not test or row["n"] < 3:
        return None
    return test["difference"] >= 0 or test["p_holm"] >= 0.05


def main() -> None:
    report = json.loads(REPORT.read_text())
    rows = [r for r in report["rows"] if r["split"] == "test" or not r["selects_checkpoint"]]
    by_cell = {(r["task"], r["variant"]): r for r in rows}
    variants = list(dict.fromkeys(r["variant"] for r in report["rows"]))
    summary: dict = defaultdict(dict)
    lines = ["| task | edges | test accuracy | against softmax (paired p Holm, Welch) | hub share | row entropy | "
             "query share | argmax = parse head (chance) | best tree's attachment | seeds |", "|" + "---|" * 10]
    for task in TASKS:
        for variant in variants:
            row = by_cell.get((task, variant))
            if row is None or not row["n"]:
                continue
            stats = defaultdict(list)
            for seed in row["seeds"]:
                for name, value in cell_statistics(task, variant, seed).items():
                    stats[name].append(value)
            entry = {"accuracy": {"mean": row["mean"], "std": row["std"], "seeds": row["seeds"]},
                     "test": row.get("test"), "not_worse": not_worse(row),
                     "graphs": {name: values for name, values in stats.items()}}
            entry["criteria"] = {name: _meets(stats.get(name), bound, op) for name, (bound, op) in CRITERIA.items()}
            summary[task][variant] = entry
            head = f"{fmt(stats['head_agreement'], 'head_agreement')} ({fmt(stats['head_chance'], 'head_chance')})"
            lines.append(f"| {task} | {variant} | {row['mean']:.2f} ± {row['std']:.2f} | {comparison(row)} | "
                         f"{fmt(stats['hub_share'], 'hub_share')} | {fmt(stats['entropy'], 'entropy')} | "
                         f"{fmt(stats['query_share'], 'query_share')} | {head} | "
                         f"{fmt(stats['tree_attachment'], 'tree_attachment')} | {row['n']} |")
    lines += ["", "Readable default (every task at 3 seeds: not worse by the paired test, hub share <= 50%, "
              "query share >= 20%, row entropy <= 0.6):", ""]
    for variant in variants[1:]:
        lines.append(f"- {variant}: {verdict(summary, variant)}")
    (HERE / "summary.md").write_text("\n".join(lines) + "\n")
    (HERE / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    print("\n".join(lines))


def _meets(values: list[float] | None, bound: float, op: str) -> dict | None:
    if not values:
        return None
    mean = statistics.mean(values)
    return {"mean": mean, "bound": bound, "op": op, "met": mean <= bound if op == "<=" else mean >= bound}


def verdict(summary: dict, variant: str) -> str:
    """Qualifies, or which criterion each task missed and by how much (or what is not measured)."""
    missed = []
    for task in TASKS:
        entry = summary.get(task, {}).get(variant)
        if entry is None or entry["not_worse"] is None:
            missed.append(f"{task}: not run at 3 seeds")
            continue
        if not entry["not_worse"]:
            missed.append(f"{task}: worse than softmax ({entry['test']['difference']:+.2f}, "
                          f"Holm p {pvalue(entry['test']['p_holm'])})")
        for name, result in entry["criteria"].items():
            if result is None:
                missed.append(f"{task}: {name} not measured")
            elif not result["met"]:
                missed.append(f"{task}: {name} {result['mean']:.3f} (needs {result['op']} {result['bound']})")
    return "qualifies" if not missed else "does not qualify: " + "; ".join(missed)


if __name__ == "__main__":
    main()
