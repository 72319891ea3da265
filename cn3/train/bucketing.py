"""Length-bucketed batch orders, for every task (sentences by rows, translation by tokens), and the
loader that collates them.

A leaf module (no torch_geometric), so the translation side imports it without the graph stack.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.data import DataLoader, Dataset


def epoch_seed(seed: int, epoch: int) -> int:
    """The seed of an epoch's batch order, for every kind of run: exact resume replays an epoch's
    order from it, so there is one formula (a prime stride keeps seeds' epochs apart)."""
    return seed * 100_003 + epoch


def bucketed_batches(lengths: list[int], batch_size: int, shuffle: bool, seed: int = 0,
                     max_tokens: int | None = None, pool: int = 50) -> list[list[int]]:
    """Batches of item indices grouping similar lengths (less padding).

    Items are shuffled (``seed``), cut into pools of ``pool * batch_size``, sorted by length inside a
    pool (stable) and split into batches, whose order is shuffled again. A pure function of the
    arguments, which exact resume relies on.

    Args:
        lengths: each item's length (its longest side).
        batch_size: most rows per batch (0 = no limit: ``max_tokens`` alone cuts).
        shuffle: ``False`` gives the sorted order used for evaluation.
        max_tokens: cap on ``batch rows * longest item``.
        pool: see above; 0 (or ``batch_size`` 0): one pool, the whole data sorted.
    """
    if not batch_size and not max_tokens:
        raise ValueError("bucketed_batches needs batch_size or max_tokens")
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(lengths), generator=generator).tolist() if shuffle else list(range(len(lengths)))
    batches: list[list[int]] = []
    step = pool * batch_size if pool and batch_size else max(len(order), 1)
    for start in range(0, len(order), step):
        chunk = sorted(order[start : start + step], key=lambda i: lengths[i])
        current: list[int] = []
        for i in chunk:
            longest = lengths[i]  # the chunk is sorted, so the newest item is the longest
            full = batch_size and len(current) >= batch_size
            if current and (full or (max_tokens and longest * (len(current) + 1) > max_tokens)):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
    if shuffle:
        perm = torch.randperm(len(batches), generator=generator).tolist()
        batches = [batches[i] for i in perm]
    return batches


class _Indices(Dataset):
    """A dataset whose items are their own indices: the loader hands each batch's index list to
    ``collate`` whole (``__getitems__``), which gathers the batch from the store at once."""

    def __getitems__(self, indices: list[int]) -> list[int]:
        return indices


def batch_loader(collate: Callable[[list[int]], object], batches: list[list[int]], workers: int = 0,
                 pin_memory: bool = False) -> DataLoader:
    """The batches ``collate(indices)`` builds on the host, in the order of ``batches``.

    ``workers > 0``: worker processes collate the next batches during training; ``pin_memory`` (CUDA):
    page-locked batches, so ``.to(device, non_blocking=True)`` overlaps compute. The loader's own
    generator seeds its workers, so the global RNG streams that exact resume restores are not drawn
    from; ``collate`` must draw from none either.
    """
    return DataLoader(_Indices(), batch_sampler=batches, collate_fn=collate, num_workers=workers,
                      pin_memory=pin_memory, generator=torch.Generator())
