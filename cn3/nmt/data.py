"""Parallel text: reading line-aligned files, named splits, sentencepiece BPE and token batching.

* :func:`read_parallel`: a source/target file pair (gzip transparently).
* Splits: Multi30k (``multi30k/raw/<split>.<lang>.gz`` under the data root: ``train, val, test2016,
  test2017, mscoco2017``, :func:`canonical_split` also accepting the file names), or the user's
  files (``data.corpus: files``).
* :class:`Tokenizer`: sentencepiece BPE trained on the training split only, joint or one per
  language; ids 0-3 are ``<pad> <unk> <s> </s>``. The models live in the run directory and checkpoints.
* :func:`make_batch`: padded tensors of a batch (orders from :func:`cn3.train.bucketing.bucketed_batches`).
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from cn3.config import ConfigError
from cn3.nmt.config import NMTConfig, NMTDataConfig
from cn3.util.errors import DataError
from data_prep.textio import read_lines

PAD, UNK, BOS, EOS = 0, 1, 2, 3

#: Multi30k split names -> file stems in ``multi30k/raw``.
MULTI30K_SPLITS = {
    "train": "train",
    "val": "val",
    "test2016": "test_2016_flickr",
    "test2017": "test_2017_flickr",
    "mscoco2017": "test_2017_mscoco",
}
_ALIASES = {"dev": "val", "valid": "val", "test": "test2016",
            **{stem: name for name, stem in MULTI30K_SPLITS.items()}}


def canonical_split(name: str, corpus: str) -> str:
    """``dev -> val``, ``test_2016_flickr -> test2016``; an unknown name raises ConfigError."""
    known = list(MULTI30K_SPLITS) if corpus == "multi30k" else ["train", "val", "test"]
    if corpus != "multi30k" and name in ("dev", "valid", "test2016"):
        name = "test" if name == "test2016" else "val"
    elif corpus == "multi30k":
        name = _ALIASES.get(name, name)
    if name not in known:
        raise ConfigError(f"unknown split '{name}' for corpus {corpus}; known: {', '.join(known)}")
    return name


def final_splits(names: list[str], corpus: str) -> list[str]:
    """Canonical names of ``train.final_splits``; with your own files the extra Multi30k test sets
    (test2017, mscoco2017) do not exist and are left out, and test2016 means your test pair."""
    out = []
    for name in names:
        if corpus != "multi30k" and _ALIASES.get(name, name) in ("test2017", "mscoco2017"):
            continue
        split = canonical_split(name, corpus)
        if split not in out:
            out.append(split)
    return out


def read_parallel(src: str | Path, tgt: str | Path) -> list[tuple[str, str]]:
    """The line-aligned pairs of two files, stripped of surrounding whitespace.

    Raises:
        DataError: a file is missing or empty, or the files have different line counts (the
            message names the shorter file and the first line without a counterpart).
    """
    src_lines = [line for _, line in read_lines(src)]
    tgt_lines = [line for _, line in read_lines(tgt)]
    for path, lines in ((src, src_lines), (tgt, tgt_lines)):
        if not any(line.strip() for line in lines):
            raise DataError("empty file: expected one sentence per line, line-aligned with its translation", path)
    if len(src_lines) != len(tgt_lines):
        short, long_, n_short, n_long = ((src, tgt, len(src_lines), len(tgt_lines)) if len(src_lines) < len(tgt_lines)
                                         else (tgt, src, len(tgt_lines), len(src_lines)))
        raise DataError(f"has {n_long:,} lines but {short} has {n_short:,}: this line has no counterpart "
                        "(parallel files must be line-aligned)", long_, n_short + 1)
    return [(s.strip(), t.strip()) for s, t in zip(src_lines, tgt_lines)]


def multi30k_files(root: Path, split: str, src_lang: str, tgt_lang: str) -> tuple[Path, Path]:
    base = root / "multi30k" / "raw"
    stem = MULTI30K_SPLITS[split]
    return base / f"{stem}.{src_lang}.gz", base / f"{stem}.{tgt_lang}.gz"


def absolutize(cfg: NMTConfig) -> None:
    """Make the data paths of ``cfg`` absolute (the run may be evaluated from another directory)."""
    d = cfg.data
    for name in ("data", "train_src", "train_tgt", "valid_src", "valid_tgt", "test_src", "test_tgt"):
        value = getattr(d, name)
        if value is not None:
            setattr(d, name, Path(value).expanduser().resolve())


def _holdout(n: int, size: int, seed: int) -> set[int]:
    """The training lines held out as dev when no dev files are given (seeded)."""
    if n < 2:
        raise ConfigError("the training files hold fewer than 2 pairs: cannot hold out a dev split "
                          "(give data.valid_src and data.valid_tgt)")
    size = min(size, max(1, n // 10))
    return set(random.Random(seed).sample(range(n), size))


def load_split(d: NMTDataConfig, split: str, seed: int, data_root: str | Path | None = None) -> list[tuple[str, str]]:
    """The ``(source, target)`` pairs of a split (canonical name, see :func:`canonical_split`).

    Args:
        d: the data config of the run.
        seed: picks the held-out dev pairs of ``corpus: files`` without dev files.
        data_root: overrides ``d.data`` (``--data`` of evaluate/gates).
    """
    split = canonical_split(split, d.corpus)
    if d.corpus == "multi30k":
        from data_prep.paths import data_root as resolve_root

        root = resolve_root(data_root if data_root is not None else d.data)
        return read_parallel(*multi30k_files(root, split, d.src_lang, d.tgt_lang))
    if split == "test":
        if d.test_src is None:
            raise ConfigError("this run has no test files (data.test_src/data.test_tgt); score a file pair "
                              "with --src FILE --tgt FILE")
        return read_parallel(d.test_src, d.test_tgt)
    if split == "val" and d.valid_src is not None:
        return read_parallel(d.valid_src, d.valid_tgt)
    pairs = read_parallel(d.train_src, d.train_tgt)
    if d.valid_src is not None:
        return pairs
    held = _holdout(len(pairs), d.valid_size, seed)
    keep = (lambda i: i in held) if split == "val" else (lambda i: i not in held)
    return [p for i, p in enumerate(pairs) if keep(i)]


# ----------------------------------------------------------------------------- subwords


def train_sentencepiece(lines: list[str], vocab_size: int, character_coverage: float = 1.0) -> bytes:
    """A BPE model trained on ``lines``, as serialized bytes (ids 0-3: pad, unk, bos, eos)."""
    import sentencepiece as spm

    lines = [line for line in lines if line.strip()]
    if not lines:
        raise ConfigError("no text to train the subword model on")
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=buffer, vocab_size=vocab_size, model_type="bpe",
        character_coverage=character_coverage, pad_id=PAD, unk_id=UNK, bos_id=BOS, eos_id=EOS,
        hard_vocab_limit=False, num_threads=max(1, min(2, torch.get_num_threads())), minloglevel=2,
    )
    return buffer.getvalue()


class Tokenizer:
    """Source and target sentencepiece models (the same object when the vocabulary is joint).

    Args:
        models: ``{"joint": bytes}`` or ``{"src": bytes, "tgt": bytes}``.
    """

    def __init__(self, models: dict[str, bytes]):
        import sentencepiece as spm

        self.models = dict(models)
        load = lambda b: spm.SentencePieceProcessor(model_proto=b)  # noqa: E731
        if "joint" in models:
            self.src = self.tgt = load(models["joint"])
        else:
            self.src, self.tgt = load(models["src"]), load(models["tgt"])

    @property
    def joint(self) -> bool:
        return "joint" in self.models

    @property
    def src_vocab(self) -> int:
        return self.src.get_piece_size()

    @property
    def tgt_vocab(self) -> int:
        return self.tgt.get_piece_size()

    @classmethod
    def train(cls, pairs: list[tuple[str, str]], d: NMTDataConfig) -> Tokenizer:
        src, tgt = [s for s, _ in pairs], [t for _, t in pairs]
        if d.joint_vocab:
            return cls({"joint": train_sentencepiece(src + tgt, d.vocab_size, d.character_coverage)})
        return cls({"src": train_sentencepiece(src, d.vocab_size, d.character_coverage),
                    "tgt": train_sentencepiece(tgt, d.vocab_size, d.character_coverage)})

    def files(self) -> dict[str, bytes]:
        """Run-directory file names -> model bytes."""
        return {f"spm.{name}.model": data for name, data in self.models.items()}

    @classmethod
    def from_dir(cls, path: Path) -> Tokenizer | None:
        joint = path / "spm.joint.model"
        if joint.is_file():
            return cls({"joint": joint.read_bytes()})
        src, tgt = path / "spm.src.model", path / "spm.tgt.model"
        if src.is_file() and tgt.is_file():
            return cls({"src": src.read_bytes(), "tgt": tgt.read_bytes()})
        return None

    def encode_src(self, lines: list[str]) -> list[list[int]]:
        return self.src.encode(list(lines))

    def encode_tgt(self, lines: list[str]) -> list[list[int]]:
        return self.tgt.encode(list(lines))

    def decode_tgt(self, ids: list[list[int]]) -> list[str]:
        return self.tgt.decode([list(x) for x in ids])


@dataclass
class EncodedPairs:
    """Subword ids of a split; ``src`` ends with ``</s>``, ``tgt`` has neither ``<s>`` nor ``</s>``."""

    src: list[list[int]]
    tgt: list[list[int]]
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.src)


def encode_pairs(tok: Tokenizer, pairs: list[tuple[str, str]], max_len: int | None = None) -> EncodedPairs:
    """Encode pairs; with ``max_len`` drop pairs that are empty on a side or longer than it."""
    src = tok.encode_src([s for s, _ in pairs])
    tgt = tok.encode_tgt([t for _, t in pairs])
    out_s, out_t, skipped = [], [], 0
    for s, t in zip(src, tgt):
        if max_len is not None and (not s or not t or len(s) + 1 > max_len or len(t) + 1 > max_len):
            skipped += 1
            continue
        out_s.append(s + [EOS])
        out_t.append(t)
    return EncodedPairs(out_s, out_t, skipped)


# ----------------------------------------------------------------------------- batches


def pad(seqs: list[list[int]], value: int = PAD) -> Tensor:
    """``(B, longest)`` LongTensor, right-padded."""
    width = max((len(s) for s in seqs), default=0)
    out = torch.full((len(seqs), max(width, 1)), value, dtype=torch.long)
    for row, s in enumerate(seqs):
        if s:
            out[row, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out


@dataclass
class Batch:
    """``src (B, S)`` ends with ``</s>``; ``tgt_in = <s> y``, ``tgt_out = y </s>``, both ``(B, T)``."""

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor

    def to(self, device) -> Batch:
        """On ``device``: copies that do not wait for the device, and overlap its work when the
        batch is pinned."""
        return Batch(*(x.to(device, non_blocking=True) for x in (self.src, self.tgt_in, self.tgt_out)))

    def pin_memory(self) -> Batch:
        """In page-locked memory (the batch loader's ``pin_memory``), for asynchronous copies to CUDA."""
        return Batch(self.src.pin_memory(), self.tgt_in.pin_memory(), self.tgt_out.pin_memory())

    @property
    def tokens(self) -> int:
        """Real target tokens (the loss is normalized by them)."""
        return int((self.tgt_out != PAD).sum())

    @property
    def src_tokens(self) -> int:
        return int((self.src != PAD).sum())


def make_batch(data: EncodedPairs, indices: list[int]) -> Batch:
    return Batch(pad([data.src[i] for i in indices]),
                 pad([[BOS] + data.tgt[i] for i in indices]),
                 pad([data.tgt[i] + [EOS] for i in indices]))
