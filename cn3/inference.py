"""New text through a trained run: tokenise and annotate as the run's data was, map through its vocab."""

from __future__ import annotations

from pathlib import Path

from data_prep.errors import DataError
from data_prep.example import Example, Sentence
from data_prep.store import GraphDataset, encode_split


def annotator_for_run(manifest: dict, examples_have_gold: bool):
    """The annotator the run was trained with; for ``gold`` runs on raw text, spaCy stands in."""
    from data_prep.annotators import make_annotator

    ann = manifest["annotator"]
    if not (ann["pos_input"] or ann["trees"]):
        return None
    name = ann["name"]
    if name == "gold" and not examples_have_gold:
        name = "spacy"  # raw text has no gold annotation: parse it as a stand-in
    return make_annotator(name)


def text_examples(texts: list[str], manifest: dict, source: str = "<argument>") -> list[Example]:
    """Examples from raw strings: one sentence each, or for pair tasks a premise/hypothesis pair
    separated by a TAB (in files) or given as two strings. Each sentence is split into tokens as the
    run's task files are (``TaskSpec.tokenize_text``: e.g. MR keeps ``doesn't`` whole, SNLI splits it)."""
    from data_prep.tasks import text_tokenizer

    level, tokenize = manifest["level"], text_tokenizer(manifest["task"])
    examples = []
    for number, text in enumerate(texts, start=1):
        sides = text.split("\t") if level == "pair" else [text]
        if level == "pair" and len(sides) != 2:
            raise DataError("expected two sentences separated by a TAB (premise<TAB>hypothesis)", source, number)
        sentences = []
        for side in sides:
            tokens = tokenize(side)
            if not tokens:
                raise DataError("empty sentence", source, number)
            sentences.append(Sentence(tokens))
        examples.append(Example(sentences, line=number, source=source))
    return examples


def examples_dataset(examples: list[Example], vocabs: dict, manifest: dict, with_labels: bool) -> GraphDataset:
    """Annotate (as the run's data was) and encode ``examples`` with the run's vocabularies.

    Without labels (prediction) every item gets a placeholder label, ignored by the caller.
    With labels, one that the run does not know is a ``DataError`` naming file and line.
    """
    level = manifest["level"]
    labels = vocabs["labels"]
    for ex in examples:
        if with_labels:
            wanted = [t for s in ex.sentences for t in (s.tags or [])] if level == "node" else [ex.label]
            bad = next((t for t in wanted if t not in labels), None)
            if bad is not None:
                raise DataError(f"label {bad!r} is unknown to this model (it knows: {', '.join(labels.itos)})",
                                ex.source, ex.line)
        elif level == "node":
            for s in ex.sentences:
                s.tags = [labels.itos[0]] * len(s)
        else:
            ex.label = labels.itos[0]
    have_gold = all(s.upos is not None for ex in examples for s in ex.sentences)
    annotator = annotator_for_run(manifest, have_gold)
    if annotator is not None:
        annotator.annotate([s for ex in examples for s in ex.sentences])
    ann = manifest["annotator"]
    tensors = encode_split(examples, level, vocabs, manifest["settings"]["char_len"],
                           ann["pos_input"], ann["trees"])
    return GraphDataset(tensors, level)


def read_task_file(manifest: dict, path: Path) -> list[Example]:
    """Read ``path`` in the format of the run's task (how held-out test sets are scored)."""
    from data_prep.taskspec import TaskOptions
    from data_prep.tasks import get_task

    options = TaskOptions(**{k: v for k, v in manifest["settings"]["options"].items() if k != "files"})
    spec = get_task(manifest["task"], options)
    if spec.read_file is None:
        raise DataError(f"task {spec.name} has no single-file reader; score it with --split", path)
    return spec.read_file(Path(path), options)
