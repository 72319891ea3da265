"""Pretrained word vectors (GloVe or word2vec text/binary), loaded with gensim ``KeyedVectors``.

Every use after the first memory-maps gensim's native format from a cache keyed by the file's
sha256 (a moved copy is still found, an edited one is not mistaken for it): ``$CN3_CACHE/vectors``
(default ``$XDG_CACHE_HOME/cn3`` or ``~/.cache/cn3``); deleting it only costs the next read.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from cn3.util.errors import DataError
from data_prep.vocab import Vocab

_DIGESTS: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256, per process


def sha256_file(path: str | Path) -> str:
    """The file's sha256 (hex), computed once per process for an unchanged file."""
    path = Path(path).resolve()
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def cache_dir() -> Path:
    """``$CN3_CACHE``, else ``$XDG_CACHE_HOME/cn3``, else ``~/.cache/cn3``."""
    if os.environ.get("CN3_CACHE"):
        return Path(os.environ["CN3_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "cn3"


def vectors_format(path: Path) -> str:
    """``word2vec-binary`` (``.bin``), ``word2vec-text`` (a ``count dim`` first line) or ``glove-text``."""
    if path.suffix == ".bin":
        return "word2vec-binary"
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rb") as handle:
        first = handle.readline().split()
    return "word2vec-text" if len(first) == 2 and all(x.isdigit() for x in first) else "glove-text"


def read_vectors(path: str | Path):
    """Parse ``path`` as GloVe text (no header), word2vec text (``count dim`` header) or word2vec
    binary (``.bin``), without the cache. Returns a gensim ``KeyedVectors``."""
    from gensim.models import KeyedVectors

    path = Path(path)
    if not path.is_file():
        raise DataError("embeddings file not found", path)
    try:
        fmt = vectors_format(path)
        return KeyedVectors.load_word2vec_format(str(path), binary=fmt == "word2vec-binary",
                                                 no_header=fmt == "glove-text")
    except (ValueError, UnicodeDecodeError, EOFError, OSError) as err:
        raise DataError(f"cannot read word vectors ({err}); expected GloVe text (word v1 ... vd per line), "
                        "word2vec text with a 'count dim' header, or word2vec binary (.bin)", path) from None


def _cache_entry(sha256: str) -> Path:
    return cache_dir() / "vectors" / sha256 / "vectors.kv"


def cached_vectors(sha256: str):
    """The cached ``KeyedVectors`` of the file with this sha256 (memory-mapped), or ``None``."""
    from gensim.models import KeyedVectors

    entry = _cache_entry(sha256)
    if not entry.is_file():
        return None
    try:
        return KeyedVectors.load(str(entry), mmap="r")
    except (OSError, ValueError, EOFError):  # a damaged entry: rebuilt by the next load_vectors
        return None


def load_vectors(path: str | Path, sha256: str | None = None):
    """``path``'s vectors as a gensim ``KeyedVectors``, through the sha256-keyed cache (``sha256``: the
    file's digest when the caller has it). A cache entry is written in a temporary directory and
    renamed, so no process reads half of one.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError("embeddings file not found", path)
    sha256 = sha256 or sha256_file(path)
    vectors = cached_vectors(sha256)
    if vectors is not None:
        return vectors
    vectors = read_vectors(path)
    entry = _cache_entry(sha256)
    try:
        entry.parent.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{sha256}.", dir=entry.parent.parent))
        try:
            vectors.save(str(tmp / entry.name))
            os.replace(tmp, entry.parent)
        except OSError:  # another process stored the same entry first: theirs stays
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError:
        return vectors  # an unwritable cache only costs speed
    return cached_vectors(sha256) or vectors


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
