"""Score a trained sentence run (``cn3 evaluate``): on a split of the prepared dataset it was trained
on, or on any file in its task's format, optionally per group of items.

Words outside the run's vocabulary get their pretrained vector (the run records its vectors file),
on a staged split as on a file, so a file scores the same whether or not it was staged when the data
was prepared. The result says how much of the data the run knows and which annotation the model read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from cn3.config import ConfigError
from cn3.runs.layout import RunDir
from cn3.sentence.inference import LoadedModel
from cn3.util.errors import ArgumentError, DataError


@dataclass
class Evaluation:
    """A run scored on some data.

    Attributes:
        task: the run's task.
        data: what was scored: the file, or ``<split> (<prepared directory>)``.
        items: how many items.
        result: :func:`cn3.metrics.score`'s ``metric``, ``score`` and ``per_label``.
        coverage: :func:`data_prep.coverage.coverage` of the data against the run's vocabularies.
        vectors_source: where the pretrained vectors for unknown words came from (a sentence).
        annotation: which annotation the model read (a sentence).
        truncated: sentences cut here to the run's ``max_len`` tokens (0 for a staged split, whose
            sentences were cut when it was prepared).
        max_len: the run's ``max_len``.
        by: the field the items were grouped by, or None.
        groups: the scored :class:`cn3.sentence.grouped.Group` of each value of ``by``, or None.
        notes: what the caller should know that is no error (e.g. groups left unmarked).
    """

    task: str
    data: str
    items: int
    result: dict
    coverage: dict
    vectors_source: str
    annotation: str
    truncated: int
    max_len: int | None
    by: str | None = None
    groups: list | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def metric(self) -> str:
        return self.result["metric"]

    @property
    def score(self) -> float:
        return self.result["score"]

    def summary(self) -> dict:
        """The JSON-ready summary ``cn3 evaluate`` prints last: task, data, metric, score (2 decimals),
        coverage, annotation and, with ``by``, the groups."""
        out = {"task": self.task, "data": self.data, "metric": self.metric, "score": round(self.score, 2),
               "coverage": self.coverage, "annotation": self.annotation}
        if self.by:
            out["by"] = {"field": self.by, "groups": [g.as_dict() for g in self.groups]}
        return out


@dataclass
class _Scored:
    """The data a run is scored on, encoded with its vocabularies, and what is said about it."""

    dataset: object
    data: str
    annotation: str
    truncated: int
    vectors_source: str
    records: list[dict] | None = None  # each item's fields, for grouping
    train: object | None = None  # the prepared train split, when it is already loaded


def evaluate_run(run: str | Path | RunDir, split: str = "dev", file: str | Path | None = None, *,
                 annotator: str | None = None, embeddings: str | Path | None = None, use_vectors: bool = True,
                 by: str | None = None, device: str | torch.device = "auto") -> Evaluation:
    """Score a trained sentence run: accuracy, span F1 (chunking, NER) or token accuracy (POS).

    Args:
        run: the run directory (from ``cn3 train``).
        split: the split of the run's prepared dataset to score (when ``file`` is None).
        file: score this file instead, in the task's format.
        annotator: with ``file``: where POS tags and trees come from (default: the run's annotator;
            a run trained on gold annotation reads the file's own, or spaCy's when it has none).
        embeddings: with ``file``: the run's word vectors file, when it has moved (checked by sha256).
        use_vectors: with ``file``: False reads every word outside the vocabulary as ``<unk>``.
        by: also score groups of items: a key of the items' meta, ``length`` or ``source``; groups
            whose value no training item has are marked unseen (not for ``source``).
        device: ``auto``, ``cpu``, ``cuda`` or a ``torch.device``.

    Returns:
        The :class:`Evaluation`.

    Raises:
        ArgumentError: ``annotator``, ``embeddings`` or ``use_vectors=False`` without ``file``; a split
            the prepared dataset lacks.
        ConfigError: no such device; the run's dataset is gone or another; vectors missing or changed;
            an unknown ``by`` field (before the model runs).
        RunError: the run directory cannot be used.
        DataError: a bad file, or a label the run does not know.
    """
    from cn3.metrics import score
    from cn3.sentence.grouped import group_keys
    from cn3.sentence.inference import gold_and_predictions, load_model
    from cn3.train.runtime import resolve_device
    from data_prep.coverage import coverage

    dev = resolve_device(device) if isinstance(device, str) else device
    loaded = load_model(run if isinstance(run, RunDir) else RunDir(run), dev)
    manifest = loaded.manifest
    if file is not None:
        scored = _file_data(loaded, Path(file), annotator, embeddings, use_vectors, grouped=bool(by))
    else:
        if annotator is not None or embeddings is not None or not use_vectors:
            raise ArgumentError("--annotator, --embeddings and --no-vectors apply to --file; a staged "
                                "split was annotated and given its vectors when it was prepared")
        scored = _split_data(loaded, split, grouped=bool(by))
    keys = group_keys(scored.records, by) if by else None  # an unknown field fails before the model runs
    level, tag_scheme = manifest["level"], manifest.get("tag_scheme")
    gold, pred = gold_and_predictions(loaded.model, scored.dataset, loaded.vocabs["labels"].itos, level, dev)
    evaluation = Evaluation(manifest["task"], scored.data, len(scored.dataset), score(level, tag_scheme, gold, pred),
                            coverage(scored.dataset, loaded.vocabs), scored.vectors_source, scored.annotation,
                            scored.truncated, manifest["settings"].get("max_len"), by)
    if by:
        evaluation.groups = scored_groups(loaded, by, keys, gold, pred, scored.train, evaluation.notes)
    return evaluation


def _file_data(loaded: LoadedModel, file: Path, annotator: str | None, embeddings, use_vectors: bool,
               grouped: bool) -> _Scored:
    """``file`` read in the task's format, annotated and encoded as the run's data was."""
    from cn3.sentence.grouped import example_record
    from cn3.sentence.inference import examples_dataset, read_task_file, run_vectors

    manifest = loaded.manifest
    embeddings = Path(embeddings) if embeddings is not None else None
    vectors, vectors_source = run_vectors(manifest, embeddings, use=use_vectors)
    examples = read_task_file(manifest, file)
    text = examples_dataset(examples, loaded.vocabs, manifest, with_labels=True, vectors=vectors,
                            annotator=annotator)
    # the encoded dataset keeps no meta: the examples (same order) carry it
    records = [example_record(ex) for ex in examples] if grouped else None
    return _Scored(text.dataset, str(file), text.annotation, text.truncated, vectors_source, records)


def _split_data(loaded: LoadedModel, split: str, grouped: bool) -> _Scored:
    """A split of the prepared dataset the run was trained on (annotated and given its vectors then)."""
    manifest = loaded.manifest
    prepared, ds = prepared_dataset(loaded, split)
    dataset = ds.splits[split]
    records = [dataset.record(i) for i in range(len(dataset))] if grouped else None
    vectors_source = (f"{manifest['embeddings']['path']} (looked up when the dataset was prepared)"
                      if manifest.get("embeddings") else "none recorded by the run")
    annotation = f"{manifest['annotator']['name']} (the prepared dataset's)"
    # sentences cut to max_len were counted by `cn3 prepare`
    return _Scored(dataset, f"{split} ({prepared})", annotation, 0, vectors_source, records, ds.splits.get("train"))


def prepared_dataset(loaded: LoadedModel, split: str):
    """The prepared dataset a run was trained on, which must have ``split``.

    Args:
        loaded: the run (:func:`cn3.sentence.inference.load_model`).
        split: the split asked for.

    Returns:
        ``(directory, dataset)``: :func:`run_prepared_dir` and its :func:`data_prep.dataset.load_prepared`.

    Raises:
        ArgumentError: the dataset has no ``split``.
        ConfigError, DataError: as :func:`run_prepared_dir` and ``load_prepared``.
    """
    from data_prep.dataset import load_prepared

    prepared = run_prepared_dir(loaded)
    ds = load_prepared(prepared)
    if split not in ds.splits:
        raise ArgumentError(f"{prepared} has no {split} split (it has: {', '.join(ds.splits)})")
    return prepared, ds


def run_prepared_dir(loaded: LoadedModel) -> Path:
    """The prepared dataset a run was trained on (from its config), checked against its fingerprint.

    Raises:
        ConfigError: the directory holds another dataset (or none): its vocabularies may differ.
    """
    from cn3.sentence.prepared import prepared_path
    from data_prep.prepare import read_manifest

    path = prepared_path(loaded.config)
    manifest = read_manifest(path)
    if manifest is None or manifest.get("fingerprint") != loaded.manifest.get("fingerprint"):
        raise ConfigError(f"{path} is not the dataset this run was trained on (vocabularies may differ); "
                          "score a file with --file instead")
    return path


def scored_groups(loaded: LoadedModel, field: str, keys: list, gold: list, pred: list, train=None,
                  notes: list[str] | None = None) -> list:
    """The scored groups of ``field``, marked against the run's training items as it trained on them
    (its ``data.limit`` applied).

    Args:
        loaded: the run.
        field: what the items are grouped by (``source`` groups are not marked: training and scored
            files differ by design).
        keys, gold, pred: each item's group key, gold and prediction.
        train: the prepared train split when already loaded (else read from the run's dataset).
        notes: where to say that groups could not be marked (the run's dataset is not here).

    Returns:
        :func:`cn3.sentence.grouped.grouped_scores`' groups.
    """
    from cn3.sentence.grouped import grouped_scores, seen_keys
    from data_prep.dataset import load_prepared

    seen = None
    if field != "source":
        try:
            train = train if train is not None else load_prepared(run_prepared_dir(loaded)).splits["train"]
        except (ConfigError, DataError) as err:  # a file without the run's dataset: score, mark nothing
            if notes is not None:
                notes.append(f"groups unseen in training are not marked: {err}")
        else:
            limit = loaded.config.data.limit
            train = train.spread(limit) if limit else train
            seen = seen_keys([train.record(i) for i in range(len(train))], field)
    level, tag_scheme = loaded.manifest["level"], loaded.manifest.get("tag_scheme")
    return grouped_scores(keys, gold, pred, level, tag_scheme, field, seen)
