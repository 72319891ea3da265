"""The shape of one task in the registry (``data_prep.tasks.TASKS``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from data_prep.example import Example
from data_prep.tokenize import tokenize

Level = Literal["node", "graph", "pair"]
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class TaskOptions:
    """Reader options a user can set (``cn3 prepare --fold/--fine/--tag-scheme/--train ...``).

    Args:
        fold: which of ``n_folds`` folds is the test split, for tasks without an official split.
        n_folds: number of cross-validation folds.
        seed: seed of the deterministic fold assignment and of held-out dev splits.
        fine: TREC only: the 50 fine classes instead of the 6 coarse ones.
        tag_scheme: ``"BIOES"`` or ``"IOB2"``: the scheme chunk/NER tags are converted to.
        files: the generic ``custom`` task only: split name -> file.
        format: ``custom`` only: ``tsv``, ``jsonl`` or ``conll``.
        columns: ``custom`` CoNLL files only: comma-separated column names, e.g. ``word,pos,_,tag``.
    """

    fold: int = 0
    n_folds: int = 10
    seed: int = 13
    fine: bool = False
    tag_scheme: str = "BIOES"
    files: dict[str, Path] = field(default_factory=dict)
    format: str | None = None
    columns: str | None = None

    def as_dict(self) -> dict:
        return {
            "fold": self.fold,
            "n_folds": self.n_folds,
            "seed": self.seed,
            "fine": self.fine,
            "tag_scheme": self.tag_scheme,
            "files": {k: str(v) for k, v in sorted(self.files.items())},
            "format": self.format,
            "columns": self.columns,
        }


@dataclass(frozen=True)
class TaskSpec:
    """One task: how to read it and what it is.

    Args:
        name: registry key (``snli``, ``trec`` ...).
        level: ``node`` (tagging), ``graph`` (one sentence -> class) or ``pair`` (two sentences -> class).
        description: one line for ``cn3 tasks`` and the summary.
        files: the files read, relative to the data root (hashed into the manifest); ``custom``:
            ``TaskOptions.files``.
        load: ``load(data_root, options) -> {"train": [...], "dev": [...], "test": [...]}`` (a split may
            be missing); raises ``DataError`` on bad input.
        labels: the fixed label (or tag) inventory; ``None`` = from train.
        gold: which annotations the files carry: a subset of ``{"pos", "deps"}``.
        label_is_pos: the labels are POS tags, so POS is never an input attribute (it would leak).
        tag_scheme: node level chunk/NER tasks: the scheme of the tags in ``Example``.
        max_len: default truncation in tokens; ``None`` = no limit.
        cv: no official split: ``options.fold`` selects the test fold.
        notes: caveats shown in the summary.
        config: the stem of the tuned run config in ``cn3/configs`` (``None`` = the task's name).
        annotator: the default annotator where the generic rule does not fit; ``None`` = the rule.
        read_file: ``read_file(path, options) -> examples``: one file in the task's format
            (``cn3 evaluate --file``, held-out test sets); ``None`` when the task has none (labels from file
            names, as MR, SUBJ, CR, MPQA, or two files, as the PTB sample).
        span_types: a span tagging task's span types (NER's PER, LOC, ...); they fix its tag inventory in
            every scheme (``options.tag_scheme``), whatever train holds. Empty: not a span task.
        tokenize_text: ``tokenize_text(raw) -> tokens``: raw text split as the task's files are.
        text_heads: ``text_heads(raw) -> heads`` (1-based, 0 = root), for a task whose raw text carries
            its own tree (the logic formulas' brackets); raises ``ValueError``.
        reader_version: raised when the reader changes what it makes of the same files, so datasets
            prepared by the older reader are prepared again.
    """

    name: str
    level: Level
    description: str
    files: tuple[str, ...]
    load: Callable[[Path, TaskOptions], dict[str, list[Example]]]
    labels: tuple[str, ...] | None = None
    gold: frozenset[str] = frozenset()
    label_is_pos: bool = False
    tag_scheme: str | None = None
    max_len: int | None = None
    cv: bool = False
    notes: str = ""
    annotator: str | None = None
    config: str | None = None
    read_file: Callable[[Path, TaskOptions], list[Example]] | None = None
    span_types: tuple[str, ...] = ()
    tokenize_text: Callable[[str], list[str]] = tokenize
    text_heads: Callable[[str], list[int]] | None = None
    reader_version: int = 1
