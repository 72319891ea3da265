"""``bench/gpu_nmt_layers.py --quick`` runs whole on the CPU (the lead runs it full on a GPU) and
writes its summary; a column this CPU cannot run (oneDNN's bf16 LSTM without AVX-512) is reported,
not fatal (``tests/bench/test_avx2.py`` runs it as on an AVX2-only CPU)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

import cn3.layers.onlstm as onlstm
from tests.layers.test_onlstm_triton import _stand_ins

pytestmark = pytest.mark.usefixtures("one_thread")

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gpu_nmt_layers.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("gpu_nmt_layers", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_quick_run_on_cpu_writes_the_summary(tmp_path):
    bench = load_bench()
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
    assert not any("onlstm-triton" in k for r in summary["rows"] for k in r)  # no CUDA: no Triton column
    assert all(r["floor_ms"] is None and r["x_floor"] is None for r in summary["rows"] if r["part"] == "rnn")
    # only nn.LSTM under bf16 may be missing here (a CPU without oneDNN's bf16 LSTM), and it is said so
    assert all((s["part"], s["precision"], s["column"]) == ("rnn", "bf16", "lstm")
               and s["reason"].startswith("not supported on this CPU: ") for s in summary["not_supported"])


def test_the_triton_column(tmp_path, monkeypatch):
    """Where the kernels run (CUDA), the ON-LSTM rows gain the Triton column, its difference from
    the plain scan and its own target; here the kernels are stood in for by the plain step loops."""
    bench = load_bench()
    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "cn3.layers.onlstm_triton", _stand_ins(calls))
    monkeypatch.setattr(bench, "triton_available", lambda device: True)
    monkeypatch.setattr(onlstm, "_use_triton", lambda kernel, device, dtype, hidden: kernel == "triton")
    monkeypatch.setattr(bench, "ATTENTION_SHAPES", [])
    monkeypatch.setattr(bench, "QUICK_ATTENTION_SHAPES", [])
    out = tmp_path / "summary.json"
    bench.main(["--quick", "--repeats", "1", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["precision"] for r in rows] == ["fp32", "bf16"]
    for r in rows:
        assert r["onlstm-triton_ms"] > 0 and r["onlstm-triton/onlstm-plain"] > 0
        assert r["onlstm-triton/lstm"] > 0 if "lstm" not in r.get("not_supported", {}) else "lstm_ms" not in r
        assert r["triton_max_diff"] < 1e-5 and r["triton_compile_s"] >= 0
    assert "onlstm-triton/lstm <= 3 (fp32)" in json.loads(out.read_text())["targets"]
    assert calls.count("forward") == calls.count("backward") > 0


def _onednn_refusal():
    raise RuntimeError("could not create a primitive descriptor for the LSTM forward propagation primitive. "
                       "Run workload with environment variable ONEDNN_VERBOSE=all to get additional diagnostic "
                       "information.")


def test_cpu_unsupported_names_onednns_refusal_and_raises_the_rest():
    bench = load_bench()
    cpu = torch.device("cpu")
    assert bench.cpu_unsupported(lambda: None, cpu) is None
    assert bench.cpu_unsupported(_onednn_refusal, cpu) == ("not supported on this CPU: could not create a primitive "
                                                          "descriptor for the LSTM forward propagation primitive")
    with pytest.raises(RuntimeError, match="primitive descriptor"):  # a GPU never skips
        bench.cpu_unsupported(_onednn_refusal, torch.device("cuda"))

    def other():
        raise RuntimeError("shape mismatch")
    with pytest.raises(RuntimeError, match="shape mismatch"):
        bench.cpu_unsupported(other, cpu)


def test_race_leaves_out_what_the_cpu_cannot_run():
    bench = load_bench()
    calls = []
    times, skipped = bench.race({"ok": lambda: calls.append("ok"), "lstm": _onednn_refusal}, 2, 3,
                                bench.Timer(torch.device("cpu")), torch.device("cpu"))
    assert set(times) == {"ok"} and calls == ["ok"] * 5  # 2 warm-up calls (the probe is the first), 3 timed
    assert list(skipped) == ["lstm"] and skipped["lstm"].startswith("not supported on this CPU: could not create")


def test_the_floor_is_the_named_cards_special_function_rate():
    """H100 and H200: 132 SMs x 16 results per clock x 1.98 GHz; another card has no floor. CN3 at
    1 x 5000, e 100: 5e9 tanh forward + backward (half the time in bf16: two per instruction);
    ON-LSTM at 32 x 50 x 512, chunk 8: 2 x 32 x 50 x (8 x 512 + 2 x 64) results."""
    bench = load_bench()
    layers = bench._gpu_layers()
    rate, label = layers.tanh_rate("NVIDIA H100 80GB HBM3")
    assert rate == pytest.approx(132 * 16 * 1.98e9) and label.startswith("H100: 132 SMs")
    assert layers.tanh_rate("NVIDIA H200")[0] == rate
    assert layers.tanh_rate("NVIDIA A100-SXM4-80GB") is None
    assert layers.cn3_floor_ms(1, 5000, 100, rate, False) == pytest.approx(5e9 / 4.18176e12 * 1e3)
    assert layers.cn3_floor_ms(1, 5000, 100, rate, True) == pytest.approx(5e9 / 4.18176e12 * 1e3 / 2)
    assert bench.onlstm_floor_ms(32, 50, 512, 8, rate) == pytest.approx(2 * 32 * 50 * 4224 / 4.18176e12 * 1e3)
