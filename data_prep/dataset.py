"""``load_prepared(dir)``: a prepared dataset back as PyG datasets, vocabularies and vectors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from cn3.util.errors import DataError
from data_prep.prepare import FORMAT_VERSION, read_manifest
from data_prep.store import GraphDataset
from data_prep.vocab import Vocab


@dataclass
class PreparedDataset:
    """A prepared task.

    Attributes:
        path: the directory.
        manifest: the parsed ``manifest.json``.
        vocabs: ``word``, ``lower``, ``chars``, ``labels`` and, when annotated, ``upos`` and ``rel``.
        splits: split name -> :class:`GraphDataset` (``Data``/``PairData`` items).
        embeddings: ``(len(vocabs["lower"]), dim)`` float tensor, or ``None``.
        embeddings_found: ``(len(vocabs["lower"]),)`` bool: which rows came from the vectors file.
    """

    path: Path
    manifest: dict
    vocabs: dict[str, Vocab]
    splits: dict[str, GraphDataset]
    embeddings: torch.Tensor | None = None
    embeddings_found: torch.Tensor | None = None

    @property
    def level(self) -> str:
        return self.manifest["level"]


def load_prepared(path: str | Path) -> PreparedDataset:
    """Open a directory written by ``cn3 prepare``; ``DataError`` if it is missing or incomplete."""
    path = Path(path)
    manifest = read_manifest(path)
    if manifest is None:
        raise DataError("not a prepared dataset (no readable manifest.json); run `cn3 prepare` first", path)
    if manifest.get("format") != FORMAT_VERSION:
        raise DataError(f"prepared with format {manifest.get('format')}, this cn3 reads format "
                        f"{FORMAT_VERSION}; re-run `cn3 prepare --force`", path)
    vocab_json = json.loads((path / "vocab.json").read_text(encoding="utf-8"))
    vocabs = {name: Vocab.from_dict(d) for name, d in vocab_json.items()}
    splits = {}
    for name in manifest["counts"]:
        tensors = torch.load(path / f"{name}.pt", weights_only=True)
        splits[name] = GraphDataset(tensors, manifest["level"], sidecar=path / f"{name}.jsonl")
    embeddings = found = None
    if (path / "embeddings.pt").is_file():
        emb = torch.load(path / "embeddings.pt", weights_only=True)
        embeddings, found = emb["vectors"], emb["found"]
    return PreparedDataset(path, manifest, vocabs, splits, embeddings, found)
