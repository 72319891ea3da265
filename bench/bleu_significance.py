"""Is translation run B better than run A on a split? sacreBLEU's own paired tests.

    .venv/bin/python bench/bleu_significance.py runs/nmt-cn3-seed1 runs/nmt-hybrid-token-seed1 --split test2016

Reads each run's final hypotheses (``RUN/translations/<split>.beam<k>.txt``, written by ``cn3 nmt train``
and ``cn3 nmt evaluate --output``) and the split's references (from the first run's config, as
``cn3 nmt evaluate`` loads them), and runs ``sacrebleu.significance.PairedTest`` with the first run as
the baseline: paired bootstrap resampling (Koehn, 2004; 1,000 samples) and approximate randomization
(Riezler & Maxwell, 2005; 10,000 trials), as ``sacrebleu --paired-bs`` / ``--paired-ar`` do. Same
seed for every comparison, so the figures are reproducible. (sacreBLEU follows multeval in counting
only samples whose difference *exceeds* the observed one, so a system compared with itself gets the
smallest p-value: read p only for different systems.)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest

from cn3.nmt.config import config_from_dict
from cn3.nmt.data import load_split


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
    named = [(str(run), hypotheses(run, args.split)) for run in [args.baseline, *args.systems]]
    for name, hyps in named:
        if len(hyps) != len(refs):
            raise SystemExit(f"{name}: {len(hyps)} hypotheses for {len(refs)} references of {args.split}")
    for test_type, samples in (("bs", 1000), ("ar", 10_000)):
        _, scores = PairedTest(named, {"BLEU": BLEU()}, [refs], test_type=test_type, n_samples=samples)()
        print(f"{args.split}, paired {'bootstrap' if test_type == 'bs' else 'approximate randomization'}:")
        for system, result in zip(scores["System"], scores["BLEU"]):
            p = "" if result.p_value is None else f"  p = {result.p_value:.4f}"
            ci = f" ({result.mean:.2f} ± {result.ci:.2f})" if result.mean is not None else ""
            print(f"  {system}: BLEU {result.score:.2f}{ci}{p}")


if __name__ == "__main__":
    main()
