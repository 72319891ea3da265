"""Why CN3's graphs collapse: per task and option, the graph statistics (``cn3 analyze graphs``) and
the energy decomposition (``cn3 analyze energy``) of layer 1 on dev, mean ± std over seeds.

    # for each run R (named <task>-<option>-seed<S>):
    cn3 analyze graphs R --split dev --out docs/runs/collapse/<R>      # (--heads for energy_heads runs)
    cn3 analyze energy R --split dev --out docs/runs/collapse/<R>
    .venv/bin/python docs/runs/collapse/summarize.py

Prints two Markdown tables and writes summary.json here. For runs with several energy heads the
first table's statistics are those of the heads' mean attention, the second's are averaged over the
heads (each head's own decomposition; its per-head values are in the run's energy.json).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
GRAPH = ("hub_share", "entropy", "query_dependence", "static_share", "tree_agreement", "tree_chance")
ENERGY = ("query_share", "linear_share", "saturated_share", "energy_spread", "query_term", "key_term")
PERCENT = {"hub_share", "static_share", "tree_agreement", "tree_chance", "query_share", "linear_share",
           "saturated_share"}


def fmt(values: list[float], name: str) -> str:
    if not values:
        return "–"
    scale, digits = (100, 1) if name in PERCENT else (1, 3 if name == "query_dependence" else 2)
    values = [v * scale for v in values]
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def main() -> None:
    table: dict = defaultdict(lambda: defaultdict(list))
    for run in sorted(p for p in HERE.iterdir() if p.is_dir()):
        key = run.name.rsplit("-seed", 1)[0]
        t = table[key]
        t["seeds"].append(int(run.name.rsplit("-seed", 1)[1]))
        graphs = run / "graphs.json"
        if graphs.is_file():
            layer = json.loads(graphs.read_text())["layers"][0]  # layer 1 (heads' mean)
            for name in GRAPH:
                if name in layer["stats"]:
                    t[name].append(layer["stats"][name]["mean"])
        energy = run / "energy.json"
        if energy.is_file():
            record = json.loads(energy.read_text())
            for when in ("trained", "init"):
                heads = [e["stats"] for e in record[when] if e["layer"] == 1]
                for name in ENERGY:
                    t[f"{when}:{name}"].append(statistics.mean(h[name] for h in heads))
    out = {k: {n: list(v) for n, v in t.items()} for k, t in table.items()}
    print("| task · option | seeds | hub share % | entropy | query dep. (JS) | static % | tree agr. % (chance) |")
    print("|---|---|---|---|---|---|---|")
    for key, t in table.items():
        print(f"| {key} | {len(t['seeds'])} | {fmt(t['hub_share'], 'hub_share')} | {fmt(t['entropy'], 'entropy')} | "
              f"{fmt(t['query_dependence'], 'query_dependence')} | {fmt(t['static_share'], 'static_share')} | "
              f"{fmt(t['tree_agreement'], 'tree_agreement')} ({fmt(t['tree_chance'], 'tree_chance')}) |")
    print()
    print("| task · option | query share %: trained (init) | tanh linear % (init) | tanh saturated % | "
          "row spread of s (init) | RMS query / key term |")
    print("|---|---|---|---|---|---|")
    for key, t in table.items():
        tr, it = (lambda n: fmt(t[f"trained:{n}"], n)), (lambda n: fmt(t[f"init:{n}"], n))
        print(f"| {key} | {tr('query_share')} ({it('query_share')}) | {tr('linear_share')} ({it('linear_share')}) | "
              f"{tr('saturated_share')} | {tr('energy_spread')} ({it('energy_spread')}) | "
              f"{tr('query_term')} / {tr('key_term')} |")
    (HERE / "summary.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
