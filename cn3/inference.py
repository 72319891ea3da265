"""New text through a trained run: tokenise and annotate as the run's data was, map through its vocab."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from cn3.models.crf_marginals import crf_marginals
from cn3.trainer import scored_batches
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


MARGINAL_FLOOR = 0.01  # tags less likely than this at a token are left out of its printed marginals


def probabilities(model, batch, out) -> Tensor:
    """How sure ``model`` is of its predictions for ``batch`` (``out = model(batch)``, in eval mode).

    Sentences and pairs: the softmax of the class logits, ``(B, K)``. Tagging: the CRF's posterior
    marginal ``p(y_t = j | x)`` of every tag at every token (forward-backward), ``(B, N, T)``, zero
    under padding. The tagging model's forward returns only the Viterbi path, so the encoder states
    are recomputed here (deterministic in eval mode) and scored by the head's own emissions, the
    ones its likelihood and Viterbi decoding use.
    """
    if model.args.level == "node":
        h, _ = model.encode(batch.a)  # (B, N, d)
        return crf_marginals(model.head.crf, model.head.emissions(h), batch.a.mask)  # (B, N, T)
    return out.logits.softmax(-1)  # (B, K)


def predict_with_probabilities(model, dataset, device: torch.device, batch_size: int = 128) -> tuple[list, list]:
    """Predictions and their probabilities for every item of ``dataset``, in dataset order.

    Returns ``(predictions, probs)``: per item a class id and a list of ``K`` class probabilities, or
    a list of tag ids (the Viterbi path) and per token a list of ``T`` tag marginals.
    """
    preds: list = [None] * len(dataset)
    probs: list = [None] * len(dataset)
    for batch, out, rows in scored_batches(model, dataset, device, batch_size):
        p = probabilities(model, batch, out).cpu()
        for row, i, n in rows:
            node = model.args.level == "node"
            preds[i] = out.pred[row, :n].tolist() if node else int(out.pred[row])
            probs[i] = p[row, :n].tolist() if node else p[row].tolist()
    return preds, probs


def _ranked(p: list[float], labels: list[str], floor: float = 0.0) -> dict[str, float]:
    """``{label: p}`` by descending probability, rounded to 4 decimals; below ``floor`` left out
    (but never the most likely label)."""
    order = sorted(range(len(p)), key=lambda k: -p[k])
    return {labels[k]: round(p[k], 4) for rank, k in enumerate(order) if rank == 0 or p[k] >= floor}


def prediction_record(example: Example, level: str, labels: list[str], pred, probs) -> dict:
    """One JSON line of ``cn3 predict``: the tokens, and either the class with ``probs`` (every
    class, most likely first) or the tags with ``marginals`` (per token, the tags with
    ``p >= MARGINAL_FLOOR``, most likely first)."""
    tokens = [s.tokens for s in example.sentences]
    if level == "node":
        return {"tokens": tokens[0], "tags": [labels[t] for t in pred],
                "marginals": [_ranked(p, labels, MARGINAL_FLOOR) for p in probs]}
    return {"tokens": tokens if level == "pair" else tokens[0], "label": labels[pred],
            "probs": _ranked(probs, labels)}
