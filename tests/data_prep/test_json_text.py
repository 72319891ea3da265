"""``cn3.util.atomic.json_text``: the JSON records are written as; ``inline_lists`` (probe records) puts each
flat list on one line and reads back the same object."""

from __future__ import annotations

import json

from cn3.util.atomic import atomic_write_json, json_text

RECORD = {"tasks": [{"name": "sentlen", "test_gold": ["5-8", "13-16"], "predictions": {"sentence": [1, 0]},
                     "grid": [[0.1, 1.0], [10.0]], "empty": []}],
          "text": "a list-like string: [1, 2]", "nul": "\u0000", "accent": "é"}


def test_the_default_is_indented_json():
    assert json_text(RECORD) == json.dumps(RECORD, indent=2, ensure_ascii=False) + "\n"


def test_inline_lists_reads_back_the_same_object_with_flat_lists_on_one_line(tmp_path):
    text = json_text(RECORD, inline_lists=True)
    assert json.loads(text) == RECORD
    assert '      "test_gold": ["5-8", "13-16"],\n' in text
    assert '        "sentence": [1, 0]\n' in text
    assert '      "grid": [\n        [0.1, 1.0],\n        [10.0]\n      ],\n' in text  # a list of lists stays indented
    atomic_write_json(tmp_path / "probe.json", RECORD, inline_lists=True)
    assert (tmp_path / "probe.json").read_text(encoding="utf-8") == text
