"""``bench/gpu_nmt_layers.py --quick`` runs whole on the CPU (the lead runs it full on a GPU) and
writes its summary."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("one_thread")

BENCH = Path(__file__).resolve().parents[1] / "bench" / "gpu_nmt_layers.py"


def test_quick_run_on_cpu_writes_the_summary(tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_nmt_layers", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "summary.json"
    bench.main(["--quick", "--json", str(out)])
    summary = json.loads(out.read_text())
    assert summary["device"].startswith("CPU") and summary["quick"]
    parts = [(r["part"], r["precision"]) for r in summary["rows"]]
    assert parts.count(("attention", "fp32")) == parts.count(("attention", "bf16")) == 2
    assert parts.count(("rnn", "fp32")) == parts.count(("rnn", "bf16")) == 1
    for r in summary["rows"]:
        ratios = [v for k, v in r.items() if "/" in k]
        assert ratios and all(v > 0 for v in ratios), r
    assert set(summary["targets"]) == {"hybrid/transformer <= 1.10 (fp32)", "onlstm/lstm <= 3 (fp32)"}
