"""``cn3 visualize``: look inside a trained run (the sentence graphs CN3 learns)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from cli.errors import user_errors
from cli.train import EMBEDDINGS_HELP, NO_VECTORS_HELP, Device
from cn3.util.console import console

visualize_app = typer.Typer(
    help="Look inside a trained run: the sentence graphs CN3 learns.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@visualize_app.command("edges")
def edges_command(
    run: Path = typer.Argument(..., help="A run directory from `cn3 train` (encoder cn3)."),
    texts: list[str] = typer.Argument(..., help="The sentence; for pair tasks (SNLI, SICK) two: premise, hypothesis."),
    layer: int = typer.Option(None, "--layer", "-l", help="Show only this graph layer (1-based); default: all layers."),
    word: str = typer.Option(None, "--word", "-w", help="Show all outgoing weights of this word "
                             "(a token of the sentence or its 1-based position) instead of each word's strongest."),
    out: Path = typer.Option(None, "--out", "-o", help="Write a figure instead: .png or .svg (matplotlib), "
                             ".html (self-contained page)."),
    embeddings: Path = typer.Option(None, "--embeddings", exists=True, dir_okay=False, help=EMBEDDINGS_HELP),
    no_vectors: bool = typer.Option(False, "--no-vectors", help=NO_VECTORS_HELP),
    device: Device = typer.Option(Device.auto, "--device"),
) -> None:
    """Show the edge weights a CN3 run learns over a sentence.

    Per layer: alpha_ik (how much word i reads from word k; rows sum to 1), each word's gate, the parse tree.

    Without --out: per layer a table (top-3 neighbours, gate, head of each word) and a heatmap.

    Examples:

        cn3 visualize edges runs/trec-cn3-seed1 "What is Susan B. Anthony 's birthday ?"

        cn3 visualize edges runs/trec-cn3-seed1 "What is the capital of Peru ?" --word capital --layer 1

        cn3 visualize edges runs/snli-cn3-seed1 "A man plays a guitar ." "A person makes music ." --out pair.png
    """
    from cn3.runs.layout import RunDir
    from cn3.sentence.inference import load_model, run_vectors
    from cn3.train.runtime import resolve_device
    from cn3.visualize import edge_view, output_format, render_terminal, resolve_layers, resolve_word, write_output
    from cn3.visualize.edges import hub_line

    with user_errors():
        if out is not None:
            output_format(out)  # fail before loading the model
        dev = resolve_device(device.value)
        loaded = load_model(RunDir(run), dev)
        vectors, _ = run_vectors(loaded.manifest, embeddings, use=not no_vectors)
        view = edge_view(loaded, texts, dev, vectors)
        layers = resolve_layers(view, layer)
        focus = resolve_word(view, word) if word is not None else None
        if out is None:
            render_terminal(console, view, layers, focus)
            return
        write_output(view, out, layers, focus)
    console.print(f"{view.title}\nwrote {out}")
    for side in view.sides:  # what the figure's titles say, also where the figure is not looked at
        for l in layers:
            console.print(escape(f"layer {l + 1}: {hub_line(side, l)}"), soft_wrap=True)
