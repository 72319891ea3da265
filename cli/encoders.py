"""``cn3 encoders``: the encoder zoo, one row per registry entry."""

from __future__ import annotations

import typer

from cn3.util.console import console


def _family_options(options: tuple[str, ...]) -> str:
    """``("rnn.layers", "rnn.order")`` -> ``"rnn: layers, order"``: one line per family section."""
    by_family: dict[str, list[str]] = {}
    for option in options:
        family, key = option.split(".")
        by_family.setdefault(family, []).append(key)
    return "\n".join(f"{family}: {', '.join(keys)}" for family, keys in by_family.items()) or "-"


def encoders_command(
    names: bool = typer.Option(False, "--names", help="Print the names only, one per line (for scripts)."),
) -> None:
    """List every encoder cn3 can train: its paper, what it needs, the task levels it serves and its
    default size on sentence tasks.

    Pick one with `--set model.encoder=NAME` (`cn3 train`) or `--encoder NAME` (`cn3 nmt train`). An
    encoder that needs dependency trees serves only data prepared with a parser (gold trees, spacy or
    stanza); `cn3 train` says so before anything trains. "family options" are the sections of
    `model.*` (hybrid, rnn, selfatt, cnn, cn3; CN3's are plain `model.*` keys on sentence tasks) the
    encoder reads; a `--set` of another family's option changes nothing, and the train commands warn.

    Examples:

        cn3 encoders

        cn3 train --task trec --set model.encoder=treelstm

        cn3 nmt train --encoder cn3
    """
    from rich.table import Table

    from cn3.encoders import ENCODERS
    from cn3.encoders.registry import LEVEL_NAMES
    from cn3.sentence.config import ModelConfig
    from cn3.sentence.model import ModelArgs, SentenceGraphModel

    if names:
        for name in ENCODERS:
            print(name)
        return
    table = Table(title="cn3 encoders (sentence sizes: model.hidden 150 per direction, so d = 300; "
                        "50-d words, 6 classes)")
    for col in ("name", "paper", "needs", "levels", "default layers", "parameters", "family options"):
        table.add_column(col)
    for spec in ENCODERS.values():
        needs = ["dependency trees"] if spec.needs_trees else []
        if spec.uses_attrs:
            needs.append("node attributes if configured; trees for Dep (model.edge_attrs)")
        model = SentenceGraphModel(ModelConfig(encoder=spec.name), ModelArgs("graph", 6, 1000, 50, 0, 11, 81))
        params = sum(p.numel() for p in model.encoder.parameters())
        table.add_row(spec.name, spec.paper, "; ".join(needs) or "-", ", ".join(LEVEL_NAMES[lv] for lv in spec.levels),
                      str(spec.default_layers), f"{params:,}", _family_options(spec.options))
    console.print(table)
