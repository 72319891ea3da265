"""The runs a server shows: each loaded once, with a lock so that one request at a time uses its model.

A ``RUN`` argument of ``cn3 serve`` is a run directory (``cn3 train`` or ``cn3 nmt train``) or a grid
directory (``cn3 experiment run --out``): every finished run under it (``results.json`` and a
checkpoint) is served, and the grid's report (``report.md`` and its PNGs, in it or in ``report/``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import torch

from cn3.util.errors import RunError

#: how deep under a grid directory finished runs are looked for
GRID_DEPTH = 4


@dataclass
class ServedRun:
    """One loaded run.

    ``kind``: ``sentence`` or ``translation``; ``model``: :class:`cn3.sentence.inference.LoadedModel`
    or :class:`cn3.nmt.inference.LoadedRun`; ``vectors``: a sentence run's word vectors for words
    outside its vocabulary (``None``: none recorded or not found, see ``notes``); ``graph``:
    ``cn3``, ``attention`` or ``None`` (:func:`cn3.serve.views.graph_kind`); ``layers``: the matrices
    per input (graph or attention layers) and ``heads`` per layer the view sends.
    """

    id: str
    path: Path
    kind: str
    model: object
    device: torch.device
    vectors: object = None
    graph: str | None = None
    layers: int = 0
    heads: int = 1
    notes: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    label: str = ""

    @property
    def name(self) -> str:
        """What the page and the messages call the run: ``label`` (:func:`name_runs`) or the directory's name."""
        return self.label or self.path.name

    @property
    def encoder(self) -> str:
        return self.model.config.model.encoder

    @property
    def manifest(self) -> dict:
        return self.model.manifest

    def labels(self) -> list[str]:
        return list(self.model.vocabs["labels"].itos) if self.kind == "sentence" else []

    def results(self) -> dict:
        """``results.json`` (``{}`` while the run has not finished)."""
        from cn3.runs.records import finished, read_results

        return read_results(self.path) if finished(self.path) else {}

    def task(self) -> str:
        if self.kind == "sentence":
            return self.manifest["task"]
        data = self.model.config.data
        corpus = "multi30k" if data.corpus == "multi30k" else Path(str(data.train_src)).name.split(".")[0]
        return f"{corpus} {data.src_lang}-{data.tgt_lang}"

    def scores(self) -> dict:
        """``{"dev", "test", "metric"}`` from ``results.json`` (translation: ``val`` and ``test2016``)."""
        from cn3.runs.records import split_scores

        scores = split_scores(self.results())
        dev = scores.get("dev") or scores.get("val")
        test = scores.get("test") or scores.get("test2016")
        metric = next((s["metric"] for s in (dev, test) if s), "bleu" if self.kind == "translation" else None)
        return {"dev": dev and dev.get("score"), "test": test and test.get("score"), "metric": metric}

    def describe(self) -> dict:
        """The run's entry of ``/api/runs``."""
        from cn3.serve.views import LEVELS

        level = LEVELS[self.manifest["level"]] if self.kind == "sentence" else None
        return {"id": self.id, "name": self.name, "kind": self.kind, "task": self.task(), "level": level,
                "encoder": self.encoder, "layers": self.layers, "heads": self.heads, "graph": self.graph,
                "labels": self.labels(), "scores": self.scores(), "notes": self.notes}


def load_served(path: Path, run_id: str, device: torch.device) -> ServedRun:
    """Load the run in ``path`` (:func:`cn3.kinds.kind_of_run`) and count its layers and heads.

    Raises:
        RunError: not a run directory, or no checkpoint in it; ConfigError: a malformed config.
    """
    from cn3.kinds import kind_of_run
    from cn3.serve.views import graph_kind

    kind = kind_of_run(path)
    served = ServedRun(run_id, Path(path), kind.name, kind.load(Path(path), device), device)
    served.graph = graph_kind(served.encoder)
    if served.kind == "sentence":
        served.vectors = _vectors(served)
    served.layers, served.heads = _depth(served)
    return served


def name_runs(runs: list[ServedRun]) -> None:
    """Give each run the shortest tail of its path that no other served run shares: a grid's cells are
    all called ``seed1``, so ``trec/tree/seed1`` and ``trec/parse/seed1`` tell them apart. The same
    directory served twice keeps its whole path."""
    for run in runs:
        parts = Path(run.path).absolute().parts
        others = [Path(o.path).absolute().parts for o in runs if o is not run]
        for depth in range(1, len(parts) + 1):
            tail = parts[-depth:]
            if all(other[-depth:] != tail for other in others):
                break
        run.label = "/".join(tail)


def _vectors(served: ServedRun):
    """The run's word vectors, or ``None`` with a note saying why (a served view still works)."""
    from cn3.sentence.inference import run_vectors
    from cn3.util.errors import ConfigError

    try:
        vectors, _ = run_vectors(served.manifest)
    except ConfigError as err:
        served.notes.append(f"words outside the vocabulary are <unk>: {err}")
        return None
    return vectors


def _depth(served: ServedRun) -> tuple[int, int]:
    """``(layers, most heads of a layer)`` of the matrices a view sends, from a view of one word (which
    also warms the model up)."""
    from cn3.serve.views import sentence_view, translation_view

    if served.graph is None:
        return 0, 1
    if served.kind == "translation":
        view = translation_view(served, "a", max_words=1)
    else:
        text = ["a", "a"] if served.manifest["level"] == "pair" else "a"
        view = sentence_view(served, text, pretokenized=True, max_words=1)
    layers = view["sides"][0]["layers"]
    return len(layers), max((len(layer["heads"]) for layer in layers), default=1)


def is_run(path: Path) -> bool:
    """A run directory: it has a ``config.yaml`` and a checkpoint."""
    return (path / "config.yaml").is_file() and ((path / "best.pt").is_file() or (path / "latest.pt").is_file())


def grid_runs(path: Path) -> list[Path]:
    """The finished runs under a grid directory (``results.json`` and a checkpoint), sorted by path."""
    from cn3.runs.records import finished

    found, level = [], [path]
    for _ in range(GRID_DEPTH):
        below = []
        for directory in level:
            for child in sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith(".")):
                (found if is_run(child) and finished(child) else below).append(child)
        level = below
    return sorted(found)


@dataclass
class Grid:
    """A grid's report: its Markdown and the PNGs beside it (served by name, from this list only)."""

    name: str
    markdown: str
    images: dict[str, Path]


def find_report(path: Path) -> Grid:
    """The report of the grid in ``path``: ``report.md`` in it or in ``report/`` (empty Markdown and
    no images when the grid has not been reported: ``cn3 experiment report --out``)."""
    for where in (path, path / "report"):
        if (where / "report.md").is_file():
            images = {p.name: p for p in sorted(where.glob("*.png"))}
            return Grid(path.name, (where / "report.md").read_text(encoding="utf-8"), images)
    return Grid(path.name, "", {})


def expand(paths: list[Path]) -> tuple[list[Path], Grid | None]:
    """The run directories to serve, in argument order (a grid's runs in place of the grid), and the
    report of the (first) grid given.

    Raises:
        RunError: a path that is missing, or neither a run nor a grid with finished runs.
    """
    runs: list[Path] = []
    grid = None
    for path in map(Path, paths):
        if not path.is_dir():
            raise RunError(f"run directory not found: {path}")
        if (path / "config.yaml").is_file():
            runs.append(path)  # a run (loading it says when it holds no checkpoint)
            continue
        found = grid_runs(path)
        if not found:
            raise RunError(f"{path} is neither a run directory (no config.yaml) nor a grid with finished runs")
        runs.extend(found)
        grid = grid or find_report(path)
    return runs, grid
