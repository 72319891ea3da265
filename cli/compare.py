"""``cn3 compare RUN_A RUN_B``: is run A better than run B? A paired test on their per-item predictions."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import typer
from rich.markup import escape

from cli.errors import user_errors
from cn3.util.console import console


def compare_command(
    run_a: Path = typer.Argument(..., help="Run A: a directory from `cn3 train` or `cn3 nmt train` "
                                 "that kept its predictions."),
    run_b: Path = typer.Argument(..., help="Run B, scored on the same items."),
    split: str = typer.Option("test", "--split", help="The split both runs scored (RUN/predictions/<split>.json.xz), "
                              "e.g. test, dev, or test2016 for translation."),
    resamples: int = typer.Option(10_000, "--resamples", min=1, help="Randomization trials, and bootstrap "
                                  "resamples for the 95% interval of the difference."),
    json_out: bool = typer.Option(True, "--json/--no-json", help="Also print one JSON line with every figure "
                                  "on stdout."),
) -> None:
    """Compare two runs on the same items: A's score minus B's, its 95% interval and a two-sided p-value.

    Reads each run's predictions (RUN/predictions/), checks
    that both runs scored the same items (same gold, item by item), and runs a paired test:
    approximate randomization (Riezler & Maxwell, 2005; exact when every swap can be enumerated) for
    accuracy, span F1 and token accuracy, computed as `cn3 evaluate` computes them; sacreBLEU's
    paired approximate randomization for BLEU. The interval is a paired bootstrap percentile interval
    (Koehn, 2004). Fixed seeds: the same runs give the same figures. The sentence goes to stderr, the
    JSON line (the runs, split, task and every number) to stdout.

    One seed each says whether the difference exceeds what the test items' sampling explains, not
    whether it survives a change of seed: compare several seeds with `cn3 experiment`.

    Examples:

        cn3 compare runs/trec-cn3-seed1 runs/trec-lstm-seed1

        cn3 compare runs/conll2003-cn3-seed1 runs/conll2003-lstm-seed1 --split dev --resamples 2000

        cn3 compare runs/nmt-multi30k-hybrid-seed1 runs/nmt-multi30k-transformer-seed1 --split test2016
    """
    from cn3.runs.records import load_predictions
    from cn3.stats import compare

    with user_errors():
        a, b = load_predictions(run_a, split), load_predictions(run_b, split)
        result = compare(a, b, resamples=resamples)
    console.print(escape(f"A = {run_a}, B = {run_b} ({a.task or 'task not recorded'}, {split})"), soft_wrap=True)
    console.print(result.sentence(split), soft_wrap=True)
    if json_out:
        print(json.dumps({"a": str(run_a), "b": str(run_b), "split": split, "task": a.task,
                          **dataclasses.asdict(result)}))
