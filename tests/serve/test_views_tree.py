"""A tree run's layer in the view carries the best tree of its marginals (drawn like the parse)."""

from __future__ import annotations

import numpy as np

from cn3.serve.views import layer_json


def test_a_tree_runs_layer_carries_its_best_tree_and_others_do_not():
    marginals = np.array([[[0.1, 0.9, 0.0], [0.0, 1.0, 0.0], [0.0, 0.8, 0.2]]])  # (H=1, n, n): 0 <- 1 -> 2
    layer = layer_json(0, marginals, None, None, [1, -1, 1], word_rows=True, tree=True)
    assert layer["best_tree"] == [1, -1, 1]
    assert "best_tree" not in layer_json(0, marginals, None, None, [1, -1, 1], word_rows=True)
    assert "best_tree" not in layer_json(0, marginals, None, np.tri(3, dtype=bool), None, True, tree=True)
