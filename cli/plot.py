"""``cn3 plot``: learning curves of one or several runs on one figure."""

from __future__ import annotations

from pathlib import Path

import typer

from cli.errors import user_errors
from cn3.util.console import console


def plot_command(
    runs: list[Path] = typer.Argument(..., help="Run directories of `cn3 train` or `cn3 nmt train`."),
    out: Path = typer.Option(Path("curves.png"), "--out", "-o", help="The figure: .png, .svg or .pdf."),
    metrics: list[str] = typer.Option(None, "--metric", "-m", help="A panel (repeatable): loss, dev or any "
                                      "number of metrics.jsonl (train_loss, dev_loss, seconds, ...). "
                                      "Default: loss and dev."),
) -> None:
    """Draw the learning curves of runs against the update step, one colour per run.

    Panels: loss (train loss; dev loss dashed where the run records one, as translation does) and dev
    (the dev score: accuracy, span F1, token accuracy or BLEU), or those named with --metric. Every
    run also draws its own at the end of training (RUN/curves.png).

    Examples:

        cn3 plot runs/trec-cn3-seed1 runs/trec-lstm-seed1 --out trec.png

        cn3 plot runs/nmt-* --metric dev_bleu --out bleu.png
    """
    from cn3.train.curves import DEFAULT_PANELS, plot_runs

    with user_errors():
        written = plot_runs(runs, out, metrics or DEFAULT_PANELS)
    console.print(f"wrote {written}")
