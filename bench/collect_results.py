"""Collect ``results.json`` of finished runs into a Markdown table (for RESULTS.md).

    .venv/bin/python bench/collect_results.py runs/*          # one row per run
    .venv/bin/python bench/collect_results.py runs/mr-* --group   # mean ± std per (task, encoder)
    .venv/bin/python bench/collect_results.py runs/nmt-* [--group]  # `cn3 nmt` runs: BLEU per split

CN3 runs and `cn3 nmt` runs have different ``results.json`` (scores per split vs BLEU per split);
give one kind per call.

    .venv/bin/python bench/collect_results.py runs/nmt-* --archive docs/runs

``--archive DIR`` also copies each run's small records (config.yaml, results.json, metrics.jsonl,
log.txt; not the checkpoints) to ``DIR/<run name>/``, so the runs behind RESULTS.md stay in the
repository after the run directories are gone, and the tables can be made again from them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
from collections import defaultdict
from pathlib import Path

from cn3.runs.records import split_scores


def load(paths: list[Path]) -> list[dict]:
    rows = []
    for path in paths:
        results = path / "results.json"
        if results.is_file():
            rows.append({**json.loads(results.read_text()), "run": str(path)})
    return rows


RECORDS = ("config.yaml", "results.json", "metrics.jsonl", "log.txt")


def archive(paths: list[Path], dest: Path) -> None:
    """Copy the small records of each finished run to ``dest/<run name>/``."""
    for path in paths:
        if not (path / "results.json").is_file():
            continue
        target = dest / path.name
        target.mkdir(parents=True, exist_ok=True)
        for name in RECORDS:
            if (path / name).is_file():
                shutil.copyfile(path / name, target / name)


def fmt(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f} (n={len(values)})"


def nmt_table(rows: list[dict], group: bool) -> None:
    """BLEU (beam search, sacreBLEU) per split of ``cn3 nmt train`` runs."""
    splits = [s for s in ("val", "test2016", "test2017", "mscoco2017") if any(s in r["scores"] for r in rows)]
    if group:
        groups = defaultdict(list)
        for r in rows:
            groups[r["encoder"]].append(r)
        print("| encoder | " + " | ".join(splits) + " | runs | params | mean wall time |")
        print("|---|" + "---|" * len(splits) + "---|---|---|")
        for encoder, rs in sorted(groups.items()):
            cells = [fmt([split_scores(r)[s]["score"] for r in rs]) if all(s in r["scores"] for r in rs) else "-"
                     for s in splits]
            wall = statistics.mean(r["seconds"] for r in rs)
            print(f"| {encoder} | " + " | ".join(cells) + f" | {len(rs)} | {rs[0]['parameters']:,} | {wall:.0f} s |")
        return
    print("| encoder | seed | " + " | ".join(splits) + " | best epoch | steps | wall time | params |")
    print("|---|---|" + "---|" * len(splits) + "---|---|---|---|")
    for r in rows:
        cells = [f"{split_scores(r)[s]['score']:.2f}" if s in r["scores"] else "-" for s in splits]
        print(f"| {r['encoder']} | {r['seed']} | " + " | ".join(cells) +
              f" | {r['best_epoch']} | {r['steps']} | {r['seconds']:.0f} s | {r['parameters']:,} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--group", action="store_true", help="mean ± std over runs of the same task and encoder")
    parser.add_argument("--archive", type=Path, metavar="DIR", help="also copy each run's records to DIR/<run name>/")
    args = parser.parse_args()
    rows = load(args.runs)
    if args.archive:
        archive(args.runs, args.archive)
    if rows and "corpus" in rows[0]:  # written by `cn3 nmt train`
        nmt_table(rows, args.group)
        return
    if args.group:
        groups = defaultdict(list)
        for r in rows:
            groups[(r["task"], r["encoder"])].append(r)
        print("| task | encoder | metric | dev | test | runs | mean wall time |")
        print("|---|---|---|---|---|---|---|")
        for (task, encoder), rs in sorted(groups.items()):
            dev = fmt([r["scores"]["dev"]["score"] for r in rs])
            test = fmt([r["scores"]["test"]["score"] for r in rs]) if all("test" in r["scores"] for r in rs) else "-"
            wall = statistics.mean(r["seconds"] for r in rs)
            print(f"| {task} | {encoder} | {rs[0]['metric']} | {dev} | {test} | {len(rs)} | {wall:.0f} s |")
        return
    print("| task | encoder | seed | metric | dev | test | steps | wall time | params | command |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        test = f"{r['scores']['test']['score']:.2f}" if "test" in r["scores"] else "-"
        print(f"| {r['task']} | {r['encoder']} | {r['seed']} | {r['metric']} | {r['scores']['dev']['score']:.2f} | "
              f"{test} | {r['steps']} | {r['seconds']:.0f} s | {r['parameters']:,} | `{r.get('command') or '-'}` |")


if __name__ == "__main__":
    main()
