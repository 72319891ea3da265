"""``cn3 train``, ``cn3 evaluate``, ``cn3 predict``: the CN3 learner from the command line."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path

import typer

from cli.errors import user_errors
from cli.prepare import AnnotatorName
from cn3.util.console import console


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


def warn_ignored_options(model, overrides: list[str]) -> None:
    """A ``--set`` family option the chosen encoder does not read is accepted (every encoder shares
    the sections, and a spec may set them for all its variants) but changes nothing: say so before
    anything trains, rather than let a run look like an ablation it is not."""
    from rich.markup import escape

    from cn3.encoders import get_spec, ignored_overrides

    for key in ignored_overrides(model, overrides):
        read = ", ".join(get_spec(model.encoder).options) or "none"
        console.print(f"[yellow]warning[/]: --set {escape(key)} changes nothing: the {model.encoder} encoder does not "
                      f"read it (the family options it reads: {read}; `cn3 encoders` lists them all)",
                      highlight=False, soft_wrap=True)


class Split(str, Enum):
    dev = "dev"
    test = "test"
    train = "train"


def train_command(
    task: str = typer.Option(None, "--task", "-t", help="Task to train on (`cn3 tasks`); its tuned config "
                             "cn3/configs/<task>.yaml (shipped with cn3) is used unless --config is given."),
    config: Path = typer.Option(None, "--config", "-c", exists=True, dir_okay=False, help="YAML run config."),
    overrides: list[str] = typer.Option(None, "--set", "-s", help="Override a config value, e.g. "
                                        "--set model.graph_layers=2 --set train.optimizer=adam (repeatable)."),
    prepared: Path = typer.Option(None, "--prepared",
                                  help="A directory from `cn3 prepare` (else prepared on the fly)."),
    data: Path = typer.Option(None, "--data", help="Data root (default: $CN3_DATA or ../shared/data)."),
    run_dir: Path = typer.Option(None, "--run-dir", "-r",
                                 help="Run directory (default: runs/<task>-<encoder>-seed<S>)."),
    seed: int = typer.Option(None, "--seed", help="Random seed (train.seed)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --run-dir from latest.pt, with the "
                                "run's own config (only --set and flags given now change it)."),
    device: Device = typer.Option(Device.auto, "--device", help="auto = CUDA when available, else CPU."),
) -> None:
    """Train a sentence-graph model; the run directory keeps config, log, metrics and checkpoints.

    Examples:

        cn3 train --task trec

        cn3 train --task snli --set model.encoder=lstm        # a baseline of the zoo (`cn3 encoders`)

        cn3 train --task logic --set model.encoder=onlstm_san # ON-LSTM under self-attention (Hao et al.)

        cn3 train --task conll2003 --set model.edge_attrs=true # "Dep": parser relations as edge attributes

        cn3 train --task trec --run-dir runs/trec-a --resume   # after Ctrl-C

        torchrun --standalone --nproc_per_node 2 -m cli train --task trec   # 2 processes (README: Scaling up)
    """
    from cn3.kinds import SENTENCE, train

    with user_errors():
        if task is None and config is None:
            raise typer.BadParameter("give --task or --config")
        flags = {"data.prepared": prepared, "data.data": data, "train.seed": seed}
        cfg, run_dir = SENTENCE.resolve_run(task, flags, overrides or [], run_dir, resume, config)
        warn_ignored_options(cfg.model, overrides or [])
        try:
            train(cfg, run_dir, resume=resume, device_name=device.value, command=shlex.join(["cn3", *sys.argv[1:]]))
        except KeyboardInterrupt:
            raise typer.Exit(130) from None


EMBEDDINGS_HELP = ("The word vectors file the run was trained with, when it has moved (checked by sha256; "
                   "read once, then cached). Default: the file the run recorded, or its cached copy.")
NO_VECTORS_HELP = "Read every word outside the run's vocabulary as <unk> instead of giving it its pretrained vector."


def evaluate_command(
    run: Path = typer.Argument(..., help="A run directory from `cn3 train`."),
    split: Split = typer.Option(Split.dev, "--split", help="Split of the run's prepared dataset."),
    file: Path = typer.Option(None, "--file", exists=True, dir_okay=False,
                              help="Score this file instead (any file in the task's format)."),
    report: bool = typer.Option(False, "--report", help="Print the per-label report."),
    annotator: AnnotatorName = typer.Option(
        None, "--annotator", help="With --file: where POS tags/trees come from. Default: the run's annotator; "
        "a run trained on gold annotation reads a file's own, or spaCy's when the file has none."),
    embeddings: Path = typer.Option(None, "--embeddings", exists=True, dir_okay=False, help=EMBEDDINGS_HELP),
    no_vectors: bool = typer.Option(False, "--no-vectors", help=NO_VECTORS_HELP),
    by: str = typer.Option(None, "--by", help="Also score groups of items: a key of the items' meta (e.g. n_ops "
                           "for logic), length (tokens of the first sentence, in bins of 10) or source (the file)."),
    plot: Path = typer.Option(None, "--plot", dir_okay=False, help="With --by: draw the score per group "
                              "(.png, .svg or .pdf)."),
    device: Device = typer.Option(Device.auto, "--device"),
) -> None:
    """Score a trained run: accuracy, span F1 (chunking, NER) or token accuracy (POS).

    Words outside the run's vocabulary get their pretrained vector (the run records its vectors
    file), on a staged split as on --file, so a file scores the same whether or not it was staged
    when the data was prepared. The output says how much of the data the run knows (out-of-
    vocabulary tokens and types, with and without vectors; unknown characters, POS tags and
    relations) and which annotation the model read.

    --by FIELD scores each group of items with the task's metric too (table, JSON line, --plot):
    groups whose value no training item has are marked "unseen in training" (not for source).

    Examples:

        cn3 evaluate runs/trec-cn3-seed1 --split test --report

        cn3 evaluate runs/ud_pos-cn3-seed1 --file ../shared/data/ud_english_ewt/en_ewt-ud-dev.conllu --annotator spacy

        cn3 evaluate runs/logic-cn3-seed1 --split test --by n_ops --plot n_ops.png  # length generalisation
    """
    from cn3.sentence.evaluation import evaluate_run

    with user_errors(), bad_parameters():
        if plot is not None and by is None:
            raise typer.BadParameter("--plot draws the groups of --by; give --by FIELD too")
        evaluation = evaluate_run(run, split.value, file, annotator=annotator.value if annotator else None,
                                  embeddings=embeddings, use_vectors=not no_vectors, by=by, device=device.value)
        for note in evaluation.notes:
            console.print(note, soft_wrap=True)
    _print_evaluation(evaluation, report)
    if by:
        _print_groups(evaluation.groups, by, evaluation.metric)
        if plot is not None:
            from cn3.sentence.grouped import plot_groups

            with user_errors():
                title = f"{evaluation.task} {evaluation.data}"
                console.print(f"wrote {plot_groups(evaluation.groups, plot, by, evaluation.metric, title)}")
    print(json.dumps(evaluation.summary()))


@contextmanager
def bad_parameters() -> Iterator[None]:
    """A request that is wrong in itself (:class:`cn3.util.errors.ArgumentError`) is a bad
    parameter: usage and exit code 2, as typer reports one."""
    from cn3.util.errors import ArgumentError

    try:
        yield
    except ArgumentError as err:
        raise typer.BadParameter(str(err)) from None


def _print_evaluation(evaluation, report: bool) -> None:
    """The score, what of the data the run knows, the vectors and annotation read, and with
    ``report`` the per-label table."""
    from rich.table import Table

    from data_prep.coverage import describe

    console.print(f"{evaluation.task} {evaluation.data}: {evaluation.metric} [bold]{evaluation.score:.2f}[/] "
                  f"({evaluation.items:,} items)")
    for line in describe(evaluation.coverage):
        console.print(line, soft_wrap=True)
    console.print(f"word vectors: {evaluation.vectors_source}", soft_wrap=True)
    console.print(f"annotation: {evaluation.annotation}", soft_wrap=True)
    if evaluation.truncated:
        console.print(f"{evaluation.truncated:,} sentences were cut to the run's {evaluation.max_len} tokens, as at "
                      "training")
    if report:
        table = Table()
        for col in ("label", "precision", "recall", "f1", "support"):
            table.add_column(col, justify="right")
        for label, r in evaluation.result["per_label"].items():
            table.add_row(label, f"{r['precision']:.1f}", f"{r['recall']:.1f}", f"{r['f1']:.1f}",
                          str(r["support"]))
        console.print(table)


def _print_groups(groups: list, field: str, metric: str) -> None:
    """The groups as a table; a last column marks those unseen in training, when there are any."""
    from rich.table import Table

    from cn3.sentence.grouped import UNSEEN

    table = Table(title=f"by {field}")
    numeric = all(isinstance(g.value, (int, float)) for g in groups)
    table.add_column(field, justify="right" if numeric else "left")
    for col in ("items", metric):
        table.add_column(col, justify="right")
    marked = any(g.unseen for g in groups)
    if marked:
        table.add_column("")
    for g in groups:
        table.add_row(g.label, f"{g.items:,}", f"{g.score:.2f}", *([UNSEEN if g.unseen else ""] if marked else []))
    console.print(table)


def predict_command(
    run: Path = typer.Argument(..., help="A run directory from `cn3 train`."),
    texts: list[str] = typer.Argument(None, help="Text to label; for pair tasks give two texts (premise, hypothesis)."),
    file: Path = typer.Option(None, "--file", "-f", exists=True, dir_okay=False,
                              help="One text per line (pairs: premise<TAB>hypothesis); JSONL goes to stdout."),
    embeddings: Path = typer.Option(None, "--embeddings", exists=True, dir_okay=False, help=EMBEDDINGS_HELP),
    no_vectors: bool = typer.Option(False, "--no-vectors", help=NO_VECTORS_HELP),
    pretokenized: bool = typer.Option(False, "--pretokenized", help="The text is already split into tokens: "
                                      "split on whitespace only and keep every token as given."),
    device: Device = typer.Option(Device.auto, "--device"),
) -> None:
    """Label new text with a trained run: a class per text, or a tag per token.

    Text is split into tokens as the run's task files are (SNLI: "does n't"; MR, SUBJ, SICK: "doesn't";
    custom: on spaces), and the tokens are printed with each label. --pretokenized splits on
    whitespace only, so tokens stay as given (a CoNLL line's "1." stays one token and its tags line up).

    One JSON line per text. Sentence and pair tasks: "label" and "probs", every class's softmax
    probability ({label: p}, most likely first, so "label" is its first key). Tagging tasks: "tags"
    (the CRF's best tag sequence, Viterbi) and "marginals", per token the CRF's posterior probability
    of each tag (forward-backward), tags with p >= 0.01, most likely first. A Viterbi tag is usually,
    but not always, the token's most likely tag: it belongs to the best sequence as a whole.
    Probabilities are rounded to 4 decimals.

    Words outside the run's vocabulary get their pretrained vector; stderr says how many there
    were and which annotation the model read.
    """
    from cn3.runs.layout import RunDir
    from cn3.sentence.inference import (
        examples_dataset,
        load_model,
        predict_with_probabilities,
        prediction_record,
        run_vectors,
        text_examples,
    )
    from cn3.train.runtime import resolve_device
    from data_prep.coverage import coverage, describe
    from data_prep.textio import read_lines

    with user_errors():
        dev = resolve_device(device.value)
        loaded = load_model(RunDir(run), dev)
        level = loaded.manifest["level"]
        if file is not None:
            lines = [line for _, line in read_lines(file)]
            examples = text_examples(lines, loaded.manifest, str(file), pretokenized)
        elif texts:
            joined = ["\t".join(texts)] if level == "pair" else texts
            examples = text_examples(joined, loaded.manifest, pretokenized=pretokenized)
        else:
            raise typer.BadParameter("give a text or --file")
        vectors, _ = run_vectors(loaded.manifest, embeddings, use=not no_vectors)
        text = examples_dataset(examples, loaded.vocabs, loaded.manifest, with_labels=False, vectors=vectors)
        preds, probs = predict_with_probabilities(loaded.model, text.dataset, dev)
    console.print(describe(coverage(text.dataset, loaded.vocabs))[0], soft_wrap=True)
    console.print(f"annotation: {text.annotation}", soft_wrap=True)
    if text.truncated:
        max_len = loaded.manifest["settings"]["max_len"]
        console.print(f"{text.truncated:,} texts were cut to the run's {max_len} tokens, "
                      "as at training (their printed tokens too)")
    labels = loaded.vocabs["labels"].itos
    for ex, pred, prob in zip(examples, preds, probs):
        record = prediction_record(ex, level, labels, pred, prob)
        sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
