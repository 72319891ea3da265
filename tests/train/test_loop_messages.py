"""What the training loop tells the user: early stopping named only when it happened, and plain
progress lines (no terminal) that carry the running loss."""

from __future__ import annotations

import re

import pytest

from cn3.kinds import train
from cn3.sentence.resolve import resolve_config
from data_prep.prepare import PrepareSettings, prepare

TINY = ["model.hidden=16", "model.energy_dim=8", "model.mlp_hidden=16", "model.char=none", "model.pos_dim=0",
        "model.spell_dim=0", "train.num_threads=1", "data.limit=60"]


@pytest.fixture(scope="module")
def trec(tmp_path_factory, data_root):
    out = tmp_path_factory.mktemp("prepared") / "trec"
    prepare(PrepareSettings(task="trec", data=data_root, out=out, annotator="none", embeddings=None))
    return out


def run(prepared, run_dir, overrides):
    cfg = resolve_config("trec", None, {"data.prepared": prepared}, TINY + overrides)
    train(cfg, run_dir, resume=False, device_name="cpu")
    return (run_dir / "log.txt").read_text(encoding="utf-8")


def test_early_stop_is_reported_only_when_the_run_stops_before_its_last_epoch(trec, tmp_path):
    # lr 1e-12: the dev score never improves after the first evaluation, so patience 1 runs out at the second
    log = run(trec, tmp_path / "two", ["train.epochs=2", "train.patience=1", "train.lr=1e-12"])
    assert "early stop" not in log  # the second evaluation is the run's last: it ends anyway
    assert log.count("epoch 2 step") == 1
    log = run(trec, tmp_path / "three", ["train.epochs=3", "train.patience=1", "train.lr=1e-12"])
    assert "early stop: no better dev score in 1 evaluations" in log
    assert "epoch 3 step" not in log


def test_plain_progress_lines_carry_the_running_loss(trec, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("cn3.util.console.LOG_INTERVAL", 0.0)  # a plain line at every update
    run(trec, tmp_path / "r", ["train.epochs=1"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("epoch 1/1:")]
    assert lines, "no plain progress line was printed"
    assert all(re.search(r"loss \d+\.\d{3} lr", line) for line in lines), lines[:3]


def test_the_loss_is_read_just_before_a_plain_line_whatever_its_own_clock():
    """The line's clock and the loss's clock differ (a line can fall due a moment after the loss was
    last read): the loss is re-read whenever a plain line is due, and only then."""
    import time

    from cn3.train.monitor import loss_due
    from cn3.util.console import LOG_INTERVAL, progress

    with progress() as bar:
        assert bar.disable  # tests run without a terminal
        bar._last_line = time.monotonic() - LOG_INTERVAL - 1
        assert loss_due(bar, shown_at=time.perf_counter())
        bar._last_line = time.monotonic()
        assert not loss_due(bar, shown_at=time.perf_counter() - 10 * LOG_INTERVAL)
