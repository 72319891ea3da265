"""A grid's records keep the gold of a split once (cn3.runs.compaction.compact_run, `cn3 experiment compact`, and
the runner compacting every cell it finishes): a run as it trains stays self-contained, a compacted
one reads back the same, compaction is idempotent, and a missing shared file says what it misses."""

from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from cn3.runs.compaction import RESULTS_LINE, compact_run
from cn3.runs.layout import RunDir
from cn3.runs.records import GOLD_DIR, PREDICTIONS_FORMAT, SHARED_GOLD_FORMAT, load_predictions
from cn3.util.errors import RunError

LABELS_GOLD = ["a", "b", "c", "a", "b", "c", "a", "a", "b", "c"]
TAGS_GOLD = [["B-NP", "E-NP", "O"], ["S-VP"], ["B-NP", "I-NP", "E-NP", "O"]]
TEXT_GOLD = ["Ein Mann läuft.", "Zwei Hunde spielen im Schnee.", "Eine Frau liest."]
CASES = {
    "accuracy": (None, LABELS_GOLD, [["a", "b", "c", "a", "c", "c", "a", "b", "b", "c"],
                                     ["b", "b", "c", "a", "b", "c", "a", "a", "b", "a"]]),
    "span_f1": ("BIOES", TAGS_GOLD, [[["B-NP", "E-NP", "O"], ["O"], ["B-NP", "E-NP", "O", "O"]],
                                     [["O", "E-NP", "O"], ["S-VP"], ["B-NP", "I-NP", "E-NP", "O"]]]),
    "bleu": (None, TEXT_GOLD, [["Ein Mann geht.", "Zwei Hunde.", ""], ["Ein Mann läuft.", "Hunde.", "Frau."]]),
}


def cell(grid: Path, name: str, metric: str, pred: list, splits=("dev", "test"), log_results: bool = True) -> Path:
    """A finished run as a trainer leaves it: predictions with their gold, results.json, a log."""
    tag_scheme, gold, _ = CASES[metric]
    run = RunDir(grid / "task" / name / "seed1")
    run.path.mkdir(parents=True)
    results = {"task": "task", "scores": {}, "predictions": {}}
    for split in splits:
        results["predictions"][split] = run.write_predictions(split, gold, pred, metric, tag_scheme, "task")
    (run.path / "results.json").write_text(json.dumps(results))
    log = "2026-11-26 10:00:00 training\n" + (f"results: {json.dumps(results)}\n" if log_results else "")
    run.log_file.write_text(log)
    return run.path


def payload(path: Path) -> dict:
    return json.loads(lzma.decompress(path.read_bytes()))


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("metric", sorted(CASES))
def test_a_compacted_grid_reads_as_before_keeps_each_gold_once_and_compacting_again_changes_nothing(tmp_path, metric):
    _, gold, (pred_a, pred_b) = CASES[metric]
    grid = tmp_path / "grid"
    runs = [cell(grid, "a", metric, pred_a), cell(grid, "b", metric, pred_b)]
    before = {(run, split): load_predictions(run, split) for run in runs for split in ("dev", "test")}
    assert all(payload(p.path)["format"] == PREDICTIONS_FORMAT for p in before.values())  # self-contained

    for run in runs:
        compact_run(run, grid / GOLD_DIR)
    shared = sorted(p.name for p in (grid / GOLD_DIR).iterdir())
    assert len(shared) == 2 and shared[0].startswith("dev.") and shared[1].startswith("test.")  # once per split
    for (run, split), old in before.items():
        new = load_predictions(run, split)
        assert (new.gold, new.pred, new.metric, new.tag_scheme, new.task) == \
               (old.gold, old.pred, old.metric, old.tag_scheme, old.task) == (gold, new.pred, metric, old.tag_scheme,
                                                                            "task")
        compacted = payload(new.path)
        assert compacted["format"] == SHARED_GOLD_FORMAT and "../../../gold/" in compacted["gold"]["path"]
        if metric != "bleu":  # labels and tags: only where the prediction differs from the gold
            wrong = sum(g != p for g, p in zip(old.gold, old.pred)) if metric == "accuracy" else \
                sum(g != p for gs, ps in zip(old.gold, old.pred) for g, p in zip(gs, ps))
            assert len(compacted["pred"]["ids"]) == wrong
    assert (runs[0] / "log.txt").read_text().splitlines()[-1] + "\n" == RESULTS_LINE

    snapshot = files(grid)
    again = compact_run(runs[0], grid / GOLD_DIR)
    compact_run(runs[1], grid / GOLD_DIR)
    assert again.rewritten == {} and again.gold == {} and files(grid) == snapshot


def test_a_dry_run_counts_what_it_would_save_and_writes_nothing(tmp_path):
    grid = tmp_path / "grid"
    run = cell(grid, "a", "bleu", CASES["bleu"][2][0])
    snapshot = files(grid)
    stats = compact_run(run, grid / GOLD_DIR, write=False)
    assert files(grid) == snapshot and len(stats.gold) == 2 and len(stats.rewritten) == 3  # 2 splits + the log
    assert stats.saved() == sum(b - a for b, a in stats.rewritten.values()) - sum(stats.gold.values())
    assert stats.saved(lambda path: path.name == "log.txt") > 0


def test_missing_shared_gold_names_the_predictions_and_the_file_it_needs(tmp_path):
    grid = tmp_path / "grid"
    run = cell(grid, "a", "accuracy", CASES["accuracy"][2][0])
    compact_run(run, grid / GOLD_DIR)
    needed = next((grid / GOLD_DIR).glob("test.*.json.xz"))
    lone = tmp_path / "elsewhere" / "task" / "a" / "seed1"  # the cell copied away from its grid
    shutil.copytree(run, lone)
    with pytest.raises(RunError) as err:
        load_predictions(lone, "test")
    message = str(err.value)
    assert str(lone / "predictions" / "test.json.xz") in message and needed.name in message and "missing" in message
    assert str(tmp_path / "elsewhere" / "gold" / needed.name) in message  # where its reference points

    moved = tmp_path / "moved"  # a grid moved whole still reads
    shutil.copytree(grid, moved)
    assert load_predictions(moved / "task" / "a" / "seed1", "test").gold == LABELS_GOLD
    needed.unlink()
    (grid / GOLD_DIR / "dev").mkdir()  # not a file: still missing
    with pytest.raises(RunError, match=r"test\.json\.xz keeps its gold items in a file its grid shares, .*"
                                          r"gold/test\.[0-9a-f]{64}\.json\.xz, which is missing"):
        load_predictions(run, "test")


def test_a_changed_shared_gold_is_refused(tmp_path, monkeypatch):
    from cn3.runs import records as run_dir

    monkeypatch.setattr(run_dir, "_GOLD_CACHE", {})  # this process read it while compacting
    grid = tmp_path / "grid"
    run = cell(grid, "a", "accuracy", CASES["accuracy"][2][0])
    compact_run(run, grid / GOLD_DIR)
    monkeypatch.setattr(run_dir, "_GOLD_CACHE", {})
    shared = next((grid / GOLD_DIR).glob("test.*"))
    content = payload(shared)
    content["gold"][0] = (content["gold"][0] + 1) % len(content["labels"])
    shared.write_bytes(lzma.compress(json.dumps(content).encode()))
    with pytest.raises(RunError, match="its content is not the gold .*test.json.xz names"):
        load_predictions(run, "test")


def test_an_adopted_cell_brings_its_gold_into_its_own_grid(tmp_path):
    """A cell adopted from another grid (hard links of the twin's compacted files) finds its gold through
    the twin and gets its own copy, so its grid's records stand alone."""
    from cn3.experiment.reuse import adopt
    from cn3.experiment.runner import compact
    from cn3.experiment.spec import Cell

    twin = cell(tmp_path / "one", "a", "span_f1", CASES["span_f1"][2][0])
    compact_run(twin, tmp_path / "one" / GOLD_DIR)
    adopted = Cell("task", "b", 1, (), tmp_path / "two" / "task" / "b" / "seed1")
    adopt(adopted, twin)
    with pytest.raises(RunError, match="missing"):
        load_predictions(adopted.run_dir, "test")
    compact(adopted, twin)
    assert sorted(p.name for p in (tmp_path / "two" / GOLD_DIR).iterdir()) == \
           sorted(p.name for p in (tmp_path / "one" / GOLD_DIR).iterdir())
    shutil.rmtree(tmp_path / "one")
    assert load_predictions(adopted.run_dir, "test").pred == CASES["span_f1"][2][0]


def test_the_runner_compacts_a_finished_cell_and_a_failure_leaves_it_readable(tmp_path, capsys):
    from cn3.experiment.launchers import Job
    from cn3.experiment.runner import CellState, _finish, compact
    from cn3.experiment.spec import Cell

    run = cell(tmp_path / "grid", "a", "accuracy", CASES["accuracy"][2][0])
    done = Cell("task", "a", 1, (), run)
    state = CellState(done, "running", started=1.0, worker="here", job=Job(done, None, 0, worker="here", rc=0))
    _finish(state)  # how the runner ends a cell whose process exited 0
    assert state.state == "done" and min(p.name for p in (tmp_path / "grid" / GOLD_DIR).iterdir())[:4] == "dev."
    assert payload(run / "predictions" / "test.json.xz")["format"] == SHARED_GOLD_FORMAT
    assert load_predictions(run, "test").gold == LABELS_GOLD

    broken = cell(tmp_path / "grid", "b", "accuracy", CASES["accuracy"][2][1])
    (broken / "predictions" / "dev.json.xz").write_bytes(b"not xz")
    compact(Cell("task", "b", 1, (), broken))
    assert "warning" in capsys.readouterr().err
    assert load_predictions(broken, "test").pred == CASES["accuracy"][2][1]


def test_old_files_and_other_runs_are_left_as_they_are(tmp_path):
    """An earlier version's JSONL is read as it is; a log line that is not results.json word for word
    (a converted record) is kept; a run whose trainer holds it is left alone."""
    from cn3.util.locking import exclusive_now

    grid = tmp_path / "grid"
    run = cell(grid, "a", "accuracy", CASES["accuracy"][2][0], splits=("test",), log_results=False)
    results = json.loads((run / "results.json").read_text())
    lines = [json.dumps({"i": i, "gold": g, "pred": g}) for i, g in enumerate(LABELS_GOLD)]
    (run / "predictions" / "dev.jsonl").write_text("\n".join(lines) + "\n")
    results["predictions"]["dev"] = {**results["predictions"]["test"], "path": "predictions/dev.jsonl"}
    (run / "results.json").write_text(json.dumps(results))
    log = "x\nresults: {\"task\": \"task\", \"predictions\": {}}\n"
    (run / "log.txt").write_text(log)

    with exclusive_now(RunDir(run).lock, RuntimeError("held")):
        held = compact_run(run, grid / GOLD_DIR)
    assert held.busy == [run] and not (grid / GOLD_DIR).exists()

    compact_run(run, grid / GOLD_DIR)
    assert (run / "log.txt").read_text() == log
    assert load_predictions(run, "dev").pred == LABELS_GOLD
    assert payload(run / "predictions" / "test.json.xz")["format"] == SHARED_GOLD_FORMAT


@pytest.mark.parametrize("change,message", [
    (lambda p: p["pred"]["at"].__setitem__(-1, 100), '"pred.at" must step forward through the 10 items'),
    (lambda p: p["pred"]["ids"].__setitem__(0, 9), '"pred.ids" must be ids into "labels"'),
    (lambda p: p["gold"].update(sha256="0" * 64), '"gold" must name its shared file'),
    (lambda p: p.update(kind="tags"), "holds 'tags' predictions, but its metric scores labels"),
])
def test_a_bad_compacted_file_names_itself(tmp_path, change, message):
    grid = tmp_path / "grid"
    run = cell(grid, "a", "accuracy", CASES["accuracy"][2][0])
    compact_run(run, grid / GOLD_DIR)
    path = run / "predictions" / "test.json.xz"
    content = payload(path)
    change(content)
    path.write_bytes(lzma.compress(json.dumps(content).encode()))
    with pytest.raises(RunError) as err:
        load_predictions(run, "test")
    assert str(path) in str(err.value) and message in str(err.value)


def test_the_compact_command_is_idempotent_and_has_a_dry_run(tmp_path):
    grid = tmp_path / "grid"
    cell(grid, "a", "accuracy", CASES["accuracy"][2][0])
    cell(grid, "b", "accuracy", CASES["accuracy"][2][1])
    (grid / "task" / "c" / "seed1").mkdir(parents=True)  # a cell still training: no results.json
    snapshot = files(grid)
    runner = CliRunner()
    dry = runner.invoke(app, ["experiment", "compact", str(grid), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "2 runs, 6 files to rewrite" in dry.output and "2 gold files to write" in dry.output
    assert files(grid) == snapshot
    done = runner.invoke(app, ["experiment", "compact", str(grid)])
    assert done.exit_code == 0 and "6 files rewritten" in done.output
    again = runner.invoke(app, ["experiment", "compact", str(grid)])
    assert again.exit_code == 0 and "0 files rewritten" in again.output and "0 gold files written" in again.output
    missing = runner.invoke(app, ["experiment", "compact", str(tmp_path / "nowhere")])
    assert missing.exit_code != 0 and "not a directory" in missing.output
