"""From PyG graphs to padded dense tensors, and length-bucketed batch orders.

Sentences are PyG ``Data`` (or ``PairData``) objects (see :mod:`data_prep.store`). A batch is
collated with ``Batch.from_data_list`` and densified with ``to_dense_batch`` (node attributes) and
``to_dense_adj`` (the edge-type matrix ``e_ik``), which is what CN3 needs: it scores every pair.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor
from torch_geometric.data import Batch, Data
from torch_geometric.utils import to_dense_adj, to_dense_batch

NODE_ATTRS = ("word", "lower", "chars", "spell", "upos")


@dataclass
class SideBatch:
    """One sentence per row, padded to the longest. ``mask`` is True on real words.

    Shapes: ``word``, ``lower``, ``upos``: ``(B, N)``; ``chars``: ``(B, N, C)``; ``spell``: ``(B, N, F)``;
    ``mask``: ``(B, N)``; ``edge_type``: ``(B, N, N)`` (0 = no arc) or ``None`` without trees.
    """

    word: Tensor
    lower: Tensor
    chars: Tensor
    spell: Tensor
    mask: Tensor
    upos: Tensor | None = None
    edge_type: Tensor | None = None

    @property
    def lengths(self) -> Tensor:
        return self.mask.sum(1)

    def to(self, device) -> SideBatch:
        return SideBatch(**{f.name: (v.to(device, non_blocking=True) if v is not None else None)
                            for f in fields(self) for v in [getattr(self, f.name)]})


@dataclass
class GraphBatch:
    """A batch of items: ``a`` (and ``b`` for pairs), labels ``y`` (``(B,)`` class ids or ``(B, N)``
    tag ids, 0 under padding) and ``index`` ``(B,)``, the items' positions in their dataset."""

    a: SideBatch
    b: SideBatch | None
    y: Tensor
    index: Tensor

    def to(self, device) -> GraphBatch:
        return GraphBatch(self.a.to(device), self.b.to(device) if self.b is not None else None,
                          self.y.to(device), self.index)

    def __len__(self) -> int:
        return self.y.shape[0]


def _side(batch: Batch, suffix: str, vector: Tensor) -> tuple[SideBatch, Tensor]:
    """Densify one side. ``vector`` maps each node to its item in the batch."""
    size = int(vector.max()) + 1 if vector.numel() else 0
    dense = {}
    mask = None
    for name in NODE_ATTRS:
        value = getattr(batch, name + suffix, None)
        if value is None:
            continue
        dense[name], mask = to_dense_batch(value, vector, batch_size=size)
    edge_index = getattr(batch, "edge_index" + suffix, None)
    if edge_index is not None:
        dense["edge_type"] = to_dense_adj(edge_index, vector, edge_attr=getattr(batch, "edge_type" + suffix),
                                          max_num_nodes=mask.shape[1], batch_size=size)
    return SideBatch(mask=mask, **dense), mask


def collate(items: list[Data], indices: list[int] | None = None, tagging: bool = False) -> GraphBatch:
    """Collate any list of ``Data`` (or ``PairData``) graphs into a :class:`GraphBatch`.

    The general PyG path (``Batch.from_data_list`` + ``to_dense_batch``/``to_dense_adj``), for
    graphs built outside a prepared store; it is also the reference :func:`make_batch` is tested
    against. ``tagging``: ``y`` holds one label per node (densified to ``(B, N)``), else one per item.
    """
    index = torch.tensor(indices if indices is not None else range(len(items)), dtype=torch.long)
    if hasattr(items[0], "word_a"):
        batch = Batch.from_data_list(items, follow_batch=["word_a", "word_b"])
        a, _ = _side(batch, "_a", batch.word_a_batch)
        b, _ = _side(batch, "_b", batch.word_b_batch)
        return GraphBatch(a, b, batch.y, index)
    batch = Batch.from_data_list(items)
    a, mask = _side(batch, "", batch.batch)
    y = batch.y
    if tagging:
        y, _ = to_dense_batch(y, batch.batch, fill_value=0, max_num_nodes=mask.shape[1])
    return GraphBatch(a, None, y, index)


def _dense_side(t: dict, side: str, index: Tensor) -> tuple[SideBatch, Tensor, Tensor]:
    """One side of the items ``index`` straight from the columnar store, densified with PyG.

    Same result as building each item's ``Data`` and collating (``collate``), without the per-item
    objects: the nodes of all items are gathered with one index, ``to_dense_batch`` pads them and
    ``to_dense_adj`` rebuilds ``e_ik``. Returns the side, its node-to-item vector and node positions.
    """
    ptr = t[f"{side}.ptr"]
    starts, lengths = ptr[index], ptr[index + 1] - ptr[index]  # (B,)
    size, n_max = index.numel(), int(lengths.max())
    item = torch.repeat_interleave(torch.arange(size), lengths)  # (Ntot,) node -> item
    first = torch.cumsum(lengths, 0) - lengths  # (B,) offset of each item in the flat node list
    local = torch.arange(int(lengths.sum())) - first[item]  # (Ntot,) position inside the sentence
    rows = starts[item] + local  # (Ntot,) rows of the store
    types = t[f"{side}.type"][rows].long()
    dense = {}
    for name, values in (("word", t["types.word"][types]), ("lower", t["types.lower"][types]),
                         ("chars", t["types.chars"][types]), ("spell", t["types.spell"][types].float())):
        dense[name], mask = to_dense_batch(values if name == "spell" else values.long(), item, batch_size=size,
                                           max_num_nodes=n_max)
    if f"{side}.upos" in t:
        dense["upos"], _ = to_dense_batch(t[f"{side}.upos"][rows].long(), item, batch_size=size, max_num_nodes=n_max)
    if f"{side}.head" in t:
        head = t[f"{side}.head"][rows].long()
        deprel = t[f"{side}.deprel"][rows].long()
        node = torch.arange(local.numel())
        is_root = head < 0
        target = torch.where(is_root, node, first[item] + head)  # global index of each head (root: itself)
        down = ~is_root
        edge_index = torch.cat([torch.stack([node, target]), torch.stack([target[down], node[down]])], 1)
        edge_type = torch.cat([1 + 2 * deprel, 2 + 2 * deprel[down]])  # see data_prep.graphs
        dense["edge_type"] = to_dense_adj(edge_index, item, edge_attr=edge_type, max_num_nodes=n_max,
                                          batch_size=size)
    return SideBatch(mask=mask, **dense), item, rows


def make_batch(dataset, indices: list[int]) -> GraphBatch:
    """The items ``indices`` of a :class:`data_prep.store.GraphDataset` as one batch.

    Equals ``collate([dataset[i] for i in indices], indices, tagging=...)`` (tested), several times
    faster: the training loop's hot path.
    """
    t = dataset.t
    index = torch.as_tensor(indices, dtype=torch.long)
    a, item, rows = _dense_side(t, "a", index)
    b = _dense_side(t, "b", index)[0] if "b.ptr" in t else None
    if "a.tag" in t:
        y, _ = to_dense_batch(t["a.tag"][rows].long(), item, batch_size=index.numel(),
                              max_num_nodes=a.mask.shape[1])
    else:
        y = t["y"][index]
    return GraphBatch(a, b, y, index)


def item_lengths(dataset) -> list[int]:
    """Longest side of each item, read from the store's offsets (no graphs are built)."""
    t = dataset.t
    lengths = (t["a.ptr"][1:] - t["a.ptr"][:-1])
    if "b.ptr" in t:
        lengths = torch.maximum(lengths, t["b.ptr"][1:] - t["b.ptr"][:-1])
    return lengths.tolist()


def bucketed_batches(lengths: list[int], batch_size: int, shuffle: bool, seed: int = 0,
                     max_tokens: int | None = None, pool: int = 50) -> list[list[int]]:
    """Batches of item indices grouping similar lengths (less padding, faster dense layers).

    Items are shuffled (with ``seed``), cut into pools of ``pool * batch_size``, sorted by length
    inside a pool and split into batches; the batch order is shuffled again. The result depends only
    on ``(lengths, batch_size, shuffle, seed)``, which is what exact resume relies on. ``max_tokens``
    additionally caps ``batch rows * longest item`` (long documents get smaller batches).
    """
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(lengths), generator=generator).tolist() if shuffle else list(range(len(lengths)))
    batches: list[list[int]] = []
    step = pool * batch_size
    for start in range(0, len(order), step):
        chunk = sorted(order[start : start + step], key=lambda i: lengths[i])
        current: list[int] = []
        for i in chunk:
            longest = lengths[i]  # the chunk is sorted, so the newest item is the longest
            if current and (len(current) >= batch_size or (max_tokens and longest * (len(current) + 1) > max_tokens)):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
    if shuffle:
        perm = torch.randperm(len(batches), generator=generator).tolist()
        batches = [batches[i] for i in perm]
    return batches
