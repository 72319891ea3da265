"""Deterministic, seeded split rules for data sets without an official dev/test split.

* :func:`assign_folds`: a seeded permutation of the items dealt round-robin into ``n_folds`` folds;
  it depends only on the number of items, ``n_folds`` and ``seed`` (never on the selected fold).
* :func:`cv_split`: test = the selected fold; dev = a seeded 10% of the other folds; train = the rest.
* :func:`hold_out`: a seeded ``fraction`` of a train set as dev (TREC, IMDB, logic).

Items keep their file order inside every split.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

from cn3.util.errors import DataError
from data_prep.example import Example
from data_prep.taskspec import TaskOptions

T = TypeVar("T")
DEV_FRACTION = 0.1


def assign_folds(n_items: int, n_folds: int, seed: int) -> list[int]:
    """The fold (0 .. n_folds-1) of each of ``n_items`` items; fold sizes differ by at most one."""
    if n_folds < 2:
        raise DataError(f"n_folds must be at least 2, got {n_folds}")
    order = list(range(n_items))
    random.Random(seed).shuffle(order)
    folds = [0] * n_items
    for position, item in enumerate(order):
        folds[item] = position % n_folds
    return folds


def _dev_indices(n_items: int, fraction: float, rng_seed: str) -> set[int]:
    n_dev = round(n_items * fraction)
    if n_items >= 2:
        n_dev = min(max(n_dev, 1), n_items - 1)
    else:
        n_dev = 0
    order = list(range(n_items))
    random.Random(rng_seed).shuffle(order)
    return set(order[:n_dev])


def hold_out(items: Sequence[T], seed: int, fraction: float = DEV_FRACTION) -> tuple[list[T], list[T]]:
    """``(train, dev)``: a seeded ``fraction`` of ``items`` (at least one when there are two or more) as dev."""
    dev = _dev_indices(len(items), fraction, f"{seed}:dev")
    train_part = [x for i, x in enumerate(items) if i not in dev]
    dev_part = [x for i, x in enumerate(items) if i in dev]
    return train_part, dev_part


def check_fold(options: TaskOptions) -> None:
    if options.n_folds < 2:
        raise DataError(f"--n-folds must be at least 2, got {options.n_folds}")
    if not 0 <= options.fold < options.n_folds:
        raise DataError(f"--fold must be in [0, {options.n_folds}), got {options.fold}")


def cv_split(items: Sequence[Example], options: TaskOptions) -> dict[str, list[Example]]:
    """Train/dev/test of a cross-validation data set; sets ``meta["fold"]`` on every example."""
    check_fold(options)
    folds = assign_folds(len(items), options.n_folds, options.seed)
    rest: list[Example] = []
    test: list[Example] = []
    for example, fold in zip(items, folds):
        example.meta["fold"] = fold
        (test if fold == options.fold else rest).append(example)
    dev_idx = _dev_indices(len(rest), DEV_FRACTION, f"{options.seed}:dev:{options.fold}")
    train = [x for i, x in enumerate(rest) if i not in dev_idx]
    dev = [x for i, x in enumerate(rest) if i in dev_idx]
    return {"train": train, "dev": dev, "test": test}
