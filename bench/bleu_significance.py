"""Is translation run B better than run A on a split? sacreBLEU's own paired tests (cn3.stats).

    .venv/bin/python bench/bleu_significance.py runs/nmt-cn3-seed1 runs/nmt-hybrid-token-seed1 --split test2016

Reads each run's final hypotheses (``RUN/translations/<split>.beam<k>.txt``, written by ``cn3 nmt train``
and ``cn3 nmt evaluate --output``) and the split's references (from the first run's config, as
``cn3 nmt evaluate`` loads them), and compares each further run with the first (the baseline) by
:func:`cn3.stats.bleu_paired_test`, i.e. ``sacrebleu.significance.PairedTest``: paired bootstrap
resampling (Koehn, 2004; 1,000 samples) and approximate randomization (Riezler & Maxwell, 2005;
10,000 trials), as ``sacrebleu --paired-bs`` / ``--paired-ar`` do, each with the 95% paired bootstrap
interval of the difference. sacreBLEU's default seed (12345) for every comparison, so the figures are
reproducible. (sacreBLEU follows multeval in counting only samples whose difference *exceeds* the
observed one; cn3.stats reports p = 1 for two runs with the same statistics on every sentence.)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cn3.nmt.config import config_from_dict
from cn3.nmt.data import load_split
from cn3.stats import bleu_paired_test


def hypotheses(run: Path, split: str) -> list[str]:
    files = sorted((run / "translations").glob(f"{split}.beam*.txt"))
    if not files:
        raise SystemExit(f"{run} has no translations of {split} (translations/{split}.beam*.txt)")
    return files[0].read_text(encoding="utf-8").splitlines()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("baseline", type=Path)
    parser.add_argument("systems", type=Path, nargs="+")
    parser.add_argument("--split", default="test2016")
    args = parser.parse_args()
    import yaml

    cfg = config_from_dict(yaml.safe_load((args.baseline / "config.yaml").read_text()))
    refs = [tgt for _, tgt in load_split(cfg.data, args.split, cfg.train.seed)]
    named = {run: hypotheses(run, args.split) for run in [args.baseline, *args.systems]}
    for run, hyps in named.items():
        if len(hyps) != len(refs):
            raise SystemExit(f"{run}: {len(hyps)} hypotheses for {len(refs)} references of {args.split}")
    for system in args.systems:
        print(f"{args.split}: A = {system}, B = {args.baseline}")
        for test in ("bs", "ar"):
            print("  " + bleu_paired_test(refs, named[system], named[args.baseline], test=test).sentence(args.split))


if __name__ == "__main__":
    main()
