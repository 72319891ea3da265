"""``cn3 analyze``: measure what a trained run learned (the statistics of its attention graphs)."""

from __future__ import annotations

from pathlib import Path

import typer

from cli.errors import user_errors
from cli.train import Device, Split, bad_parameters
from cn3.util.console import console

analyze_app = typer.Typer(
    help="Measure what a trained run learned: statistics of its attention graphs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: per-relation rows printed per layer (graphs.json keeps all).
TABLE_RELATIONS = 12
#: how the statistics table prints a mean: fractions of the maximum and words as numbers, shares in %.
NUMBER_FORMATS = {"entropy": ".2f", "query_dependence": ".3f", "mean_distance": ".2f"}


@analyze_app.command("graphs")
def graphs_command(
    run: Path = typer.Argument(..., help="A run directory from `cn3 train` whose encoder returns attention "
                               "weights (cn3, transformer, hybrid, local, lstm_san, onlstm_san, selfatt1, selfatt2)."),
    split: Split = typer.Option(Split.dev, "--split", help="Split of the run's prepared dataset."),
    layer: int = typer.Option(None, "--layer", "-l", help="Only this attention layer (1-based); default: all."),
    heads: bool = typer.Option(False, "--heads", help="Also each energy head of a CN3 run with model.energy_heads "
                               "> 1 (a column per head after its layer, whose weights are the heads' mean)."),
    limit: int = typer.Option(None, "--limit", "-n", min=1, help="At most this many items, evenly spread over "
                              "the split (as data.limit)."),
    out: Path = typer.Option(None, "--out", "-o", file_okay=False, help="Also write DIR/graphs.json (every number, "
                             "all relations) and DIR/graphs.png (histograms, agreement per relation)."),
    device: Device = typer.Option(Device.auto, "--device"),
) -> None:
    """Is the learned graph a tree, a chain or a star? Statistics of a run's attention, per layer.

    For each sentence and layer, over the rows alpha_i. (how much word i reads from each word k):
    hub share (rows whose strongest word is the sentence's most-chosen one; 1 = a star), row
    entropy / log n, query dependence (mean Jensen-Shannon divergence between rows; 0 = every word
    reads alike), static share (Brody et al. 2022: every row ranks the words identically), the mean
    attended distance, and, when the prepared data has dependency trees, how often a word's strongest
    word is its head or a dependent, against a random other word and an adjacent one, per relation.
    Means are over sentences.

    Examples:

        cn3 analyze graphs runs/trec-cn3-seed1

        cn3 analyze graphs runs/trec-transformer-seed1 --split test --layer 2 --out analysis/trec-transformer
    """
    from cn3.analysis.run_graphs import analyze_run_graphs, write_graphs

    with user_errors(), bad_parameters():
        analysis = analyze_run_graphs(run, split.value, layer, heads, limit, device.value)
    print_graphs(analysis)
    if out is not None:
        json_path, png_path = write_graphs(analysis, out)
        console.print(f"wrote {json_path} and {png_path}", markup=False)


def print_graphs(analysis) -> None:
    """The analysis as ``cn3 analyze graphs`` prints it: a title line, the trees and notes, the
    statistics table and each layer's relation table."""
    from rich.markup import escape

    n_layers = analysis.attention_layers
    console.print(f"[bold]{escape(analysis.title)}[/] ({analysis.items:,} items, {n_layers} attention "
                  f"layer{'s' * (n_layers != 1)}; {escape(str(analysis.prepared))})", soft_wrap=True)
    console.print(f"dependency trees: {analysis.trees}", soft_wrap=True, markup=False)
    for note in analysis.notes:
        console.print(f"note: {note}", soft_wrap=True, markup=False)
    console.print(statistics_table(analysis.layers))
    for entry in analysis.layers:
        if "relations" in entry:
            console.print(relation_table(entry))


def statistics_table(summary: list[dict]):
    """Statistics (rows) x layers (columns): the sentence mean and, in brackets, the sentences
    it is over when some sentences lack it."""
    from rich.table import Table

    from cn3.analysis import STATISTICS
    from cn3.analysis.graphs import layer_label

    table = Table(title="attention graphs: means over sentences")
    table.add_column("statistic")
    for entry in summary:
        table.add_column(layer_label(entry), justify="right")
    for name, what in STATISTICS.items():
        if not any(name in entry["stats"] for entry in summary):
            continue
        cells = []
        for entry in summary:
            s = entry["stats"].get(name)
            if s is None:
                cells.append("-")
                continue
            value = f"{s['mean']:{NUMBER_FORMATS.get(name, '.1%')}}"
            cells.append(value if s["sentences"] == entry["sentences"] else f"{value} ({s['sentences']})")
        table.add_row(f"  {what}" if name in ("tree_chance", "tree_adjacent") else what, *cells)
    table.add_row("sentences (skipped: one word)", *(f"{e['sentences']:,} ({e['skipped']:,})" for e in summary))
    return table


def relation_table(entry: dict):
    """The most frequent relations of one layer: arcs, how often each end reads the other, chance."""
    from rich.table import Table
    from rich.text import Text

    from cn3.analysis.graphs import layer_label

    relations = entry["relations"]
    shown = list(relations)[:TABLE_RELATIONS]
    more = f" ({len(shown)} of {len(relations)} relations; all in graphs.json)" if len(relations) > len(shown) else ""
    table = Table(title=f"{layer_label(entry)}: arcs followed, per relation{more}")
    for col in ("relation", "arcs", "dependent -> head", "chance", "head -> dependent", "chance", "of followed"):
        table.add_column(col, justify="left" if col == "relation" else "right")
    for name in shown:
        r = relations[name]
        table.add_row(Text(name), f"{r['arcs']:,}", f"{r['to_head']:.1%}", f"{r['to_head_chance']:.1%}",
                      f"{r['from_head']:.1%}", f"{r['from_head_chance']:.1%}", f"{r['followed_share']:.1%}")
    return table


@analyze_app.command("energy")
def energy_command(
    run: Path = typer.Argument(..., help="A run directory from `cn3 train` with model.encoder: cn3."),
    split: Split = typer.Option(Split.dev, "--split", help="Split of the run's prepared dataset."),
    limit: int = typer.Option(None, "--limit", "-n", min=1, help="At most this many items, evenly spread over "
                              "the split (as data.limit)."),
    out: Path = typer.Option(None, "--out", "-o", file_okay=False, help="Also write DIR/energy.json."),
    device: Device = typer.Option(Device.auto, "--device"),
) -> None:
    """Why is the learned graph a star? CN3's energy s_ik = u^T tanh(z_ik) taken apart, per layer and head.

    A softmax over k ignores what is added to a whole row, so only the key's main effect (the same
    for every word i) and the query-key interaction shape the weights. The query share is the
    interaction's part of that variance: 0 = every word reads alike (static attention). Where tanh
    is near-linear the energy is a row term plus a column term (plus the edge term), so without
    edge attributes the query can matter only through tanh's curvature: the table shows how much
    of z sits in tanh's near-linear and saturated ranges, and how large the query, key and edge
    terms are. Each column is measured twice: the trained model, and the same model with its
    encoder re-initialised with the run's seed (its published init; same word vectors), so a
    star learned in training is told from one the init starts with.

    Examples:

        cn3 analyze energy runs/trec-cn3-seed1

        cn3 analyze energy runs/sick-cn3-seed1 --limit 500 --out analysis/sick-cn3-seed1
    """
    from cn3.analysis.energy import ENERGY_STATISTICS, analyze_energy, graph_layers, reinitialised
    from cn3.runs.layout import RunDir
    from cn3.sentence.evaluation import prepared_dataset
    from cn3.sentence.inference import load_model
    from cn3.train.runtime import resolve_device
    from cn3.util.atomic import atomic_write_json

    with user_errors(), bad_parameters():
        dev = resolve_device(device.value)
        loaded = load_model(RunDir(run), dev)
        graph_layers(loaded.model)  # before reading any data: a run without CN3 layers fails at once
        _, ds = prepared_dataset(loaded, split.value)
        dataset = ds.splits[split.value].spread(limit) if limit else ds.splits[split.value]
        with console.status("measuring the trained energies"):
            trained = analyze_energy(loaded.model, dataset, dev).summary()
        with console.status("measuring the energies at initialisation"):
            init = analyze_energy(reinitialised(loaded.model, loaded.config.train.seed), dataset, dev).summary()
    console.print(f"[bold]{loaded.manifest['task']} · cn3 · {split.value}[/] ({len(dataset):,} items)")
    console.print(energy_table(trained, init, ENERGY_STATISTICS))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / "energy.json", {"run": str(run), "task": loaded.manifest["task"], "split": split.value,
                                                "items": len(dataset), "statistics": ENERGY_STATISTICS,
                                                "trained": trained, "init": init})
        console.print(f"wrote {out / 'energy.json'}", markup=False)


def energy_table(trained: list[dict], init: list[dict], statistics: dict[str, str]):
    """Statistics (rows) x (layer, head) x (trained, init) (columns): means over sentences."""
    from rich.table import Table

    table = Table(title="CN3 energies: means over sentences (trained | at init)")
    table.add_column("statistic")
    multi_head = any(entry["head"] > 1 for entry in trained)
    for entry in trained:
        name = f"layer {entry['layer']}" + (f" head {entry['head']}" if multi_head else "")
        table.add_column(f"{name}\ntrained", justify="right")
        table.add_column(f"{name}\ninit", justify="right")
    for name, what in statistics.items():
        cells = []
        for t, i in zip(trained, init):
            cells += [_energy_cell(name, t["stats"].get(name)), _energy_cell(name, i["stats"].get(name))]
        if any(cell != "-" for cell in cells):
            table.add_row(what, *cells)
    return table


def _energy_cell(name: str, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1%}" if name.endswith("share") else f"{value:.3f}"
