"""``cn3 prepare``: real text in, cached attributed sentence graphs out."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from cli.errors import user_errors
from cli.summary import print_summary
from data_prep.tasks import TASKS

Task = Enum("Task", {name: name for name in [*TASKS, "custom"]}, type=str)


class AnnotatorName(str, Enum):
    gold = "gold"
    spacy = "spacy"
    stanza = "stanza"
    none = "none"


class TagScheme(str, Enum):
    BIOES = "BIOES"
    IOB2 = "IOB2"


class CustomFormat(str, Enum):
    tsv = "tsv"
    jsonl = "jsonl"
    conll = "conll"


def prepare_command(
    task: Task = typer.Option(..., "--task", "-t", help="Task to prepare (`cn3 tasks` lists them)."),
    data: Path = typer.Option(None, "--data", help="Data root (default: $CN3_DATA or ../shared/data)."),
    out: Path = typer.Option(None, "--out", "-o", help="Output directory (default: prepared/<task>, "
                             "prepared/<task>-fold<k> for CV tasks)."),
    annotator: AnnotatorName = typer.Option(
        None, "--annotator", "-a",
        help="Where POS tags and dependency arcs come from. Default: gold when the files carry POS and "
             "trees, else spacy when installed, else stanza when models exist, else gold POS or none."),
    max_len: int = typer.Option(None, "--max-len", help="Truncate sentences to N tokens (0 = never) "
                                "(default: per task, e.g. 400 for imdb)."),
    min_freq: int = typer.Option(1, "--min-freq", min=1, help="Words seen fewer times in train become <unk>."),
    char_len: int = typer.Option(20, "--char-len", min=1, help="Characters kept per word."),
    embeddings: Path = typer.Option(None, "--embeddings", exists=True, dir_okay=False,
                                    help="GloVe/word2vec vectors to store for the vocabulary (and report OOV)."),
    stanza_dir: Path = typer.Option(None, "--stanza-dir", envvar="STANZA_RESOURCES_DIR",
                                    help="Local stanza model directory (no downloads happen)."),
    fold: int = typer.Option(0, "--fold", min=0, help="Test fold for tasks without an official split."),
    n_folds: int = typer.Option(10, "--n-folds", min=2, help="Number of cross-validation folds."),
    seed: int = typer.Option(13, "--seed", help="Seed of fold assignment and held-out dev splits."),
    fine: bool = typer.Option(False, "--fine", help="TREC: the 50 fine classes instead of the 6 coarse ones."),
    tag_scheme: TagScheme = typer.Option(TagScheme.BIOES, "--tag-scheme", help="Chunk/NER tags are converted to this."),
    train: Path = typer.Option(None, "--train", help="custom task: training file."),
    dev: Path = typer.Option(None, "--dev", help="custom task: development file."),
    test: Path = typer.Option(None, "--test", help="custom task: test file."),
    fmt: CustomFormat = typer.Option(None, "--format", help="custom task: file format."),
    columns: str = typer.Option(None, "--columns", help="custom conll task: column names, e.g. word,pos,_,tag."),
    force: bool = typer.Option(False, "--force", "-f", help="Rebuild even when the output is up to date."),
    workers: int = typer.Option(0, "--workers", min=0, help="spaCy parser processes for large inputs "
                                "(0 = one per CPU core; inputs under 20,000 sentences use one)."),
) -> None:
    """Turn a data set into attributed sentence graphs and cache them on disk.

    Each sentence becomes a graph whose nodes are words (word, lower-cased word, POS, characters,
    spelling, position) and whose edges carry the dependency relation and direction. Vocabularies
    come from the train split alone; with --embeddings, a dev/test word outside the vocabulary keeps
    its pretrained vector (stored beside its split, never trained), as new text does at `cn3 evaluate
    --file` and `cn3 predict`. Re-running with the same inputs and settings does nothing.

    Examples:

        cn3 prepare --task trec

        cn3 prepare --task conll2003 --annotator spacy --embeddings ../shared/data/glove/glove.6B.50d.top100k.txt.gz

        cn3 prepare --task custom --train my.tsv --dev my_dev.tsv --format tsv
    """
    from data_prep.prepare import PrepareSettings, prepare
    from data_prep.taskspec import TaskOptions

    files = {name: path for name, path in (("train", train), ("dev", dev), ("test", test)) if path}
    options = TaskOptions(fold=fold, n_folds=n_folds, seed=seed, fine=fine, tag_scheme=tag_scheme.value,
                          files=files, format=fmt.value if fmt else None, columns=columns)
    settings = PrepareSettings(task=task.value, data=data, out=out, annotator=annotator.value if annotator else None,
                               max_len=max_len, min_freq=min_freq, char_len=char_len, embeddings=embeddings,
                               stanza_dir=stanza_dir, options=options, force=force, workers=workers)
    with user_errors():
        result = prepare(settings)
    print_summary(result.manifest, result.out, result.up_to_date)


def tasks_command(
    name: str = typer.Argument(None, help="Show one task in full: files, labels and every caveat (the probing "
                               "tasks list their deviations from Conneau et al. here)."),
) -> None:
    """List the tasks `cn3 prepare` knows, with their level and files; `cn3 tasks NAME` shows one in full."""
    from rich.table import Table

    from cn3.util.console import console

    if name is not None:
        from cli.errors import user_errors
        from data_prep.tasks import get_task

        with user_errors():
            spec = get_task(name)
        console.print(f"[bold]{spec.name}[/] ({spec.level} level): {spec.description}")
        console.print(f"files (under the data root): {', '.join(spec.files)}", soft_wrap=True)
        if spec.labels:
            console.print(f"labels: {', '.join(spec.labels)}", soft_wrap=True)
        console.print(f"gold annotations: {', '.join(sorted(spec.gold)) or 'none'}; default annotator: "
                      f"{spec.annotator or 'by the generic rule (`cn3 prepare --help`)'}")
        if spec.notes:
            console.print(f"notes: {spec.notes}", soft_wrap=True)
        return
    table = Table()
    for col in ("task", "level", "description", "gold annotations"):
        table.add_column(col)
    for spec in TASKS.values():
        table.add_row(spec.name, spec.level, spec.description, ", ".join(sorted(spec.gold)) or "-")
    table.add_row("custom", "any", "your own TSV/JSONL/CoNLL files (--train/--dev/--test --format)", "from columns")
    console.print(table)
    console.print("`cn3 tasks NAME` shows a task's files, labels and caveats.")
