"""Balanced classes and seeded train/dev/test splits, shared by every probing task.

Following Conneau et al. where the small treebanks allow it: every class downsampled to the smallest
one (:func:`balance`), seeded; train/dev/test of about 80/10/10 (:data:`SPLIT_FRACTIONS`), stratified
by class so every split stays balanced (:func:`stratified_split`); or, for the tasks whose label is
read off one target word, split by that word's form (:func:`lexical_split`).
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

from data_prep.example import Example
from data_prep.taskspec import SPLITS

SPLIT_FRACTIONS = (0.8, 0.1, 0.1)  # train, dev, test


def balance(examples: Sequence[Example], rng: random.Random,
            key: Callable[[Example], object] = lambda ex: ex.label) -> list[Example]:
    """Every class (``key``) downsampled to the size of the smallest, at random; input order kept."""
    groups: dict = defaultdict(list)
    for i, ex in enumerate(examples):
        groups[key(ex)].append(i)
    if not groups:
        return []
    n = min(len(idx) for idx in groups.values())
    keep = {i for k in sorted(groups, key=str) for i in rng.sample(groups[k], n)}
    return [ex for i, ex in enumerate(examples) if i in keep]


def split_cuts(n: int) -> tuple[int, int]:
    """Where ``n`` items are cut into train, dev and test (:data:`SPLIT_FRACTIONS`)."""
    train, dev, _ = SPLIT_FRACTIONS
    return round(n * train), round(n * (train + dev))


def stratified_split(examples: Sequence[Example], rng: random.Random,
                     key: Callable[[Example], object] = lambda ex: ex.label) -> dict[str, list[Example]]:
    """Train/dev/test of about 80/10/10 within each class (``key``): balanced classes stay balanced in
    every split. Each split comes out shuffled (as SentEval's files)."""
    groups: dict = defaultdict(list)
    for ex in examples:
        groups[key(ex)].append(ex)
    out: dict[str, list[Example]] = {split: [] for split in SPLITS}
    for k in sorted(groups, key=str):
        items = groups[k][:]
        rng.shuffle(items)
        a, b = split_cuts(len(items))
        out["train"] += items[:a]
        out["dev"] += items[a:b]
        out["test"] += items[b:]
    for items in out.values():
        rng.shuffle(items)
    return out


def balanced_split(examples: Sequence[Example], seed: int, task: str) -> dict[str, list[Example]]:
    """:func:`balance`, then :func:`stratified_split`, seeded by ``seed`` and the task name."""
    rng = random.Random(f"{seed}:{task}")
    return stratified_split(balance(examples, rng), rng)


def lexical_split(examples: Sequence[Example], seed: int, task: str) -> dict[str, list[Example]]:
    """Split so that every target form (``meta["target"]``) occurs in one split only, then balance each
    split (Conneau et al.). Forms are placed from the most frequent down (ties seeded), each into the
    split with the most room left for its class, so dev and test get many rarer forms rather than one
    or two frequent ones.
    """
    rng = random.Random(f"{seed}:{task}")
    by_form: dict[str, list[Example]] = defaultdict(list)
    for ex in examples:
        by_form[ex.meta["target"]].append(ex)
    forms = sorted(by_form)
    rng.shuffle(forms)
    forms.sort(key=lambda f: -len(by_form[f]))  # stable: equal counts keep the seeded order
    totals = Counter(ex.label for ex in examples)
    room = {split: {label: share * n for label, n in totals.items()} for split, share in zip(SPLITS, SPLIT_FRACTIONS)}
    parts: dict[str, list[Example]] = {split: [] for split in SPLITS}
    for form in forms:
        items = by_form[form]
        label = Counter(ex.label for ex in items).most_common(1)[0][0]
        split = max(SPLITS, key=lambda s: room[s][label])  # ties: the first (train)
        for ex in items:
            room[split][ex.label] -= 1
        parts[split] += items
    out = {}
    for split, items in parts.items():
        kept = balance(items, rng)
        rng.shuffle(kept)
        out[split] = kept
    return out
