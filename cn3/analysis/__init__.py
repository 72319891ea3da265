"""Measure what a trained run's attention learned: trees, chains or stars (``cn3 analyze graphs``).

* :mod:`.graphs`: pure statistics of one sentence's attention matrix (hub share, entropy, query
  dependence, static attention, attended distance, agreement with the dependency tree) and
  :class:`GraphStatistics`, their per-layer aggregate over a dataset;
* :mod:`.collect`: :func:`analyze_graphs` runs a loaded model over a prepared split and feeds them;
* :mod:`.figure`: :func:`render_graphs_figure`, the histograms and per-relation bars.

Nothing here parses arguments or exits: bad requests raise :class:`~cn3.config.ConfigError`.
"""

from cn3.analysis.collect import analysis_notes, analyze_graphs, attention_kind, local_windows
from cn3.analysis.figure import render_graphs_figure
from cn3.analysis.graphs import STATISTICS, GraphStatistics, hub, sentence_statistics

__all__ = ["STATISTICS", "GraphStatistics", "analysis_notes", "analyze_graphs", "attention_kind", "hub",
           "local_windows", "render_graphs_figure", "sentence_statistics"]
