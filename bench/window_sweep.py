"""Window-size sweep of the hybrid encoder (Xu et al., 2019, Table 2 style): m = 1..5.

    .venv/bin/python bench/window_sweep.py --dry-run                 # print the commands only
    .venv/bin/python bench/window_sweep.py                           # small scale (cn3/configs/nmt/small.yaml)
    .venv/bin/python bench/window_sweep.py --windows 1 3 --set train.epochs=5 --gates
    .venv/bin/python bench/window_sweep.py --config cn3/configs/nmt/base.yaml --device cuda

For each window ``m`` it trains ``cn3 nmt train --encoder hybrid --set model.hybrid.window=m`` into
``<out>/m<m>`` (resuming an interrupted run, skipping a finished one), scores test2016 with
``cn3 nmt evaluate`` (beam 5) and, with ``--gates``, runs ``cn3 nmt gates``. The table of dev and
test BLEU per window is printed and written to ``<out>/summary.json``. Every run uses the same
seed, so the windows differ only in ``m``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

from cn3.runs.records import split_scores

REPO = Path(__file__).resolve().parents[1]
_SCRIPT = REPO / ".venv" / "bin" / "cn3"
CN3 = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-c", "from cli.main import app; app(prog_name='cn3')"]


def run(cmd: list[str], dry: bool, capture: bool = False) -> str:
    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    if dry:
        return ""
    result = subprocess.run(cmd, cwd=REPO, check=True, text=True, stdout=subprocess.PIPE if capture else None)
    return result.stdout or ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--windows", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--out", type=Path, default=Path("runs/window-sweep"))
    parser.add_argument("--config", type=Path, default=None, help="run config [default: cn3/configs/nmt/small.yaml]")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="extra --set for every run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--gates", action="store_true", help="also run `cn3 nmt gates` on each run")
    parser.add_argument("--dry-run", action="store_true", help="print the commands without running them")
    args = parser.parse_args()

    out = args.out if args.out.is_absolute() else REPO / args.out
    rows = []
    for m in args.windows:
        run_dir = out / f"m{m}"
        train = [*CN3, "nmt", "train", "--encoder", "hybrid", "--run-dir", str(run_dir), "--seed", str(args.seed),
                 "--device", args.device, "--set", f"model.hybrid.window={m}"]
        if args.config is not None:
            train += ["--config", str(args.config)]
        for o in args.overrides:
            train += ["--set", o]
        if (run_dir / "results.json").is_file():
            print(f"m={m}: finished run in {run_dir}, not retrained")
        else:
            run(train + (["--resume"] if (run_dir / "latest.pt").is_file() else []), args.dry_run)
        record = run([*CN3, "nmt", "evaluate", str(run_dir), "--split", "test2016", "--beam", str(args.beam),
                      "--device", args.device], args.dry_run, capture=True)
        if args.gates:
            run([*CN3, "nmt", "gates", str(run_dir), "--split", "val", "--device", args.device], args.dry_run)
        if args.dry_run:
            continue
        results = json.loads((run_dir / "results.json").read_text())
        test = json.loads(record.strip().splitlines()[-1])
        rows.append({"window": m, "dev_bleu": split_scores(results).get("val", {}).get("score"),
                     "test2016_bleu": test["bleu"],
                     "best_epoch": results["best_epoch"], "steps": results["steps"], "seconds": results["seconds"],
                     "signature": test["signature"]})
    if args.dry_run:
        return
    print(f"\n{'m':>3} {'dev BLEU':>9} {'test2016':>9} {'best ep':>8} {'steps':>7} {'time':>8}")
    for r in rows:
        print(f"{r['window']:>3} {r['dev_bleu'] or float('nan'):>9.2f} {r['test2016_bleu']:>9.2f} {r['best_epoch']:>8} "
              f"{r['steps']:>7} {r['seconds']:>7.0f}s")
    if rows:
        print(f"sacreBLEU: {rows[0]['signature']}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {out / 'summary.json'}")


if __name__ == "__main__":
    main()
