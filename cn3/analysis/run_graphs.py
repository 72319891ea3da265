"""A trained run's attention graphs measured on a split of its prepared dataset (``cn3 analyze graphs``):
load the run, run it over the split (:func:`cn3.analysis.collect.analyze_graphs`), say what the
numbers mean for its encoder, and write ``graphs.json`` and ``graphs.png``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from cn3.runs.layout import RunDir


@dataclass
class GraphsAnalysis:
    """The statistics of a run's attention over one split.

    Attributes:
        run: the run directory, as given.
        task, encoder, split: the run's task and encoder, and the split measured.
        items: how many items were measured.
        prepared: the run's prepared dataset.
        kind: how the encoder's rows are read: ``graph``, ``causal`` or ``annotation``.
        attention_layers: the encoder's attention layers (all of them, whether measured or not).
        trees: where the dependency trees came from, or why there are none (a sentence).
        notes: what the numbers mean for this encoder, one sentence per caveat.
        layers: :meth:`cn3.analysis.graphs.GraphStatistics.summary`, one dict per layer (and head).
    """

    run: str
    task: str
    encoder: str
    split: str
    items: int
    prepared: Path
    kind: str
    attention_layers: int
    trees: str
    notes: list[str]
    layers: list[dict]

    @property
    def title(self) -> str:
        return f"{self.task} · {self.encoder} · {self.split}"

    def record(self) -> dict:
        """What ``graphs.json`` holds: every field, the layers' numbers for all relations."""
        return {"run": self.run, "task": self.task, "encoder": self.encoder, "split": self.split,
                "items": self.items, "prepared": str(self.prepared), "kind": self.kind,
                "attention_layers": self.attention_layers, "trees": self.trees, "notes": self.notes,
                "layers": self.layers}


def analyze_run_graphs(run: str | Path | RunDir, split: str = "dev", layer: int | None = None, heads: bool = False,
                       limit: int | None = None, device: str | torch.device = "auto") -> GraphsAnalysis:
    """Is a run's learned graph a tree, a chain or a star? Statistics of its attention, per layer.

    Args:
        run: a run directory from ``cn3 train`` whose encoder returns attention weights.
        split: the split of the run's prepared dataset.
        layer: only this attention layer (1-based); None: all.
        heads: also each energy head of a CN3 run with ``model.energy_heads > 1``.
        limit: at most this many items, evenly spread over the split (as ``data.limit``).
        device: ``auto``, ``cpu``, ``cuda`` or a ``torch.device``.

    Returns:
        The :class:`GraphsAnalysis`.

    Raises:
        ConfigError: an encoder without attention weights (before any data is read); no such device;
            the run's dataset is gone or another.
        ArgumentError (:mod:`cn3.util.errors`): the dataset has no ``split``.
        RunError: the run directory cannot be used.
    """
    from cn3.analysis.collect import (
        analysis_notes,
        analyze_graphs,
        attention_kind,
        local_windows,
    )
    from cn3.sentence.evaluation import prepared_dataset
    from cn3.sentence.inference import load_model
    from cn3.train.runtime import resolve_device

    dev = resolve_device(device) if isinstance(device, str) else device
    loaded = load_model(run if isinstance(run, RunDir) else RunDir(run), dev)
    encoder, manifest = loaded.config.model.encoder, loaded.manifest
    kind = attention_kind(encoder)  # before reading any data: a run without weights fails at once
    prepared, ds = prepared_dataset(loaded, split)
    dataset = ds.splits[split]
    if limit:
        dataset = dataset.spread(limit)
    stats, n_layers = analyze_graphs(loaded.model, dataset, encoder, dev, layer, per_head=heads)
    has_trees = "a.head" in dataset.t
    summary = stats.summary(ds.vocabs["rel"].itos if has_trees else None)
    notes = analysis_notes(encoder, kind, loaded.config.model.heads, local_windows(loaded.model), ds.level == "pair")
    trees = trees_source(encoder, kind, has_trees, manifest["annotator"]["name"])
    name = str(run.path if isinstance(run, RunDir) else run)
    return GraphsAnalysis(name, manifest["task"], encoder, split, len(dataset), prepared, kind, n_layers, trees,
                          notes, summary)


def trees_source(encoder: str, kind: str, has_trees: bool, annotator: str) -> str:
    """Where the dependency trees that the tree statistics compare with came from, or why there are none."""
    if kind == "annotation":
        return f"not measured: {encoder}'s rows are annotation hops, not words with heads"
    if has_trees:
        return f"{annotator} (the prepared dataset's)"
    return (f"none: the run's prepared dataset was annotated with {annotator!r}, which gives no dependency trees, "
            "so there are no tree statistics (train on data prepared with --annotator spacy, or gold where the "
            "task has trees)")


def write_graphs(analysis: GraphsAnalysis, out: str | Path) -> tuple[Path, Path]:
    """Write ``out/graphs.json`` (:meth:`GraphsAnalysis.record`) and ``out/graphs.png`` (histograms,
    agreement per relation), each atomically; ``out`` is made if missing.

    Returns:
        The two paths.

    Raises:
        OSError: ``out`` cannot be written.
    """
    from cn3.analysis.figure import render_graphs_figure
    from cn3.util.atomic import atomic_write, atomic_write_json

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "graphs.json", analysis.record())
    fig = render_graphs_figure(analysis.layers, analysis.title)
    atomic_write(out / "graphs.png", lambda handle: fig.savefig(handle, format="png", dpi=120))
    return out / "graphs.json", out / "graphs.png"
