"""Pretrained word vectors (GloVe or word2vec text/binary), loaded with gensim ``KeyedVectors``."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from data_prep.errors import DataError
from data_prep.vocab import Vocab


def _has_word2vec_header(path: Path) -> bool:
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rb") as handle:
        first = handle.readline().split()
    return len(first) == 2 and all(x.isdigit() for x in first)


def load_vectors(path: str | Path):
    """Read ``path`` as GloVe text (no header), word2vec text (``count dim`` header) or word2vec
    binary (``.bin``). Returns a gensim ``KeyedVectors``."""
    from gensim.models import KeyedVectors

    path = Path(path)
    if not path.is_file():
        raise DataError("embeddings file not found", path)
    binary = path.suffix == ".bin"
    try:
        no_header = False if binary else not _has_word2vec_header(path)
        return KeyedVectors.load_word2vec_format(str(path), binary=binary, no_header=no_header)
    except (ValueError, UnicodeDecodeError, EOFError, OSError) as err:
        raise DataError(f"cannot read word vectors ({err}); expected GloVe text (word v1 ... vd per line), "
                        "word2vec text with a 'count dim' header, or word2vec binary (.bin)", path) from None


def embedding_matrix(vectors, vocab: Vocab) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``vectors`` for each entry of ``vocab`` (zeros where missing), and the found mask.

    Lookups try the word as is, then lower-cased (GloVe 6B is uncased).
    """
    matrix = np.zeros((len(vocab), vectors.vector_size), dtype=np.float32)
    found = np.zeros(len(vocab), dtype=bool)
    key_to_index = vectors.key_to_index
    for i, word in enumerate(vocab.itos):
        j = key_to_index.get(word)
        if j is None:
            j = key_to_index.get(word.lower())
        if j is not None:
            matrix[i] = vectors.vectors[j]
            found[i] = True
    return matrix, found
