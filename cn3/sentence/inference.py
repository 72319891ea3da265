"""A trained sentence run in use: load it, score a prepared split, predict new text.

New text is tokenised and annotated as the run's data was and mapped through its vocabulary
(and the pretrained vectors it recorded), so a file scores the same whether or not it was staged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from cn3.config import ConfigError, from_dict
from cn3.metrics import score
from cn3.runs.compat import check_sentence_run, upgrade_sentence_config
from cn3.runs.layout import RunDir
from cn3.sentence.batching import item_lengths, make_batch
from cn3.sentence.config import RunConfig
from cn3.sentence.crf_marginals import crf_marginals
from cn3.sentence.model import ModelArgs, SentenceGraphModel
from cn3.train.bucketing import bucketed_batches
from cn3.train.checkpoint import Checkpoint
from cn3.util.errors import DataError
from data_prep.example import Example, Sentence
from data_prep.store import GraphDataset, encode_split


@dataclass
class LoadedModel:
    model: SentenceGraphModel
    config: RunConfig
    vocabs: dict
    manifest: dict
    checkpoint: Checkpoint


def load_model(run: RunDir, device: torch.device, which: str = "best") -> LoadedModel:
    """Rebuild a trained model from its self-describing checkpoint (its ``model`` weights).

    Raises:
        RunError: no checkpoint; ConfigError: the checkpoint's config (named by its path) has a key or
        value this version does not know.
    """
    from data_prep.vocab import Vocab

    run.require()
    path = run.best if which == "best" and run.best.is_file() else run.latest
    ckpt = Checkpoint.load(path)
    check_sentence_run(ckpt.config, ckpt.cn3_version, str(path))
    try:
        config = from_dict(RunConfig, upgrade_sentence_config(ckpt.config, ckpt.cn3_version))
    except ConfigError as err:  # the checkpoint's own config: say which checkpoint
        raise ConfigError(f"{path}: its recorded config does not load here: {err}") from None
    model = SentenceGraphModel(config.model, ModelArgs(**ckpt.model_args))
    model.load_state_dict(ckpt.model)
    model.to(device).eval()
    vocabs = {k: Vocab.from_dict(v) for k, v in ckpt.payload["vocab"].items()}
    return LoadedModel(model, config, vocabs, ckpt.payload["manifest"], ckpt)


def scored_batches(model: SentenceGraphModel, dataset, device: torch.device, batch_size: int = 128):
    """The model's outputs over ``dataset`` in length-sorted batches, in eval mode and without
    gradients: yields ``(batch, out, rows)`` where ``rows`` pairs each row with its item and length.

    Words of ``dataset`` outside the model's vocabulary that have a pretrained vector are embedded
    with it (``dataset.open_vectors``; see :func:`data_prep.store.open_vocabulary`)."""
    model.eval()
    lengths = item_lengths(dataset)
    with torch.no_grad(), model.nodes.open_vocabulary(getattr(dataset, "open_vectors", None)):
        for indices in bucketed_batches(lengths, batch_size, shuffle=False):
            batch = make_batch(dataset, indices).to(device)
            yield batch, model(batch, with_loss=False), [(row, i, lengths[i]) for row, i in enumerate(indices)]


def predict(model: SentenceGraphModel, dataset, device: torch.device, batch_size: int = 128,
            keep_info: bool = False) -> tuple[list, list]:
    """Predictions for every item of ``dataset`` in dataset order: class ids, or tag-id lists.

    Returns ``(predictions, infos)``; ``infos`` holds each batch's attention/gate outputs when
    ``keep_info`` (for visualisation), else is empty.
    """
    preds = SplitOutputs(len(dataset), model.args.level == "node")
    infos = []
    for batch, out, rows in scored_batches(model, dataset, device, batch_size):
        preds.add(out.pred, rows)
        if keep_info:
            infos.append(([i for _, i, _ in rows], out.info))
    return preds.per_item(), infos


class SplitOutputs:
    """A per-row output of every batch of a split, kept on the device and copied to the host once.

    ``add(values, rows)`` takes a batch's ``(B,)`` or ``(B, ...)`` tensor (``(B, N, ...)`` when
    ``per_token``) with :func:`scored_batches`'s ``rows``; :meth:`per_item` pads the batches to one
    width, copies them in one transfer and returns each item's value in dataset order: a Python
    number or list, or per token (cut to the item's length) a list.
    """

    def __init__(self, items: int, per_token: bool):
        self.items, self.per_token = items, per_token
        self.parts: list[Tensor] = []
        self.rows: list[tuple[int, int]] = []  # (item, length) of each row of the concatenated batches

    def add(self, values: Tensor, rows: list[tuple[int, int, int]]) -> None:
        self.parts.append(values)
        self.rows.extend((i, n) for _, i, n in rows)

    def per_item(self) -> list:
        out: list = [None] * self.items
        if not self.parts:
            return out
        parts = self.parts
        if self.per_token:
            width = max(p.shape[1] for p in parts)
            parts = [torch.nn.functional.pad(p, [0, 0] * (p.dim() - 2) + [0, width - p.shape[1]]) for p in parts]
        host = torch.cat(parts).cpu().tolist()  # the split's one copy to the host
        for (i, n), value in zip(self.rows, host, strict=True):
            out[i] = value[:n] if self.per_token else value
        return out


def gold_and_predictions(model, dataset, labels: list[str], level: str, device,
                         batch_size: int = 128) -> tuple[list, list]:
    """``(gold, pred)`` for a dataset whose items carry gold labels, in dataset order, as label strings
    (or tag-string lists for ``level == "node"``): what :func:`cn3.metrics.score` scores and what a
    run's ``predictions/<split>.jsonl`` keeps, so one pass of the model serves both."""
    preds, _ = predict(model, dataset, device, batch_size)
    if level == "node":
        gold = [[labels[t] for t in dataset[i].y.tolist()] for i in range(len(dataset))]
        pred = [[labels[t] for t in p] for p in preds]
    else:
        gold = [labels[int(y)] for y in dataset.t["y"]]
        pred = [labels[p] for p in preds]
    return gold, pred


def evaluate_dataset(model, dataset, labels: list[str], level: str, tag_scheme: str | None,
                     device, batch_size: int = 128) -> dict:
    """Score ``model`` on a dataset whose items carry gold labels."""
    return score(level, tag_scheme, *gold_and_predictions(model, dataset, labels, level, device, batch_size))


def annotator_for_run(manifest: dict, examples_have_gold: bool, override: str | None = None):
    """The annotator for new text, and a sentence saying which one it is and why.

    The run's own annotator by default; for a run trained on gold annotation, text without it is
    parsed by spaCy as a stand-in. ``override`` (``cn3 evaluate --annotator``) forces one, e.g. to
    measure what the stand-in costs on a gold file. ``(None, ...)`` when the run reads neither POS
    nor trees.
    """
    from data_prep.annotators import make_annotator

    ann = manifest["annotator"]
    if not (ann["pos_input"] or ann["trees"]):
        if override not in (None, "none"):
            raise ConfigError(f"--annotator {override}: this run reads neither POS tags nor trees")
        return None, "none (the run reads neither POS tags nor trees)"
    name = override or ann["name"]
    if name == "gold" and not examples_have_gold:
        if override == "gold":
            raise ConfigError("--annotator gold: the text has no gold POS tags/trees for this run to read")
        return make_annotator("spacy"), ("spacy, standing in for the gold annotation the run was trained on "
                                         "(the text carries none)")
    if override is not None and override != ann["name"]:
        return make_annotator(name), f"{name} (--annotator; the run was trained on {ann['name']} annotation)"
    if name == "gold":  # what the run's gold annotation held: trees alone for the logic formulas
        gold = frozenset(ann.get("provides", ("pos", "deps")))
        return make_annotator(name, gold=gold), "gold (the file's own annotation, as in training)"
    return make_annotator(name), f"{name} (as the run's training data)"


def _has_gold(examples: list[Example], manifest: dict) -> bool:
    """Whether every sentence carries what the run reads: POS tags and/or trees."""
    ann = manifest["annotator"]
    return all((not ann["pos_input"] or s.upos is not None) and (not ann["trees"] or s.heads is not None)
               for ex in examples for s in ex.sentences)


def run_vectors(manifest: dict, embeddings: Path | None = None, use: bool = True):
    """The pretrained vectors a run was trained with (gensim ``KeyedVectors``), for the words of new
    text outside its vocabulary, and a sentence saying where they come from.

    Looked for in order: ``embeddings`` (checked against the run's sha256), the vectors cache (by
    sha256), the path the run recorded, the same path under today's data root. ``use=False``
    (``--no-vectors``) returns ``None``.

    Raises:
        ConfigError: the file is missing or changed (naming ``--embeddings`` and ``--no-vectors``).
    """
    from data_prep.embeddings import cached_vectors, load_vectors, sha256_file
    from data_prep.paths import data_root

    record = manifest.get("embeddings")
    if record is None:
        if embeddings is not None:
            raise ConfigError("--embeddings: this run records no word vectors (trained without them, or by cn3 "
                              "before 0.3.0, which did not record the file): there is nothing to check it against")
        return None, "none recorded by the run (trained without pretrained vectors, or by cn3 < 0.3.0)"
    if not use:
        return None, "not used (--no-vectors): every word outside the run's vocabulary is <unk>"
    sha = record["sha256"]
    if embeddings is not None:
        if sha256_file(embeddings) != sha:
            raise ConfigError(f"--embeddings {embeddings} is not the vectors file this run was trained with "
                              f"(its sha256 is {sha256_file(embeddings)[:12]}…, the run's {sha[:12]}… from "
                              f"{record['path']})")
        return load_vectors(embeddings, sha), f"{embeddings} (--embeddings)"
    vectors = cached_vectors(sha)
    if vectors is not None:
        return vectors, f"{record['path']} (cached by sha256 {sha[:12]}…)"
    candidates = [Path(record["path"])]
    if record.get("data_relative"):
        try:
            candidates.append(data_root() / record["data_relative"])
        except DataError:
            pass  # no data root here: only the recorded path can be tried
    for path in candidates:
        if path.is_file() and sha256_file(path) == sha:
            return load_vectors(path, sha), str(path)
    raise ConfigError(f"this run was trained with the word vectors {record['path']} (sha256 {sha[:12]}…), which are "
                      "missing or changed here; pass --embeddings PATH with that file (read once, then cached), or "
                      "--no-vectors to read every word outside the run's vocabulary as <unk>")


def text_examples(texts: list[str], manifest: dict, source: str = "<argument>",
                  pretokenized: bool = False) -> list[Example]:
    """Examples from raw strings: one sentence each, or for pair tasks a premise/hypothesis pair
    separated by a TAB (in files) or given as two strings. Each sentence is split into tokens as the
    run's task files are (``TaskSpec.tokenize_text``: e.g. MR keeps ``doesn't`` whole, SNLI splits it),
    and keeps the tree it carries itself where the task has one (``TaskSpec.text_heads``: a formula's
    brackets). ``pretokenized``: split on whitespace only, every token kept exactly as given (a
    CoNLL line's "1." stays one token, so its tags line up with the words given)."""
    from data_prep.tasks import text_tokenizer, text_tree

    level, tree = manifest["level"], text_tree(manifest["task"])
    tokenize = str.split if pretokenized else text_tokenizer(manifest["task"])
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
            try:
                heads = tree(side) if tree is not None else None
            except ValueError as err:  # e.g. a formula's unbalanced brackets
                raise DataError(str(err), source, number) from None
            sentences.append(Sentence(tokens, heads=heads))
        examples.append(Example(sentences, line=number, source=source))
    return examples


@dataclass
class NewText:
    """New text encoded for a run: the dataset, the annotation it was given (a sentence saying which
    and why) and how many sentences were cut to the run's ``max_len``."""

    dataset: GraphDataset
    annotation: str
    truncated: int


def examples_dataset(examples: list[Example], vocabs: dict, manifest: dict, with_labels: bool, vectors=None,
                     annotator: str | None = None) -> NewText:
    """Prepare ``examples`` as the run's data was: cut to its ``max_len``, annotate, encode with its
    vocabularies.

    ``vectors`` (:func:`run_vectors`): words outside the vocabulary that have one keep it, as the
    staged dev/test splits do. ``annotator``: force one (:func:`annotator_for_run`). Without labels
    every item gets a placeholder label.

    Raises:
        DataError: a label the run does not know (naming file and line).
    """
    from data_prep.prepare import truncate

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
    max_len = manifest["settings"].get("max_len")
    truncated = truncate({"text": examples}, max_len) if max_len else 0
    parser, annotation = annotator_for_run(manifest, _has_gold(examples, manifest), annotator)
    if parser is not None:
        parser.annotate([s for ex in examples for s in ex.sentences])
    ann = manifest["annotator"]
    tensors = encode_split(examples, level, vocabs, manifest["settings"]["char_len"],
                           ann["pos_input"], ann["trees"], vectors)
    return NewText(GraphDataset(tensors, level), annotation, truncated)


def read_task_file(manifest: dict, path: Path) -> list[Example]:
    """Read ``path`` in the format of the run's task (how held-out test sets are scored)."""
    from data_prep.tasks import get_task
    from data_prep.taskspec import TaskOptions

    options = TaskOptions(**{k: v for k, v in manifest["settings"]["options"].items() if k != "files"})
    spec = get_task(manifest["task"], options)
    if spec.read_file is None:
        raise DataError(f"task {spec.name} has no single-file reader; score it with --split", path)
    return spec.read_file(Path(path), options)


MARGINAL_FLOOR = 0.01  # tags less likely than this at a token are left out of its printed marginals


def probabilities(model, batch, out) -> Tensor:
    """How sure ``model`` is of its predictions for ``batch`` (``out = model(batch)``, in eval mode).

    Sentences and pairs: the softmax of the class logits, ``(B, K)``. Tagging: the CRF's posterior
    marginal ``p(y_t = j | x)`` of every tag at every token, ``(B, N, T)``, zero under padding (the
    tagging forward returns only the Viterbi path, so the encoder states are recomputed here).
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
    node = model.args.level == "node"
    preds, probs = SplitOutputs(len(dataset), node), SplitOutputs(len(dataset), node)
    for batch, out, rows in scored_batches(model, dataset, device, batch_size):
        preds.add(out.pred, rows)
        probs.add(probabilities(model, batch, out), rows)
    return preds.per_item(), probs.per_item()


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
