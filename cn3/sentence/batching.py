"""From a prepared store to padded dense tensors (batch orders: :mod:`cn3.train.bucketing`).

A batch is gathered straight from the columnar store (see :mod:`data_prep.store`) and densified
with PyG's ``to_dense_batch`` (node attributes) and ``to_dense_adj`` (the edge-type matrix
``e_ik``), which is what CN3 needs: it scores every pair. :class:`DeviceBatches` pads a whole
split once, on the training device, and gathers the same batches there.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor
from torch_geometric.utils import to_dense_adj, to_dense_batch


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
        return self._map(lambda v: v.to(device, non_blocking=True))

    def pin_memory(self) -> SideBatch:
        """In page-locked memory (the batch loader's ``pin_memory``), for asynchronous copies to CUDA."""
        return self._map(Tensor.pin_memory)

    def _map(self, fn) -> SideBatch:
        return SideBatch(**{f.name: (fn(v) if v is not None else None)
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
        """On ``device`` (``index`` stays on the host): copies that do not wait for the device, and
        overlap its work when the batch is pinned."""
        return GraphBatch(self.a.to(device), self.b.to(device) if self.b is not None else None,
                          self.y.to(device, non_blocking=True), self.index)

    def pin_memory(self) -> GraphBatch:
        """In page-locked memory, but ``index``, which never leaves the host."""
        return GraphBatch(self.a.pin_memory(), self.b.pin_memory() if self.b is not None else None,
                          self.y.pin_memory(), self.index)

    def __len__(self) -> int:
        return self.y.shape[0]

    def width(self) -> int:
        """The longest side's positions (a shape: read without touching the device)."""
        return max(self.a.mask.shape[1], self.b.mask.shape[1] if self.b is not None else 0)

    def padded_to(self, width: int) -> GraphBatch:
        """Every side (and tag labels) padded with padding positions up to ``width`` (``>=`` :meth:`width`):
        masked like any padding, so no score changes; on the batch's device, without waiting for it."""
        def side(s: SideBatch | None) -> SideBatch | None:
            return None if s is None else SideBatch(**{f.name: (_pad(f.name, v, width) if v is not None else None)
                                                       for f in fields(s) for v in [getattr(s, f.name)]})
        return GraphBatch(side(self.a), side(self.b), _pad("y", self.y, width) if self.y.dim() == 2 else self.y,
                          self.index)


def _dense_side(t: dict, side: str, index: Tensor) -> tuple[SideBatch, Tensor, Tensor]:
    """One side of the items ``index`` gathered straight from the columnar store and densified with
    PyG's ``to_dense_batch``/``to_dense_adj``, without per-item ``Data`` objects. Returns the side, its
    node-to-item vector and node positions.
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
    """The items ``indices`` of a :class:`data_prep.store.GraphDataset` as one batch: equal to collating
    their PyG ``Data`` with ``Batch.from_data_list`` and densifying (tested).
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


class DeviceBatches:
    """A split padded once into tensors on ``device``, from which a batch is a few gathers there
    (``train.device_batches``): the same :class:`GraphBatch` as :func:`make_batch`, value for value.

    Each side is padded to the split's longest item; a batch takes its rows and its longest length's
    positions (read from the store's offsets on the host, so nothing waits for the device). ``index``
    stays on the host.
    """

    def __init__(self, dataset, device: torch.device, chunk: int = 4096):
        t = dataset.t
        self.lengths = {side: t[f"{side}.ptr"][1:] - t[f"{side}.ptr"][:-1] for side in ("a", "b") if f"{side}.ptr" in t}
        self.device = device
        n = len(self.lengths["a"])
        parts = [make_batch(dataset, list(range(i, min(i + chunk, n)))) for i in range(0, n, chunk)]
        widths = {side: int(lengths.max()) for side, lengths in self.lengths.items()}
        self.a = _stack_sides([p.a for p in parts], widths["a"], device)
        self.b = _stack_sides([p.b for p in parts], widths["b"], device) if "b" in widths else None
        for side in (self.a, self.b):
            if side is not None and side.edge_type is not None and int(side.edge_type.max()) < 256:
                side.edge_type = side.edge_type.to(torch.uint8)  # (items, N, N), the bulk, in a byte per pair
        tagged = parts[0].y.dim() == 2
        self.y = torch.cat([_pad("y", p.y, widths["a"]) if tagged else p.y for p in parts]).to(device)

    def tensors(self) -> list[Tensor]:
        """Every tensor the split is kept in."""
        sides = [self.a] + ([self.b] if self.b is not None else [])
        return [v for s in sides for f in fields(s) if (v := getattr(s, f.name)) is not None] + [self.y]

    def __call__(self, indices: list[int]) -> GraphBatch:
        index = torch.as_tensor(indices, dtype=torch.long)
        rows = index.to(self.device, non_blocking=True)
        width = {side: int(lengths[index].max()) for side, lengths in self.lengths.items()}
        a = _take(self.a, rows, width["a"])
        b = _take(self.b, rows, width["b"]) if self.b is not None else None
        y = (self.y[:, : width["a"]] if self.y.dim() == 2 else self.y).index_select(0, rows)
        return GraphBatch(a, b, y, index)

    @staticmethod
    def nbytes(dataset) -> int:
        """What the split takes on the device, estimated from the store before anything is built."""
        t = dataset.t
        chars, spell = t["types.chars"].shape[1], t["types.spell"].shape[1]
        total = 0
        for side in ("a", "b"):
            if f"{side}.ptr" in t:
                ptr = t[f"{side}.ptr"]
                items, width = len(ptr) - 1, int((ptr[1:] - ptr[:-1]).max())
                # long ids, float spell, bool mask, a byte per edge type
                per_token = 8 * (3 + chars) + 4 * spell + 1 + (f"{side}.head" in t) * width
                total += items * width * per_token
        return total


def _pad(name: str, v: Tensor, width: int) -> Tensor:
    """``v`` zero-padded (False for the mask) to ``width`` positions: along dim 1, and for
    ``edge_type`` (``(B, N, N)``) along dim 2 as well."""
    if name == "edge_type":
        return torch.nn.functional.pad(v, [0, width - v.shape[2], 0, width - v.shape[1]])
    return torch.nn.functional.pad(v, [0, 0] * (v.dim() - 2) + [0, width - v.shape[1]])


def _stack_sides(parts: list[SideBatch], width: int, device) -> SideBatch:
    """The sides of consecutive chunks as one, padded to ``width`` positions, on ``device``."""
    return SideBatch(**{f.name: torch.cat([_pad(f.name, getattr(p, f.name), width) for p in parts]).to(device)
                        if getattr(parts[0], f.name) is not None else None for f in fields(SideBatch)})


def _take(side: SideBatch, rows: Tensor, width: int) -> SideBatch:
    """The rows ``rows`` (on the device) of a padded side, cut to its first ``width`` positions."""

    def take(name: str, v: Tensor) -> Tensor:
        if name == "edge_type":
            return v[:, :width, :width].index_select(0, rows).long()
        return v[:, :width].index_select(0, rows)

    return SideBatch(**{f.name: (take(f.name, v) if v is not None else None)
                        for f in fields(side) for v in [getattr(side, f.name)]})
