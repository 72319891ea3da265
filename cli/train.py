"""``cn3 train``, ``cn3 evaluate``, ``cn3 predict``: the CN3 learner from the command line."""

from __future__ import annotations

import json
import shlex
import sys
from enum import Enum
from pathlib import Path

import typer

from cli.errors import user_errors
from cli.prepare import AnnotatorName
from data_prep.console import console


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class Split(str, Enum):
    dev = "dev"
    test = "test"
    train = "train"


def default_run_dir(cfg) -> Path:
    name = f"{cfg.data.task}-{cfg.model.encoder}"
    if cfg.data.task in ("mr", "subj", "cr", "mpqa"):
        name += f"-fold{cfg.data.fold}"
    return Path("runs") / f"{name}-seed{cfg.train.seed}"


def train_command(
    task: str = typer.Option(None, "--task", "-t", help="Task to train on (`cn3 tasks`); its tuned config "
                             "cn3/configs/<task>.yaml (shipped with cn3) is used unless --config is given."),
    config: Path = typer.Option(None, "--config", "-c", exists=True, dir_okay=False, help="YAML run config."),
    overrides: list[str] = typer.Option(None, "--set", "-s", help="Override a config value, e.g. "
                                        "--set model.graph_layers=2 --set train.optimizer=adam (repeatable)."),
    prepared: Path = typer.Option(None, "--prepared", help="A directory from `cn3 prepare` (else prepared on the fly)."),
    data: Path = typer.Option(None, "--data", help="Data root (default: $CN3_DATA or ../shared/data)."),
    run_dir: Path = typer.Option(None, "--run-dir", "-r", help="Run directory (default: runs/<task>-<encoder>-seed<S>)."),
    seed: int = typer.Option(None, "--seed", help="Random seed (train.seed)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --run-dir from latest.pt."),
    device: Device = typer.Option(Device.auto, "--device", help="auto = CUDA when available, else CPU."),
) -> None:
    """Train a sentence-graph model; the run directory keeps config, log, metrics and checkpoints.

    Examples:

        cn3 train --task trec

        cn3 train --task snli --set model.encoder=lstm        # a baseline of the zoo (`cn3 encoders`)

        cn3 train --task logic --set model.encoder=onlstm_san # ON-LSTM under self-attention (Hao et al.)

        cn3 train --task conll2003 --set model.edge_attrs=true # "Dep": parser relations as edge attributes

        cn3 train --task trec --run-dir runs/trec-a --resume   # after Ctrl-C
    """
    from cn3.resolve import resolve_config
    from cn3.trainer import train

    with user_errors():
        if task is None and config is None:
            raise typer.BadParameter("give --task or --config")
        cfg = resolve_config(task, config, {"data.prepared": prepared, "data.data": data, "train.seed": seed},
                             overrides or [])
        try:
            train(cfg, run_dir or default_run_dir(cfg), resume=resume, device_name=device.value,
                  command=shlex.join(["cn3", *sys.argv[1:]]))
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
    device: Device = typer.Option(Device.auto, "--device"),
) -> None:
    """Score a trained run: accuracy, span F1 (chunking, NER) or token accuracy (POS).

    Words outside the run's vocabulary get their pretrained vector (the run records its vectors
    file), on a staged split as on --file, so a file scores the same whether or not it was staged
    when the data was prepared. The output says how much of the data the run knows (out-of-
    vocabulary tokens and types, with and without vectors; unknown characters, POS tags and
    relations) and which annotation the model read.

    Examples:

        cn3 evaluate runs/trec-cn3-seed1 --split test --report

        cn3 evaluate runs/ud_pos-cn3-seed1 --file ../shared/data/ud_english_ewt/en_ewt-ud-dev.conllu --annotator spacy
    """
    from rich.table import Table

    from cn3.inference import examples_dataset, read_task_file, run_vectors
    from cn3.run_dir import RunDir
    from cn3.runtime import resolve_device
    from cn3.trainer import evaluate_dataset, load_model
    from data_prep.coverage import coverage, describe
    from data_prep.dataset import load_prepared

    with user_errors():
        dev = resolve_device(device.value)
        loaded = load_model(RunDir(run), dev)
        manifest = loaded.manifest
        if file is not None:
            vectors, vectors_source = run_vectors(manifest, embeddings, use=not no_vectors)
            text = examples_dataset(read_task_file(manifest, file), loaded.vocabs, manifest, with_labels=True,
                                    vectors=vectors, annotator=annotator.value if annotator else None)
            dataset, annotation, truncated = text.dataset, text.annotation, text.truncated
            what = str(file)
        else:
            if annotator is not None or embeddings is not None or no_vectors:
                raise typer.BadParameter("--annotator, --embeddings and --no-vectors apply to --file; a staged "
                                         "split was annotated and given its vectors when it was prepared")
            prepared = _prepared_dir(loaded)
            ds = load_prepared(prepared)
            if split.value not in ds.splits:
                raise typer.BadParameter(f"{prepared} has no {split.value} split (it has: {', '.join(ds.splits)})")
            dataset, what = ds.splits[split.value], f"{split.value} ({prepared})"
            annotation = f"{manifest['annotator']['name']} (the prepared dataset's)"
            truncated = 0  # counted by `cn3 prepare`
            vectors_source = (f"{manifest['embeddings']['path']} (looked up when the dataset was prepared)"
                              if manifest.get("embeddings") else "none recorded by the run")
        labels = loaded.vocabs["labels"].itos
        result = evaluate_dataset(loaded.model, dataset, labels, manifest["level"], manifest.get("tag_scheme"), dev)
        known = coverage(dataset, loaded.vocabs)
    console.print(f"{manifest['task']} {what}: {result['metric']} [bold]{result['score']:.2f}[/] "
                  f"({len(dataset):,} items)")
    for line in describe(known):
        console.print(line, soft_wrap=True)
    console.print(f"word vectors: {vectors_source}", soft_wrap=True)
    console.print(f"annotation: {annotation}", soft_wrap=True)
    if truncated:
        console.print(f"{truncated:,} sentences were cut to the run's {manifest['settings']['max_len']} tokens, as at "
                      "training")
    if report:
        table = Table()
        for col in ("label", "precision", "recall", "f1", "support"):
            table.add_column(col, justify="right")
        for label, r in result["per_label"].items():
            table.add_row(label, f"{r['precision']:.1f}", f"{r['recall']:.1f}", f"{r['f1']:.1f}",
                          str(r["support"]))
        console.print(table)
    print(json.dumps({"task": manifest["task"], "data": what, "metric": result["metric"],
                      "score": round(result["score"], 2), "coverage": known, "annotation": annotation}))


def _prepared_dir(loaded) -> Path:
    """The prepared dataset a run was trained on (from its config; checked against the fingerprint)."""
    from cn3.trainer import ensure_prepared
    from data_prep.prepare import read_manifest

    cfg = loaded.config
    path = ensure_prepared(cfg) if not cfg.data.prepared else Path(cfg.data.prepared)
    manifest = read_manifest(path)
    if manifest is None or manifest.get("fingerprint") != loaded.manifest.get("fingerprint"):
        from cn3.config import ConfigError

        raise ConfigError(f"{path} is not the dataset this run was trained on (vocabularies may differ); "
                          "score a file with --file instead")
    return path


def predict_command(
    run: Path = typer.Argument(..., help="A run directory from `cn3 train`."),
    texts: list[str] = typer.Argument(None, help="Text to label; for pair tasks give two texts (premise, hypothesis)."),
    file: Path = typer.Option(None, "--file", "-f", exists=True, dir_okay=False,
                              help="One text per line (pairs: premise<TAB>hypothesis); JSONL goes to stdout."),
    embeddings: Path = typer.Option(None, "--embeddings", exists=True, dir_okay=False, help=EMBEDDINGS_HELP),
    no_vectors: bool = typer.Option(False, "--no-vectors", help=NO_VECTORS_HELP),
    device: Device = typer.Option(Device.auto, "--device"),
) -> None:
    """Label new text with a trained run: a class per text, or a tag per token.

    Text is split into tokens as the run's task files are (SNLI: "does n't"; MR, SUBJ, SICK: "doesn't";
    custom: on spaces), and the tokens are printed with each label.

    One JSON line per text. Sentence and pair tasks: "label" and "probs", every class's softmax
    probability ({label: p}, most likely first, so "label" is its first key). Tagging tasks: "tags"
    (the CRF's best tag sequence, Viterbi) and "marginals", per token the CRF's posterior probability
    of each tag (forward-backward), tags with p >= 0.01, most likely first. A Viterbi tag is usually,
    but not always, the token's most likely tag: it belongs to the best sequence as a whole.
    Probabilities are rounded to 4 decimals.

    Words outside the run's vocabulary get their pretrained vector; stderr says how many there
    were and which annotation the model read.
    """
    from cn3.inference import (examples_dataset, prediction_record, predict_with_probabilities, run_vectors,
                               text_examples)
    from data_prep.coverage import coverage, describe
    from cn3.run_dir import RunDir
    from cn3.runtime import resolve_device
    from cn3.trainer import load_model
    from data_prep.textio import read_lines

    with user_errors():
        dev = resolve_device(device.value)
        loaded = load_model(RunDir(run), dev)
        level = loaded.manifest["level"]
        if file is not None:
            lines = [line for _, line in read_lines(file)]
            examples = text_examples(lines, loaded.manifest, str(file))
        elif texts:
            joined = ["\t".join(texts)] if level == "pair" else texts
            examples = text_examples(joined, loaded.manifest)
        else:
            raise typer.BadParameter("give a text or --file")
        vectors, _ = run_vectors(loaded.manifest, embeddings, use=not no_vectors)
        text = examples_dataset(examples, loaded.vocabs, loaded.manifest, with_labels=False, vectors=vectors)
        preds, probs = predict_with_probabilities(loaded.model, text.dataset, dev)
    console.print(describe(coverage(text.dataset, loaded.vocabs))[0], soft_wrap=True)
    console.print(f"annotation: {text.annotation}", soft_wrap=True)
    if text.truncated:
        console.print(f"{text.truncated:,} texts were cut to the run's {loaded.manifest['settings']['max_len']} tokens, "
                      "as at training (their printed tokens too)")
    labels = loaded.vocabs["labels"].itos
    for ex, pred, prob in zip(examples, preds, probs):
        record = prediction_record(ex, level, labels, pred, prob)
        sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
