"""On an AVX2-only CPU (no AVX-512: oneDNN has no bf16 LSTM there) the quick CPU selection still runs.
The environment variables below make oneDNN and ATen on this machine act as on such a CPU, whatever
it has, so this runs everywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
AVX2 = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}


def test_gpu_nmt_layers_quick_runs_as_on_an_avx2_cpu_and_names_what_it_skipped(tmp_path):
    """``bench/gpu_nmt_layers.py --quick`` exits 0 with the AVX2 imitation, and every column it left
    out (at most nn.LSTM under bf16) is printed and listed in the summary with its reason."""
    out = tmp_path / "summary.json"
    env = {**os.environ, **AVX2, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "bench/gpu_nmt_layers.py", "--quick", "--repeats", "1", "--json", str(out)]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(out.read_text())
    for skip in summary["not_supported"]:
        assert (skip["part"], skip["precision"], skip["column"]) == ("rnn", "bf16", "lstm"), skip
        assert skip["reason"].startswith("not supported on this CPU: ")
        assert f"skipped: rnn {skip['shape']} bf16 lstm: {skip['reason']}" in result.stdout
    [bf16_rnn] = [r for r in summary["rows"] if (r["part"], r["precision"]) == ("rnn", "bf16")]
    assert ("lstm_ms" in bf16_rnn) != ("lstm" in bf16_rnn.get("not_supported", {}))  # timed, or said why not
