"""Vocabularies built from the train split (``prepare`` adds words that have pretrained vectors);
dev/test are mapped through them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1  # in a vocabulary with specials


class Vocab:
    """A string <-> id map with optional ``<pad>`` (id 0) and ``<unk>`` (id 1).

    Args:
        itos: the strings in id order (specials included).
        specials: whether ids 0/1 are ``<pad>``/``<unk>``; label vocabularies have none, so an
            unknown label is an error instead of silently becoming ``<unk>``.
    """

    def __init__(self, itos: list[str], specials: bool = True):
        self.itos = list(itos)
        self.specials = specials
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("duplicate entries in vocabulary")

    @classmethod
    def build(cls, counts: Counter, min_freq: int = 1, specials: bool = True,
              fixed: Iterable[str] | None = None) -> Vocab:
        """Most frequent first (ties alphabetically, so the ids are deterministic).

        ``fixed`` gives the exact inventory and order (e.g. a task's label set) instead.
        """
        if fixed is not None:
            words = list(fixed)
        else:
            words = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
        return cls(([PAD, UNK] if specials else []) + words, specials)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def id(self, token: str) -> int:
        """The id of ``token``; ``<unk>`` when absent (``KeyError`` for a vocabulary without specials)."""
        if self.specials:
            return self.stoi.get(token, UNK_ID)
        return self.stoi[token]

    def ids(self, tokens: Iterable[str]) -> list[int]:
        if self.specials:
            get = self.stoi.get
            return [get(t, UNK_ID) for t in tokens]
        return [self.stoi[t] for t in tokens]

    def to_dict(self) -> dict:
        return {"itos": self.itos, "specials": self.specials}

    @classmethod
    def from_dict(cls, d: dict) -> Vocab:
        return cls(d["itos"], d["specials"])
