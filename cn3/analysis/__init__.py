"""Measure what a trained run's attention learned: trees, chains or stars (``cn3 analyze graphs``).

:mod:`.graphs`: statistics of one attention matrix and their per-layer aggregate;
:mod:`.collect`: :func:`analyze_graphs` over a prepared split; :mod:`.figure`: the figure;
:mod:`.energy`: CN3's energies taken apart; :mod:`.run_graphs`: a trained run loaded and analysed.
Bad requests raise :class:`~cn3.config.ConfigError`.
"""

from cn3.analysis.collect import analysis_notes, analyze_graphs, attention_kind, local_windows
from cn3.analysis.figure import render_graphs_figure
from cn3.analysis.graphs import STATISTICS, GraphStatistics, hub, sentence_statistics

__all__ = ["STATISTICS", "GraphStatistics", "analysis_notes", "analyze_graphs", "attention_kind", "hub",
           "local_windows", "render_graphs_figure", "sentence_statistics"]
