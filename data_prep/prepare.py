"""``cn3 prepare``: read a task, annotate it, build vocabularies and graphs, write them atomically.

The output directory is self-describing: ``manifest.json`` (task, sources with sha256, annotator
and version, counts, vocab sizes, labels, tag scheme, settings, statistics, ``held_out`` when a
split was carved out of another), ``vocab.json``, ``{split}.pt`` (:mod:`data_prep.store`),
``{split}.jsonl`` (tokens and provenance) and, with ``--embeddings``, ``embeddings.pt``.

Only the train split decides the vocabularies (words seen ``min_freq`` times or having a pretrained
vector); a dev/test word outside them keeps its pretrained vector beside the split
(:func:`data_prep.store.open_vocabulary`), as ``cn3 evaluate --file`` and ``cn3 predict`` do for new
text, so a file scores the same staged or not.

Written into a hidden temporary directory renamed into place at the end (an interrupted run leaves
no manifest). Inputs and settings matching the manifest's ``fingerprint``: nothing to do ("up to
date"). Processes preparing the same directory take turns (:mod:`cn3.util.locking`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from cn3.util.atomic import atomic_write_json
from cn3.util.console import console, progress
from cn3.util.errors import DataError
from cn3.util.locking import exclusive
from cn3.util.version import __version__ as cn3_version
from data_prep.annotators import default_annotator_name, make_annotator
from data_prep.embeddings import embedding_matrix, load_vectors, sha256_file, vectors_format
from data_prep.example import Example
from data_prep.paths import data_root, default_prepared_dir
from data_prep.store import encode_split, write_sidecar
from data_prep.tasks import custom_spec, get_task
from data_prep.taskspec import SPLITS, TaskOptions, TaskSpec
from data_prep.vocab import Vocab

FORMAT_VERSION = 2  # 2 (cn3 0.3): vocabularies from train alone; types.text and open.vectors


@dataclass
class PrepareSettings:
    """Everything that decides what ``prepare`` writes (all of it is part of the fingerprint).

    Args:
        task: registry name, or ``custom`` (files, format and columns in ``options``).
        data: data root (``None``: ``--data``/``CN3_DATA``/``../shared/data``).
        out: output directory (``None``: ``prepared/<task>[-fold<k>]``).
        annotator: ``gold``/``spacy``/``stanza``/``none`` (``None``: the task's default).
        max_len: truncate sentences to this many tokens (``None``: the task's default; 0: never).
        min_freq: words seen fewer times in train become ``<unk>``.
        char_len: characters kept per word.
        embeddings: GloVe/word2vec file whose rows are stored for the lower-cased vocabulary; a
            train word rarer than ``min_freq`` that has a vector stays in the vocabulary, and the
            dev/test words outside it keep their vectors (module docstring).
        stanza_dir: local stanza model directory.
        workers: spaCy parser processes (0 = one per CPU core); not part of the fingerprint, since
            the parses are the same for any number.
    """

    task: str
    data: Path | None = None
    out: Path | None = None
    annotator: str | None = None
    max_len: int | None = None
    min_freq: int = 1
    char_len: int = 20
    embeddings: Path | None = None
    stanza_dir: Path | None = None
    options: TaskOptions = field(default_factory=TaskOptions)
    force: bool = False
    workers: int = 0


@dataclass
class PrepareResult:
    out: Path
    manifest: dict
    up_to_date: bool


def embeddings_record(path: Path, sha256: str, root: Path | None) -> dict:
    """What a dataset (and every run trained on it) records of its vectors file, so that new text
    can be given the same vectors later: the absolute path, the path under the data root when it is
    there (found again under another ``CN3_DATA``), the sha256 and the format."""
    path = Path(path).resolve()
    relative = None
    if root is not None and path.is_relative_to(root):
        relative = str(path.relative_to(root))
    return {"path": str(path), "data_relative": relative, "sha256": sha256, "format": vectors_format(path)}


def resolve_spec(settings: PrepareSettings) -> TaskSpec:
    if settings.task == "custom":
        return custom_spec(settings.options)
    return get_task(settings.task, settings.options)


def default_out_name(spec: TaskSpec, options: TaskOptions) -> str:
    name = spec.name
    if spec.name == "trec" and options.fine:
        name += "-fine"
    if spec.cv:
        name += f"-fold{options.fold}"
    return name


def _source_files(spec: TaskSpec, root: Path | None, options: TaskOptions) -> list[Path]:
    if spec.name == "custom":
        return [Path(p) for _, p in sorted(options.files.items())]
    return [root / f for f in spec.files]


def truncate(splits: dict[str, list[Example]], max_len: int) -> int:
    """Cut every sentence to ``max_len`` tokens; arcs into the cut part are re-attached to the root."""
    n_cut = 0
    for examples in splits.values():
        for ex in examples:
            for s in ex.sentences:
                if len(s.tokens) <= max_len:
                    continue
                n_cut += 1
                s.tokens = s.tokens[:max_len]
                for attr in ("upos", "xpos", "deprels", "tags"):
                    if getattr(s, attr) is not None:
                        setattr(s, attr, getattr(s, attr)[:max_len])
                if s.heads is not None:
                    s.heads = [h if h <= max_len else 0 for h in s.heads[:max_len]]
    return n_cut


def _label_vocab(spec: TaskSpec, splits: dict[str, list[Example]]) -> Vocab:
    """Labels (or tags) from the task's fixed inventory or from train; unknown ones in dev/test fail."""
    if spec.level == "node":
        counts = Counter(t for ex in splits["train"] for s in ex.sentences for t in s.tags)
        vocab = Vocab.build(counts, specials=False, fixed=spec.labels)
        for name, examples in splits.items():
            for ex in examples:
                for s in ex.sentences:
                    bad = next((t for t in s.tags if t not in vocab), None)
                    if bad is not None:
                        raise DataError(f"unknown tag {bad!r} in the sentence starting here ({name} split); "
                                        f"the train split has: {', '.join(vocab.itos)}", ex.source, ex.line)
        return vocab
    counts = Counter(ex.label for ex in splits["train"])
    fixed = spec.labels if spec.labels is not None else sorted(counts)
    vocab = Vocab.build(counts, specials=False, fixed=fixed)
    for name, examples in splits.items():
        for ex in examples:
            if ex.label not in vocab:
                raise DataError(f"unknown label {ex.label!r} ({name} split); expected one of: "
                                f"{', '.join(vocab.itos)}", ex.source, ex.line)
    return vocab


def _build_vocabs(spec: TaskSpec, splits, settings: PrepareSettings, use_pos: bool, use_deps: bool,
                  vectors) -> dict:
    """Every vocabulary from the train split alone (labels: the task's inventory, or train's)."""
    train_sents = [s for ex in splits["train"] for s in ex.sentences]
    words = Counter(t for s in train_sents for t in s.tokens)
    lower = Counter()
    chars = Counter()
    for w, c in words.items():
        lower[w.lower()] += c
        for ch in w[: settings.char_len]:
            chars[ch] += c
    if vectors is not None:  # a rare train word with a vector is kept: its row starts from the vector
        known = vectors.key_to_index
        lower = Counter({w: c for w, c in lower.items() if c >= settings.min_freq or w in known})
        lower_vocab = Vocab.build(lower)
    else:
        lower_vocab = Vocab.build(lower, settings.min_freq)
    vocabs = {
        "word": Vocab.build(words, settings.min_freq),
        "lower": lower_vocab,
        "chars": Vocab.build(chars),
        "labels": _label_vocab(spec, splits),
    }
    if use_pos:
        vocabs["upos"] = Vocab.build(Counter(p for s in train_sents for p in s.upos))
    if use_deps:
        vocabs["rel"] = Vocab.build(Counter(r for s in train_sents for r in (s.deprels or ["_"] * len(s))))
    return vocabs


def _percentiles(lengths: list[int]) -> dict:
    if not lengths:
        return {}
    arr = np.asarray(lengths)
    return {"mean": round(float(arr.mean()), 1), "p50": int(np.percentile(arr, 50)),
            "p90": int(np.percentile(arr, 90)), "p99": int(np.percentile(arr, 99)), "max": int(arr.max())}


def _statistics(spec, splits, vocab: Vocab, vectors) -> dict:
    """Per-split counts. ``oov_vocab_tokens``: the share of tokens outside the (train-split)
    vocabulary; ``oov_vectors_tokens``: the share outside it that have a pretrained vector."""
    stats: dict = {"splits": {}}
    for name, examples in splits.items():
        sents = [s for ex in examples for s in ex.sentences]
        tokens = [t.lower() for s in sents for t in s.tokens]
        if spec.level == "node":
            labels = Counter(t for s in sents for t in s.tags)
        else:
            labels = Counter(ex.label for ex in examples)
        entry = {
            "examples": len(examples),
            "sentences": len(sents),
            "tokens": len(tokens),
            "labels": dict(labels.most_common()),
            "length": _percentiles([len(s) for s in sents]),
            "oov_vocab_tokens": round(sum(t not in vocab for t in tokens) / max(len(tokens), 1), 4),
        }
        if vectors is not None:
            types = set(tokens)
            kti = vectors.key_to_index
            entry["oov_embeddings_tokens"] = round(sum(t not in kti for t in tokens) / max(len(tokens), 1), 4)
            entry["oov_embeddings_types"] = round(sum(t not in kti for t in types) / max(len(types), 1), 4)
            in_vectors = sum(t not in vocab and t in kti for t in tokens)
            entry["oov_vectors_tokens"] = round(in_vectors / max(len(tokens), 1), 4)
        stats["splits"][name] = entry
    return stats


def _fingerprint(spec, settings, sources, annotator_name, annotator_version, max_len, emb_hash) -> str:
    payload = {
        "format": FORMAT_VERSION, "cn3": cn3_version, "task": spec.name,
        "options": settings.options.as_dict(), "sources": sources, "annotator": annotator_name,
        "annotator_version": annotator_version, "max_len": max_len, "min_freq": settings.min_freq,
        "char_len": settings.char_len, "embeddings": emb_hash,
    }
    if spec.reader_version != 1:  # only then, so that a first version leaves every existing dataset current
        payload["reader_version"] = spec.reader_version
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _is_complete(out: Path, manifest: dict) -> bool:
    return all((out / f"{split}.pt").is_file() for split in manifest.get("counts", {}))


def read_manifest(out: Path) -> dict | None:
    path = Path(out) / "manifest.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None


def _annotate(annotator, splits) -> tuple[int, float]:
    sentences = [s for examples in splits.values() for ex in examples for s in ex.sentences]
    start = time.perf_counter()
    with progress() as bar:
        task = bar.add_task(f"annotating ({annotator.name})", total=len(sentences), rate="")

        def on_progress(done: int) -> None:
            elapsed = time.perf_counter() - start
            bar.update(task, completed=done, rate=f"{done / max(elapsed, 1e-9):,.0f} sent/s")

        annotator.annotate(sentences, on_progress)
    return len(sentences), time.perf_counter() - start


def _swap_into_place(tmp: Path, out: Path) -> None:
    """Replace ``out`` by ``tmp`` with renames only (the old dataset survives until the new one is in)."""
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, out)


@dataclass
class _Inputs:
    """What ``prepare`` reads and how, settled before anything is read; ``fingerprint`` says whether
    the dataset already in ``out`` was made from the very same."""

    spec: TaskSpec
    root: Path | None
    out: Path
    source_paths: list[Path]
    sources: list[dict]
    annotator: object
    max_len: int | None
    emb_hash: str | None
    fingerprint: str


@dataclass
class _Data:
    """The task's splits read, cut to ``max_len`` (``truncated`` sentences), annotated (``annotated``:
    sentences and seconds), with the vocabularies built from train and the word vectors, if any."""

    splits: dict[str, list[Example]]
    held_out: dict | None
    truncated: int
    annotated: tuple[int, float]
    use_pos: bool
    use_deps: bool
    vectors: object | None
    vocabs: dict


def prepare(settings: PrepareSettings) -> PrepareResult:
    """Prepare ``settings.task``; see the module docstring.

    Args:
        settings: the task, where its data lives and how to prepare it.

    Returns:
        The :class:`PrepareResult`: the output directory, its manifest, and whether it was up to date
        already (then nothing was written).

    Raises:
        DataError: bad or missing input, or an output directory that is not a cn3 dataset.
    """
    inputs = _inputs(settings)
    out = inputs.out
    out.parent.mkdir(parents=True, exist_ok=True)
    # Under the lock, another process's temporary directory is a dead one's (removed below), and a
    # dataset that it has just finished is found up to date.
    with exclusive(out.parent / f".{out.name}.lock", f"waiting for another process preparing {out}"):
        previous = read_manifest(out)
        current = previous and previous.get("fingerprint") == inputs.fingerprint and _is_complete(out, previous)
        if current and not settings.force:
            return PrepareResult(out, previous, up_to_date=True)
        _check_output(out, previous, inputs.spec.name)
        data = _read_data(inputs, settings)
        manifest = _write_dataset(inputs, settings, data)
        return PrepareResult(out, manifest, up_to_date=False)


def _inputs(settings: PrepareSettings) -> _Inputs:
    """The task's spec, sources (hashed), annotator, ``max_len`` and vectors file, and their fingerprint."""
    options = settings.options
    spec = resolve_spec(settings)
    root = None if spec.name == "custom" else data_root(settings.data)
    out = Path(settings.out) if settings.out else default_prepared_dir(default_out_name(spec, options))

    source_paths = _source_files(spec, root, options)
    for path in source_paths:
        if not path.exists():
            raise DataError("file not found (set the data root with --data or CN3_DATA)", path)
    sources = [{"path": str(p), "sha256": sha256_file(p), "bytes": p.stat().st_size} for p in source_paths]

    annotator_name = settings.annotator or spec.annotator or default_annotator_name(spec.gold, settings.stanza_dir)
    workers = settings.workers or os.cpu_count() or 1
    annotator = make_annotator(annotator_name, stanza_dir=settings.stanza_dir, gold=spec.gold, workers=workers)
    max_len = spec.max_len if settings.max_len is None else (settings.max_len or None)
    if settings.embeddings and not Path(settings.embeddings).is_file():
        raise DataError("embeddings file not found", settings.embeddings)
    emb_hash = sha256_file(settings.embeddings) if settings.embeddings else None
    fingerprint = _fingerprint(spec, settings, sources, annotator.name, annotator.version, max_len, emb_hash)
    return _Inputs(spec, root, out, source_paths, sources, annotator, max_len, emb_hash, fingerprint)


def _check_output(out: Path, previous: dict | None, task: str) -> None:
    """Refuse to replace anything but a directory that is empty or holds a cn3 dataset; a folder of
    prepared tasks (``prepared/`` instead of ``prepared/trec``) is named as one."""
    if out.exists() and not out.is_dir():
        raise DataError("output path exists and is not a directory", out)
    if out.is_dir() and previous is None and any(out.iterdir()):
        tasks = sorted(p.name for p in out.iterdir() if (p / "manifest.json").is_file())
        hint = (f"; it holds prepared tasks ({', '.join(tasks)}): give the task's own, "
                f"{out / (task if task in tasks else tasks[0])}"
                if tasks else " (choose another --out)")
        raise DataError(f"output directory is not empty and holds no cn3 manifest; refusing to overwrite it{hint}",
                        out)


def _read_data(inputs: _Inputs, settings: PrepareSettings) -> _Data:
    """Read the task's splits, cut them to ``max_len``, annotate them, and build the vocabularies."""
    spec, annotator = inputs.spec, inputs.annotator
    with console.status(f"reading {spec.name}"):
        splits = spec.load(inputs.root, settings.options)
    held_out = getattr(splits, "held_out", None)  # a split carved out of another (SST-2's test)
    splits = {name: splits[name] for name in SPLITS if name in splits}
    if not splits.get("train"):
        raise DataError(f"task {spec.name} has no training examples",
                        inputs.source_paths[0] if inputs.source_paths else None)
    n_truncated = truncate(splits, inputs.max_len) if inputs.max_len else 0

    annotated = _annotate(annotator, splits)
    use_pos = "pos" in annotator.provides and not spec.label_is_pos
    use_deps = "deps" in annotator.provides

    vectors = None
    if settings.embeddings:
        with console.status("loading word vectors"):
            vectors = load_vectors(settings.embeddings, inputs.emb_hash)
    vocabs = _build_vocabs(spec, splits, settings, use_pos, use_deps, vectors)
    return _Data(splits, held_out, n_truncated, annotated, use_pos, use_deps, vectors, vocabs)


def _write_dataset(inputs: _Inputs, settings: PrepareSettings, data: _Data) -> dict:
    """Write the dataset into a hidden temporary directory, its manifest last, and swap it into
    ``inputs.out``; an error or interruption removes the temporary directory. Returns the manifest."""
    out = inputs.out
    for stale in out.parent.glob(f".{out.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    tmp.mkdir()
    try:
        counts = {}
        for name, examples in data.splits.items():
            tensors = encode_split(examples, inputs.spec.level, data.vocabs, settings.char_len, data.use_pos,
                                   data.use_deps, data.vectors)
            torch.save(tensors, tmp / f"{name}.pt")
            write_sidecar(tmp / f"{name}.jsonl", examples)
            counts[name] = {"examples": len(examples), "tokens": sum(len(s) for ex in examples for s in ex.sentences)}
        atomic_write_json(tmp / "vocab.json", {k: v.to_dict() for k, v in data.vocabs.items()})
        embeddings_info = _write_embeddings(tmp, inputs, settings, data) if data.vectors is not None else None
        manifest = _manifest(inputs, settings, data, counts, embeddings_info)
        atomic_write_json(tmp / "manifest.json", manifest)  # last: its presence marks a complete dataset
        _swap_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _write_embeddings(tmp: Path, inputs: _Inputs, settings: PrepareSettings, data: _Data) -> dict:
    """``embeddings.pt``: the vectors of the lower-cased vocabulary; returns the manifest's record of them."""
    matrix, found = embedding_matrix(data.vectors, data.vocabs["lower"])
    torch.save({"vectors": torch.from_numpy(matrix), "found": torch.from_numpy(found)}, tmp / "embeddings.pt")
    return {**embeddings_record(Path(settings.embeddings), inputs.emb_hash, inputs.root),
            "dim": int(matrix.shape[1]), "vocab_found": int(found.sum()), "vocab_size": len(found)}


def _manifest(inputs: _Inputs, settings: PrepareSettings, data: _Data, counts: dict,
              embeddings_info: dict | None) -> dict:
    """The dataset's ``manifest.json`` (module docstring), statistics included."""
    spec, annotator, vocabs = inputs.spec, inputs.annotator, data.vocabs
    stats = _statistics(spec, data.splits, vocabs["lower"], data.vectors)
    stats["truncated_sentences"] = data.truncated
    n_sentences, seconds = data.annotated
    stats["annotation"] = {"sentences": n_sentences, "seconds": round(seconds, 3),
                           "sentences_per_second": round(n_sentences / max(seconds, 1e-9), 1)}
    return {
        "format": FORMAT_VERSION,
        "cn3_version": cn3_version,
        "task": spec.name,
        "level": spec.level,
        "description": spec.description,
        "notes": spec.notes,
        "sources": inputs.sources,
        "annotator": {"name": annotator.name, "version": annotator.version,
                      "provides": sorted(annotator.provides), "pos_input": data.use_pos, "trees": data.use_deps},
        "counts": counts,
        "vocab_sizes": {k: len(v) for k, v in vocabs.items()},
        "labels": vocabs["labels"].itos,
        "tag_scheme": spec.tag_scheme,
        "n_edge_types": 1 + 2 * len(vocabs["rel"]) if data.use_deps else 0,
        "settings": {"max_len": inputs.max_len, "min_freq": settings.min_freq, "char_len": settings.char_len,
                     "options": settings.options.as_dict()},
        **({"held_out": data.held_out} if data.held_out else {}),
        "embeddings": embeddings_info,
        "statistics": stats,
        "fingerprint": inputs.fingerprint,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
