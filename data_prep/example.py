"""What every reader yields: plain sentences and examples, before annotation and graph building."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Sentence:
    """One tokenised sentence with optional word-level annotations.

    ``upos``/``xpos`` are per token; ``heads`` are 1-based with 0 = root (CoNLL-U convention);
    ``deprels`` use the Universal Dependencies inventory (``None`` when the source has trees but no
    labels, e.g. the PTB sample); ``tags`` are node-level labels for tagging tasks.
    """

    tokens: list[str]
    upos: list[str] | None = None
    xpos: list[str] | None = None
    heads: list[int] | None = None
    deprels: list[str] | None = None
    tags: list[str] | None = None

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass
class Example:
    """One item of a task: one sentence (node/graph level) or two (pair level).

    Args:
        sentences: one ``Sentence``, or two for sentence-pair tasks.
        label: the class label as a string (graph and pair level); ``None`` for tagging tasks.
        line: 1-based line in ``source`` where the item starts (for messages).
        source: the file it was read from.
        meta: task-specific extras kept for analysis (e.g. ``n_ops`` for the logic data, ``id``).
    """

    sentences: list[Sentence]
    label: str | None = None
    line: int | None = None
    source: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
