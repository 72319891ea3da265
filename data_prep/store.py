"""Columnar storage of a prepared split, and the PyG dataset that reads it back.

Per token: an index into a per-split *type table* (each distinct word string once, with its text,
word/lower-case ids, characters and spelling features), plus POS, head, relation and tag. WHY: a
10M-token corpus stays small and ``prepare`` builds no ``Data`` per sentence. A plain dict of
tensors, readable with ``torch.load(weights_only=True)``.

Keys (``s`` is the side: ``a``, and ``b`` for pair tasks):
  ``types.text`` (T strings), ``types.word (T,)``, ``types.lower (T,)``, ``types.chars (T, C)``,
  ``types.spell (T, F)``; with word vectors ``open.vectors (K, D)`` (:func:`open_vocabulary`);
  ``{s}.ptr (S+1,)`` node offsets; ``{s}.type (Ntot,)``; optional ``{s}.upos``, ``{s}.head`` (0-based,
  -1 = root), ``{s}.deprel``, ``{s}.tag``; ``y (S,)`` for graph/pair tasks.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset
from torch_geometric.data import Data

from data_prep.example import Example
from data_prep.graphs import PairData, edge_types_from_heads
from data_prep.spelling import spell_features
from data_prep.vocab import UNK_ID, Vocab


def open_vocabulary(words: list[str], ids: list[int], vocab: Vocab, vectors) -> tuple[list[int], torch.Tensor]:
    """Give the words outside ``vocab`` that have a pretrained vector an id of their own.

    ``ids`` are the lower-cased ``words``' ids in ``vocab`` (``<unk>`` when absent). Each distinct absent
    lower-cased word with a vector gets ``len(vocab) + j`` (``j`` in sorted order), row ``j`` of the
    returned ``(K, D)`` tensor being its vector. A model adds these rows after its trained table at
    inference (``NodeEncoder.open_vocabulary``): the same as if the word had been in the vocabulary
    with its pretrained row and never updated.
    """
    key_to_index = vectors.key_to_index
    new = sorted({w.lower() for w, i in zip(words, ids) if i == UNK_ID and w.lower() not in vocab
                  and w.lower() in key_to_index})
    extra = {w: len(vocab) + j for j, w in enumerate(new)}
    ids = [extra.get(w.lower(), i) if i == UNK_ID else i for w, i in zip(words, ids)]
    rows = np.stack([vectors.vectors[key_to_index[w]] for w in new]) if new else \
        np.zeros((0, vectors.vector_size), dtype=np.float32)
    return ids, torch.from_numpy(np.asarray(rows, dtype=np.float32))


def encode_split(examples: list[Example], level: str, vocabs: dict[str, Vocab], char_len: int,
                 use_pos: bool, use_deps: bool, vectors=None) -> dict[str, torch.Tensor]:
    """Turn examples into the columnar tensors described in the module docstring.

    Labels and tags must already be valid for ``vocabs["labels"]`` (checked by the caller, which
    knows file and line). ``vectors`` (gensim ``KeyedVectors``, the run's embeddings): words outside
    the lower-cased vocabulary that have a vector keep it (:func:`open_vocabulary`).
    """
    n_sides = len(examples[0].sentences) if examples else (2 if level == "pair" else 1)
    type_index: dict[str, int] = {}
    out: dict[str, torch.Tensor] = {}
    for side_i, side in enumerate(("a", "b")[:n_sides]):
        ptr, tok_type, upos, head, deprel, tag = [0], [], [], [], [], []
        for ex in examples:
            sent = ex.sentences[side_i]
            for tok in sent.tokens:
                t = type_index.get(tok)
                if t is None:
                    t = type_index[tok] = len(type_index)
                tok_type.append(t)
            ptr.append(ptr[-1] + len(sent.tokens))
            if use_pos:
                upos.extend(vocabs["upos"].ids(sent.upos))
            if use_deps:
                head.extend(h - 1 for h in sent.heads)
                deprel.extend(vocabs["rel"].ids(sent.deprels if sent.deprels is not None else ["_"] * len(sent)))
            if level == "node":
                tag.extend(vocabs["labels"].ids(sent.tags))
        out[f"{side}.ptr"] = torch.tensor(ptr, dtype=torch.long)
        out[f"{side}.type"] = torch.tensor(tok_type, dtype=torch.int32)
        if use_pos:
            out[f"{side}.upos"] = torch.tensor(upos, dtype=torch.uint8)
        if use_deps:
            out[f"{side}.head"] = torch.tensor(head, dtype=torch.int32)
            out[f"{side}.deprel"] = torch.tensor(deprel, dtype=torch.uint8)
        if level == "node":
            out[f"{side}.tag"] = torch.tensor(tag, dtype=torch.int16)
    if level != "node":
        out["y"] = torch.tensor(vocabs["labels"].ids(ex.label for ex in examples), dtype=torch.long)

    words = list(type_index)
    chars = torch.zeros(len(words), char_len, dtype=torch.int16)
    char_vocab = vocabs["chars"]
    for t, w in enumerate(words):
        ids = char_vocab.ids(w[:char_len])
        if ids:
            chars[t, : len(ids)] = torch.tensor(ids, dtype=torch.int16)
    lower_ids = vocabs["lower"].ids(w.lower() for w in words)
    if vectors is not None:
        lower_ids, out["open.vectors"] = open_vocabulary(words, lower_ids, vocabs["lower"], vectors)
    out["types.text"] = words
    out["types.word"] = torch.tensor(vocabs["word"].ids(words), dtype=torch.int32)
    out["types.lower"] = torch.tensor(lower_ids, dtype=torch.int32)
    out["types.chars"] = chars
    out["types.spell"] = torch.tensor([spell_features(w) for w in words], dtype=torch.uint8).reshape(len(words), -1)
    return out


def write_sidecar(path: Path, examples: list[Example]) -> None:
    """Tokens, label and provenance of each item, one JSON object per line (for predict/visualize)."""
    with open(path, "w", encoding="utf-8") as handle:
        for ex in examples:
            record = {"tokens": [s.tokens for s in ex.sentences], "label": ex.label,
                      "source": ex.source, "line": ex.line}
            if ex.sentences[0].tags is not None:
                record["tags"] = [s.tags for s in ex.sentences]
            if ex.meta:
                record["meta"] = ex.meta
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


class GraphDataset(Dataset):
    """One prepared split as PyG graphs: item ``i`` is a ``Data`` (one sentence) or ``PairData``.

    Node attributes: ``word``, ``lower`` ``(N,)``; ``chars (N, C)``; ``spell (N, F)`` float;
    ``position (N,)``; ``upos (N,)`` when POS was annotated; ``edge_index (2, E)``, ``edge_type (E,)``,
    ``head (N,)`` (0-based within the sentence, -1 = root) and ``deprel (N,)`` when trees exist;
    ``y``: ``(1,)`` class id, or ``(N,)`` tag ids for tagging. Pair items carry the same with
    ``_a``/``_b`` suffixes and one ``y``.
    """

    def __init__(self, tensors: dict[str, torch.Tensor], level: str, sidecar: Path | None = None,
                 index: torch.Tensor | None = None):
        self.t = tensors
        self.level = level
        self.sides = ("a", "b") if "b.ptr" in tensors else ("a",)
        self.sidecar = sidecar
        self.index = index  # item i is line index[i] of the sidecar (None: line i)
        self._records: list[dict] | None = None

    def __len__(self) -> int:
        return self.t["a.ptr"].numel() - 1

    @property
    def open_vectors(self) -> torch.Tensor | None:
        """``(K, D)`` pretrained vectors of the words outside the vocabulary (ids ``len(vocab) + j``),
        or ``None`` when the data has no word vectors."""
        return self.t.get("open.vectors")

    def subset(self, indices: torch.Tensor | list[int]) -> GraphDataset:
        """Items ``indices`` (in that order) as a dataset of their own; ``record`` still finds their tokens."""
        index = torch.as_tensor(indices, dtype=torch.long)
        t = {k: v for k, v in self.t.items() if k.startswith(("types.", "open."))}
        for side in self.sides:
            ptr = self.t[f"{side}.ptr"]
            lo, hi = ptr[index], ptr[index + 1]
            lengths = hi - lo
            t[f"{side}.ptr"] = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)])
            # old position of every new node: item j's nodes lo_j .. hi_j - 1, concatenated
            shift = torch.repeat_interleave(lo - t[f"{side}.ptr"][:-1], lengths)
            nodes = torch.arange(int(lengths.sum())) + shift
            for key, value in self.t.items():
                if key.startswith(f"{side}.") and key != f"{side}.ptr":
                    t[key] = value[nodes]
        if "y" in self.t:
            t["y"] = self.t["y"][index]
        base = self.index[index] if self.index is not None else index
        return GraphDataset(t, self.level, self.sidecar, index=base)

    def spread(self, n: int) -> GraphDataset:
        """``n`` items evenly spaced over the split, first and last included (not the first ``n``: some
        files are sorted by label).
        """
        if n >= len(self):
            return self
        return self.subset(torch.linspace(0, len(self) - 1, n).round().long())

    def _side(self, side: str, i: int) -> dict[str, torch.Tensor]:
        t = self.t
        lo, hi = int(t[f"{side}.ptr"][i]), int(t[f"{side}.ptr"][i + 1])
        types = t[f"{side}.type"][lo:hi].long()
        attrs = {
            "word": t["types.word"][types].long(),
            "lower": t["types.lower"][types].long(),
            "chars": t["types.chars"][types].long(),
            "spell": t["types.spell"][types].float(),
            "position": torch.arange(hi - lo),
        }
        if f"{side}.upos" in t:
            attrs["upos"] = t[f"{side}.upos"][lo:hi].long()
        if f"{side}.head" in t:
            head = t[f"{side}.head"][lo:hi].long()
            deprel = t[f"{side}.deprel"][lo:hi].long()
            attrs["edge_index"], attrs["edge_type"] = edge_types_from_heads(head, deprel)
            attrs["head"], attrs["deprel"] = head, deprel
        if f"{side}.tag" in t:
            attrs["y"] = t[f"{side}.tag"][lo:hi].long()
        return attrs

    def __getitem__(self, i: int) -> Data:
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        if len(self.sides) == 1:
            attrs = self._side("a", i)
            if "y" in self.t:
                attrs["y"] = self.t["y"][i : i + 1]
            return Data(num_nodes=attrs["word"].numel(), **attrs)
        attrs = {}
        for side in self.sides:
            attrs.update({f"{k}_{side}": v for k, v in self._side(side, i).items()})
        return PairData(y=self.t["y"][i : i + 1], **attrs)

    def record(self, i: int) -> dict:
        """Tokens, label, source file and line of item ``i`` (from the sidecar JSONL)."""
        if self._records is None:
            if self.sidecar is None:
                raise ValueError("this dataset has no sidecar with tokens")
            with open(self.sidecar, encoding="utf-8") as handle:
                self._records = [json.loads(line) for line in handle]
        return self._records[i if self.index is None else int(self.index[i])]
