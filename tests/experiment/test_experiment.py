"""``cn3 experiment``: specs are checked before anything trains; a grid runs, stops and finishes
where it stopped; the report tabulates mean ± std with paired tests against the baseline."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from cli.main import app
from cn3.config import ConfigError
from cn3.experiment.spec import SPEC_DIR, check_variant_options, find_spec, load_spec
from data_prep.prepare import PrepareSettings, prepare

# slow: grids of real (tiny) trainings (`pytest -m "not slow"` is the quick loop)
pytestmark = pytest.mark.slow

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def write_spec(path: Path, **fields) -> Path:
    spec = {"name": "tiny", "tasks": ["trec"],
            "variants": {"lstm": {"model.encoder": "lstm"}, "nbow": {"model.encoder": "nbow"}},
            "baseline": "lstm", "seeds": [1, 2]}
    spec.update(fields)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


# ---------------------------------------------------------------- specs


@pytest.mark.parametrize("name", sorted(p.stem for p in SPEC_DIR.glob("*.yaml")))
def test_every_shipped_spec_resolves_every_cell(name, tmp_path):
    from cn3.experiment.runner import check_cells

    spec = load_spec(name)
    check_variant_options(spec)  # no variant sets a family option its encoder ignores
    for budget in [None, *spec.budgets]:
        check_cells(spec.cells(tmp_path, budget), threads=1)  # a bad key or value raises, naming the cell


def test_a_shipped_spec_is_found_by_name_or_by_its_path_in_the_package(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no configs/ here: the package's copy answers
    assert find_spec("configs/experiments/liu-table3.yaml") == find_spec("liu-table3") == SPEC_DIR / "liu-table3.yaml"
    with pytest.raises(ConfigError,
                       match=r"spec not found: configs/experiments/liu-tabel3.yaml; did you mean 'liu-table3'\?"):
        find_spec("configs/experiments/liu-tabel3.yaml")
    (tmp_path / "configs" / "experiments").mkdir(parents=True)
    write_spec(tmp_path / "configs" / "experiments" / "liu-table3.yaml")  # a file of one's own wins
    assert load_spec("configs/experiments/liu-table3.yaml").name == "tiny"


@pytest.mark.parametrize("fields, message", [
    ({"variant": {}}, "unknown key 'variant'; did you mean 'variants'?"),
    ({"tasks": ["trek"]}, "unknown task 'trek'; did you mean 'trec'?"),
    ({"baseline": "cnn"}, "baseline 'cnn' is not a variant"),
    ({"seeds": "1,2"}, "seeds must be a list of integers"),
    ({"budgets": {"smoke": {"seed": [1]}}}, "budgets.smoke: unknown key 'seed'; did you mean 'seeds'?"),
    ({"references": {"trec": {"gru": 1.0}}}, "references.trec.gru: not a variant"),
])
def test_a_bad_spec_names_the_key(tmp_path, fields, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_spec(write_spec(tmp_path / "s.yaml", **fields))


def test_a_bad_override_fails_before_anything_trains_naming_the_cell(tmp_path):
    spec = write_spec(tmp_path / "s.yaml", variants={"lstm": {"model.encoder": "lstm"},
                                                     "big": {"model.hiden": 300}})
    result = invoke("experiment", "run", spec, "--out", tmp_path / "runs")
    assert result.exit_code == 1
    assert "cell trec/big/seed1" in result.output and "did you mean 'model.hidden'?" in result.output
    assert not (tmp_path / "runs").exists()  # nothing trained, nothing written


@pytest.mark.parametrize("fields, message", [
    ({"variants": {"lstm": {"model.encoder": "lstm"}, "lstm-res": {"model.encoder": "lstm", "model.rnn.residual": True},
                   "nbow-res": {"model.encoder": "nbow", "model.rnn.residual": True}}},
     "variants.nbow-res sets model.rnn.residual, which its encoder (nbow) does not read"),
    ({"set": {"model.encoder": "transformer"},
      "variants": {"lstm": {"model.encoder": "lstm"}, "w2": {"model.hybrid.window": 2}}},
     "variants.w2 sets model.hybrid.window, which its encoder (transformer) does not read"),
    ({"variants": {"lstm": {"model.encoder": "lstm"}, "cn3-small": {"model.energy_dim": 50}, "lstm-small": {
        "model.encoder": "lstm", "model.energy_dim": 50}}},  # the task's config decides cn3-small's encoder: cn3
     "variants.lstm-small sets model.energy_dim, which its encoder (lstm) does not read"),
])
def test_a_variant_setting_an_option_its_encoder_ignores_fails_before_anything_trains(tmp_path, fields, message):
    spec = write_spec(tmp_path / "s.yaml", **fields)
    result = invoke("experiment", "run", spec, "--out", tmp_path / "runs", "--dry-run")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert message in " ".join(result.output.split()), result.output
    assert not (tmp_path / "runs").exists()
    budget = write_spec(tmp_path / "b.yaml", budgets={"smoke": {"set": {"model.rnn.residual": True}}})
    check_variant_options(load_spec(budget))  # a budget's set reaches every variant: accepted


def test_cells_are_named_and_placed_by_their_coordinates(tmp_path):
    spec = load_spec(write_spec(tmp_path / "s.yaml", set={"train.epochs": 2},
                                budgets={"smoke": {"set": {"train.epochs": 1}, "seeds": [7]}}))
    cells = spec.cells(tmp_path, "smoke", {"variant": {"nbow"}})
    assert [c.name for c in cells] == ["trec/nbow/seed7"]
    (cell,) = cells
    assert cell.run_dir == tmp_path / "tiny-smoke" / "trec" / "nbow" / "seed7"
    # the budget resizes every cell, after the variant's own overrides
    assert cell.overrides == ("train.epochs=1", "model.encoder=nbow")
    assert cell.command(2, resume=False)[:6] == ["train", "--task", "trec", "--seed", "7", "--run-dir"]


def test_a_budget_may_resize_one_task_more_than_another(tmp_path):
    spec = load_spec(write_spec(tmp_path / "s.yaml", tasks=["trec", "sick", "conll2000"],
                                budgets={"cpu": {"set": {"train.epochs": 10},
                                                 "tasks": {"trec": None, "sick": {"train.epochs": 3}}}}))
    cells = spec.cells(tmp_path, "cpu", {"variant": {"nbow"}, "seed": {"1"}})
    assert [(c.task, c.overrides) for c in cells] == [("trec", ("model.encoder=nbow", "train.epochs=10")),
                                                      ("sick", ("model.encoder=nbow", "train.epochs=3"))]
    with pytest.raises(ConfigError, match="budgets.cpu.tasks.sick: expected a mapping"):
        load_spec(write_spec(tmp_path / "t.yaml", tasks=["trec", "sick"], budgets={"cpu": {"tasks": {"sick": 3}}}))
    with pytest.raises(ConfigError, match="budgets.cpu.tasks: 'mr' is not a task of the spec"):
        load_spec(write_spec(tmp_path / "u.yaml", budgets={"cpu": {"tasks": {"mr": {}}}}))


def test_a_budget_may_narrow_the_variants_but_keeps_the_baseline(tmp_path):
    spec = load_spec(write_spec(tmp_path / "s.yaml", variants={"lstm": {"model.encoder": "lstm"}, "nbow": {
        "model.encoder": "nbow"}, "cnn": {"model.encoder": "cnn"}}, budgets={"cpu": {"variants": ["cnn", "lstm"]}}))
    assert [c.variant for c in spec.cells(tmp_path, "cpu", {"seed": {"1"}})] == ["lstm", "cnn"]  # the spec's order
    with pytest.raises(ConfigError, match="budgets.cpu.variants leaves out the baseline 'lstm'"):
        load_spec(write_spec(tmp_path / "t.yaml", budgets={"cpu": {"variants": ["nbow"]}}))
    with pytest.raises(ConfigError, match="budgets.cpu.variants: 'gru' is not a variant"):
        load_spec(write_spec(tmp_path / "u.yaml", budgets={"cpu": {"variants": ["lstm", "gru"]}}))


TUNE = {"options": {"slow": {"train.lr": 0.5}, "fast": {"train.lr": 1.0}}}


def _finish(run_dir: Path, dev: float) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "results.json").write_text(json.dumps({"scores": {"dev": {"metric": "accuracy", "score": dev}}}))


def test_a_tuned_grid_trains_every_option_then_every_seed_with_the_best_on_dev(tmp_path):
    spec = load_spec(write_spec(tmp_path / "s.yaml", tune=TUNE, set={"train.epochs": 2}))
    cells = spec.cells(tmp_path)
    assert [c.name for c in cells] == ["trec/lstm/tune-slow", "trec/lstm/tune-fast", "trec/lstm/seed1",
                                       "trec/lstm/seed2", "trec/nbow/tune-slow", "trec/nbow/tune-fast",
                                       "trec/nbow/seed1", "trec/nbow/seed2"]
    slow = cells[0]
    assert slow.seed == 1 and slow.run_dir == tmp_path / "tiny" / "trec" / "lstm" / "tune-slow"
    assert slow.overrides == ("train.epochs=2", "model.encoder=lstm", "train.lr=0.5")  # the option after the variant
    assert [c.waiting for c in cells] == [False, False, True, True] * 2  # no option chosen yet

    _finish(cells[0].run_dir, 80.0)  # lstm: slow wins on dev
    _finish(cells[1].run_dir, 79.0)
    _finish(cells[4].run_dir, 70.0)  # nbow: fast not finished yet
    cells = {c.name: c for c in spec.cells(tmp_path)}
    seed1, seed2 = cells["trec/lstm/seed1"], cells["trec/lstm/seed2"]
    assert not seed1.waiting and seed1.option == seed2.option == "slow"
    assert seed1.run_dir == cells["trec/lstm/tune-slow"].run_dir  # the tuning seed's cell is the chosen run
    assert seed2.run_dir.name == "seed2" and seed2.overrides == cells["trec/lstm/tune-slow"].overrides
    assert cells["trec/nbow/seed2"].waiting

    _finish(cells["trec/nbow/tune-fast"].run_dir, 70.0)  # a tie goes to the option listed first
    assert {c.name: c.option for c in spec.cells(tmp_path)}["trec/nbow/seed2"] == "slow"
    # --only seed=2 keeps the tuning cells its seed cells need
    assert [c.name for c in spec.cells(tmp_path, only={"seed": {"2"}, "variant": {"nbow"}})] == [
        "trec/nbow/tune-slow", "trec/nbow/tune-fast", "trec/nbow/seed2"]


def test_a_budget_may_replace_or_turn_off_the_tuning(tmp_path):
    spec = load_spec(write_spec(tmp_path / "s.yaml", tune={**TUNE, "seed": 2}, budgets={
        "quick": {"tune": None}, "other": {"tune": {"options": {"a": {"train.lr": 0.1}, "b": {"train.lr": 0.2}}}}}))
    assert not any(c.tune for c in spec.cells(tmp_path, "quick"))
    tuned = [c for c in spec.cells(tmp_path, "other") if c.tune]
    assert [(c.tune, c.seed) for c in tuned[:2]] == [("a", 1), ("b", 1)]  # the budget's block, its default seed
    assert {c.seed for c in spec.cells(tmp_path) if c.tune} == {2}


@pytest.mark.parametrize("tune, message", [
    ({"option": {}}, "tune: unknown key 'option'; did you mean 'options'?"),
    ({"options": {"only": {"train.lr": 1.0}}}, "tune.options: expected a mapping of at least two named options"),
    ({"options": {"a/b": {}, "c": {}}}, "tune.options: 'a/b' cannot name a run directory"),
    ({"options": {"a": 3, "c": {}}}, "tune.options.a: expected a mapping of overrides"),
    ({**TUNE, "seed": "1"}, "tune.seed: expected an integer"),
])
def test_a_bad_tune_block_names_the_key(tmp_path, tune, message):
    with pytest.raises(ConfigError, match=message.replace("?", r"\?")):
        load_spec(write_spec(tmp_path / "s.yaml", tune=tune))


def test_only_filters_parse():
    from cli.experiment import parse_only

    assert parse_only(["task=trec,sick,variant=lstm", "seed=1", "fold=0,3"]) == {
        "task": {"trec", "sick"}, "variant": {"lstm"}, "seed": {"1"}, "fold": {"0", "3"}}


def test_a_cross_validated_task_trains_each_seed_once_a_fold(tmp_path):
    spec = load_spec(write_spec(tmp_path / "s.yaml", tasks={"mr": {"data.fold": 0, "train.epochs": 2}},
                                budgets={"cv": {"folds": {"mr": 3}}, "one": {"folds": {"mr": [2]}}}))
    assert [c.name for c in spec.cells(tmp_path, None, {"variant": {"nbow"}})] == ["mr/nbow/seed1", "mr/nbow/seed2"]
    cells = spec.cells(tmp_path, "cv", {"variant": {"nbow"}})
    assert [c.name for c in cells] == [f"mr/nbow/seed{s}-fold{f}" for s in (1, 2) for f in (0, 1, 2)]
    assert cells[1].run_dir == tmp_path / "tiny-cv" / "mr" / "nbow" / "seed1-fold1" and cells[1].fold == 1
    # the fold is the cell's coordinate: it replaces the task's own data.fold, last
    assert cells[1].overrides == ("train.epochs=2", "model.encoder=nbow", "data.fold=1")
    assert [c.name for c in spec.cells(tmp_path, "cv", {"variant": {"nbow"}, "fold": {"2"}})] == [
        "mr/nbow/seed1-fold2", "mr/nbow/seed2-fold2"]
    assert [c.fold for c in spec.cells(tmp_path, "one", {"variant": {"nbow"}})] == [2, 2]
    assert spec.cells(tmp_path, None, {"fold": {"0"}}) == []  # no fold cells without folds


@pytest.mark.parametrize("fields, message", [
    ({"folds": {"trec": 10}}, "folds.trec: the task has an official test split, not folds"),
    ({"folds": {"mr": 0}}, "folds.mr: expected a number of folds or a list of distinct folds"),
    ({"folds": {"mr": [1, 1]}}, "folds.mr: expected a number of folds or a list of distinct folds"),
    ({"folds": {"mr": [3, 10]}}, "folds.mr: the task has folds 0-9, got 10"),
    ({"folds": {"subj": 2}}, "folds.subj: not a task of the spec"),
    ({"budgets": {"cv": {"folds": {"mr": "all"}}}}, "budgets.cv.folds.mr: expected a number of folds"),
])
def test_bad_folds_name_the_key(tmp_path, fields, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_spec(write_spec(tmp_path / "s.yaml", tasks=["trec", "mr"], **fields))


def _fold_run(run_dir: Path, gold: list[str], pred: list[str]) -> None:
    from cn3.runs.layout import RunDir

    run = RunDir(run_dir)
    run_dir.mkdir(parents=True)
    entry = run.write_predictions("test", gold, pred, "accuracy", None, "mr")
    score = 100 * sum(g == p for g, p in zip(gold, pred)) / len(gold)
    run.results.write_text(json.dumps({"scores": {"test": {"metric": "accuracy", "score": score}},
                                       "predictions": {"test": entry}}))


def test_the_report_scores_a_cross_validated_seed_by_the_mean_of_its_folds(tmp_path):
    """A seed's score is the mean over its folds (not the pooled accuracy), counted once every fold has
    finished; the paired test pools the folds' items of the seeds both variants finished."""
    from cn3.experiment.report import report

    spec = load_spec(write_spec(tmp_path / "s.yaml", tasks=["mr"], folds={"mr": 2}))
    cells = {c.name: c for c in spec.cells(tmp_path / "runs")}
    gold = {0: ["pos", "neg", "pos", "neg"], 1: ["pos", "neg", "pos", "neg", "pos", "neg"]}
    flip = {"pos": "neg", "neg": "pos"}
    wrong = {  # (variant, seed, fold) -> the items predicted wrong
        ("lstm", 1, 0): [], ("lstm", 1, 1): [0, 1, 2], ("lstm", 2, 0): [0], ("lstm", 2, 1): [0, 1],
        ("nbow", 1, 0): [0, 1], ("nbow", 1, 1): [], ("nbow", 2, 0): [1]}  # nbow seed 2's fold 1 never finished
    for (variant, seed, fold), bad in wrong.items():
        _fold_run(cells[f"mr/{variant}/seed{seed}-fold{fold}"].run_dir, gold[fold],
                  [flip[g] if i in bad else g for i, g in enumerate(gold[fold])])
    md, record = report(spec, list(cells.values()))
    rows = {r["variant"]: r for r in record["rows"]}
    assert rows["lstm"]["seeds"] == {"1": 75.0, "2": pytest.approx((75.0 + 200 / 3) / 2)}  # 100, 50; 75, 66.7
    assert rows["lstm"]["folds"] == [0, 1] and rows["nbow"]["seeds"] == {"1": 75.0}  # seed 2 lacks a fold: not counted
    test = rows["nbow"]["test"]
    assert test["seeds"] == [1] and test["items"] == 10  # both folds' items of seed 1, each once
    assert test["difference"] == pytest.approx(10.0)  # pooled: nbow 8 of 10 right, the LSTM 7 of 10
    assert "| mr (accuracy, test, mean of 2 folds) |" in md and "a seed's score is the mean over its folds" in md
    assert record["cells"] == {"total": 8, "finished": 7}


# ---------------------------------------------------------------- a real grid


@pytest.fixture(scope="module")
def grid(tmp_path_factory, data_root):
    """A 2 variants x 2 seeds TREC grid of tiny models, run through the CLI with --jobs 2."""
    base = tmp_path_factory.mktemp("experiment")
    prepared = base / "trec"
    prepare(PrepareSettings(task="trec", data=data_root, out=prepared, annotator="none"))
    tiny = {"data.prepared": str(prepared), "data.embeddings": None, "data.limit": 150, "train.epochs": 2,
            "model.hidden": 16, "model.char": "none", "model.pos_dim": 0, "model.spell_dim": 0}
    spec = write_spec(base / "tiny.yaml", set=tiny)
    result = invoke("experiment", "run", spec, "--jobs", "2", "--out", base / "runs")
    assert result.exit_code == 0, result.output
    return spec, base / "runs"


def test_a_grid_trains_every_cell_and_skips_them_next_time(grid):
    spec, runs = grid
    cells = load_spec(spec).cells(runs)
    assert all((c.run_dir / "results.json").is_file() for c in cells)
    record = json.loads((runs / "tiny" / "grid.json").read_text())
    assert record["invocations"][0]["jobs"] == 2 and record["invocations"][0]["cells_trained"] == 4
    assert record["invocations"][0]["device"] == (torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu")
    before = {c.name: (c.run_dir / "results.json").stat().st_mtime_ns for c in cells}
    again = invoke("experiment", "run", spec, "--out", runs)
    assert again.exit_code == 0 and "4/4 cells finished" in again.output
    assert before == {c.name: (c.run_dir / "results.json").stat().st_mtime_ns for c in cells}
    rerecord = json.loads((runs / "tiny" / "grid.json").read_text())
    assert rerecord["cells"] == record["cells"]  # still done, with the time of the run that trained them
    assert [i["cells_trained"] for i in rerecord["invocations"]] == [4, 0]


def test_a_cell_whose_config_changed_is_refused(grid, tmp_path):
    spec, runs = grid
    data = yaml.safe_load(spec.read_text())
    data["set"]["model.hidden"] = 32
    changed = tmp_path / "tiny.yaml"
    changed.write_text(yaml.safe_dump(data))
    result = invoke("experiment", "run", changed, "--out", runs)
    assert result.exit_code == 1 and "holds a run with another config" in result.output
    assert "model.hidden" in result.output


def test_a_finished_cell_of_an_earlier_release_still_counts(grid, tmp_path):
    """A cell whose config.yaml predates a config key (here train.deterministic) is read back with the
    key's default, as --resume reads it: still done, not "another config"."""
    import shutil

    spec, runs = grid
    copy = tmp_path / "runs"
    shutil.copytree(runs, copy)
    cell = load_spec(spec).cells(copy)[0]
    saved = yaml.safe_load((cell.run_dir / "config.yaml").read_text())
    del saved["train"]["deterministic"]
    (cell.run_dir / "config.yaml").write_text(yaml.safe_dump(saved))
    result = invoke("experiment", "run", spec, "--out", copy, "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.output.count("done") >= 4 and "another config" not in result.output


def test_a_failing_cell_is_recorded_and_the_grid_goes_on(tmp_path, data_root):
    prepared = tmp_path / "trec"
    prepare(PrepareSettings(task="trec", data=data_root, out=prepared, annotator="none"))
    tiny = {"data.prepared": str(prepared), "data.embeddings": None, "data.limit": 60, "train.max_steps": 2,
            "model.hidden": 8, "model.char": "none", "model.pos_dim": 0, "model.spell_dim": 0}
    # treelstm needs trees, which data prepared without a parser lacks: that cell fails at start
    spec = write_spec(tmp_path / "s.yaml", set=tiny, seeds=[1],
                      variants={"treelstm": {"model.encoder": "treelstm"}, "nbow": {"model.encoder": "nbow"}},
                      baseline="nbow")
    result = invoke("experiment", "run", spec, "--out", tmp_path / "runs")
    assert result.exit_code == 1 and "1 failed" in result.output and "trec/treelstm/seed1" in result.output
    failed = json.loads((tmp_path / "runs/tiny/trec/treelstm/seed1/cell.failed").read_text())
    assert failed["exit_code"] == 1 and any("needs dependency trees" in line for line in failed["log_tail"])
    assert (tmp_path / "runs/tiny/trec/nbow/seed1/results.json").is_file()


def test_a_tuned_grid_runs_tuning_then_seeds_and_a_failed_tuning_leaves_its_seeds_waiting(tmp_path, data_root):
    """nbow tunes two learning rates and trains seed 2 with the better on dev; treelstm cannot train on
    data without trees, so its tuning fails and its seeds wait: exit 1, both named."""
    prepared = tmp_path / "trec"
    prepare(PrepareSettings(task="trec", data=data_root, out=prepared, annotator="none"))
    tiny = {"data.prepared": str(prepared), "data.embeddings": None, "data.limit": 150, "train.epochs": 2,
            "model.hidden": 8, "model.char": "none", "model.pos_dim": 0, "model.spell_dim": 0}
    spec = write_spec(tmp_path / "s.yaml", set=tiny, baseline="nbow", tune={"options": {
        "lr-small": {"train.lr": 0.05}, "lr-big": {"train.lr": 1.0}}},
        variants={"nbow": {"model.encoder": "nbow"}, "treelstm": {"model.encoder": "treelstm"}})
    result = invoke("experiment", "run", spec, "--out", tmp_path / "runs", "--jobs", "2")
    assert result.exit_code == 1, result.output
    assert "2 waiting for tuning" in result.output and "trec/treelstm/tune-lr-small" in result.output
    home = tmp_path / "runs" / "tiny" / "trec" / "nbow"
    dev = {name: json.loads((home / f"tune-{name}" / "results.json").read_text())["scores"]["dev"]["score"]
           for name in ("lr-small", "lr-big")}
    best = max(dev, key=lambda name: (dev[name], name == "lr-small"))
    assert (home / "seed2" / "results.json").is_file() and not (home / "seed1").exists()
    assert (yaml.safe_load((home / "seed2" / "config.yaml").read_text())["train"]["lr"]
            == {"lr-small": 0.05, "lr-big": 1.0}[best])
    report = invoke("experiment", "report", spec, "--runs", tmp_path / "runs", "--resamples", "200")
    assert report.exit_code == 0, report.output
    assert f"**{best} {dev[best]:.2f}**" in report.stdout and "## tuning" in report.stdout
    assert "2/4 cells finished" in report.output  # the table's cells: nbow's two seeds, not the tuning runs


def test_a_stopped_grid_finishes_only_what_was_left_exactly(tmp_path, data_root):
    """SIGTERM to the runner while its second cell trains; running it again skips the first cell and
    resumes the second, whose results then equal an uninterrupted training of the same cell."""
    prepared = tmp_path / "trec"
    prepare(PrepareSettings(task="trec", data=data_root, out=prepared, annotator="none"))
    tiny = {"data.prepared": str(prepared), "data.embeddings": None, "data.limit": 600, "train.epochs": 6,
            "model.hidden": 16, "model.char": "none", "model.pos_dim": 0, "model.spell_dim": 0}
    spec_path = write_spec(tmp_path / "s.yaml", set=tiny, seeds=[1],
                           variants={"lstm": {"model.encoder": "lstm"}, "lstm12": {"model.hidden": 12}})
    cells = load_spec(spec_path).cells(tmp_path / "runs")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "cli", "experiment", "run", str(spec_path), "--out", str(tmp_path / "runs"),
               "--threads", "1"]
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 240
    second = cells[1].run_dir
    while not (second / "latest.pt").is_file():  # the first cell is done, the second has checkpointed
        assert process.poll() is None and time.time() < deadline, process.stdout.read().decode()
        time.sleep(0.1)
    live = json.loads((tmp_path / "runs/tiny/grid.json").read_text())  # recorded as it goes, not only at the end
    assert [live["cells"][c.name]["state"] for c in cells] == ["done", "running"] and len(live["invocations"]) == 1
    process.send_signal(signal.SIGTERM)
    output = process.communicate(timeout=120)[0].decode()
    assert process.returncode == 130, output
    assert (cells[0].run_dir / "results.json").is_file() and not (second / "results.json").is_file()
    first_results = (cells[0].run_dir / "results.json").read_text()

    again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert (cells[0].run_dir / "results.json").read_text() == first_results  # skipped, untouched
    assert "--resume" in (second / "experiment.log").read_text()

    straight = tmp_path / "straight"
    direct = subprocess.run([sys.executable, "-m", "cli", *_with_run_dir(cells[1].command(1, False), straight)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert direct.returncode == 0, direct.stdout + direct.stderr
    resumed, uninterrupted = (json.loads((d / "results.json").read_text()) for d in (second, straight))
    assert resumed["scores"] == uninterrupted["scores"] and resumed["steps"] == uninterrupted["steps"]


def _with_run_dir(args: list[str], run_dir: Path) -> list[str]:
    i = args.index("--run-dir")
    return [*args[:i + 1], str(run_dir), *args[i + 2:]]


def test_the_report_tabulates_the_grid_with_paired_tests(grid, tmp_path):
    import statistics

    spec, runs = grid
    result = invoke("experiment", "report", spec, "--runs", runs, "--out", tmp_path / "report", "--resamples", "1000")
    assert result.exit_code == 0, result.output
    assert "| lstm |" in result.stdout and "| nbow |" in result.stdout and "Holm" in result.stdout
    record = json.loads((tmp_path / "report" / "report.json").read_text())
    assert record["cells"] == {"total": 4, "finished": 4} and record["grid_wall_seconds"] > 0
    rows = {r["variant"]: r for r in record["rows"]}
    cells = load_spec(spec).cells(runs)
    tests = [json.loads((c.run_dir / "results.json").read_text())["scores"]["test"]["score"]
             for c in cells if c.variant == "nbow"]
    assert rows["nbow"]["split"] == "test" and rows["nbow"]["mean"] == pytest.approx(statistics.fmean(tests))
    assert rows["nbow"]["n"] == 2 and rows["lstm"]["test"] is None  # the baseline is not tested against itself
    paired = rows["nbow"]["test"]
    assert paired["seeds"] == [1, 2] and paired["items"] == 2 * 150 and 0.0 <= paired["p"] <= 1.0
    assert paired["ci95"][0] <= paired["difference"] <= paired["ci95"][1] and "welch_p" in paired
    assert paired["p_holm"] == pytest.approx(paired["p"])  # one task: Holm changes nothing
    assert (tmp_path / "report" / "report.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "report" / "report.csv").read_text().startswith("variant,task,split,metric,mean")
    tex = (tmp_path / "report" / "report.tex").read_text()
    assert "\\textbf{" in tex and "$\\pm$" in tex and "±" not in tex


def test_the_report_can_test_against_another_baseline(grid):
    spec, runs = grid
    result = invoke("experiment", "report", spec, "--runs", runs, "--resamples", "200", "--baseline", "nbow")
    assert result.exit_code == 0, result.output
    assert "## against nbow" in result.stdout and "| lstm | " in result.stdout.split("## against nbow")[1]
    out = Path(runs).parent / "vs-nbow"
    lean = invoke("experiment", "report", spec, "--runs", runs, "--resamples", "200", "--baseline", "nbow",
                  "--out", out, "--no-plot")
    assert lean.exit_code == 0, lean.output
    assert sorted(p.name for p in out.iterdir()) == ["report.csv", "report.json", "report.md", "report.tex"]
    wrong = invoke("experiment", "report", spec, "--runs", runs, "--baseline", "nbwo")
    assert wrong.exit_code == 1 and "--baseline nbwo: not a variant of this grid; did you mean 'nbow'?" in wrong.output
    assert "Traceback" not in wrong.output


def test_latex_cells_escape_names_and_symbols():
    from cn3.experiment.report.render import _tex

    assert _tex("conll2000 (span_f1, test)") == r"conll2000 (span\_f1, test)"
    assert _tex(r"\textbf{91.20 ± 0.30 (3)} [×]") == r"\textbf{91.20 $\pm$ 0.30 (3)} [$\times$]"
    assert _tex("12† 50% A&B #1") == r"12$^\dagger$ 50\% A\&B \#1"


# ---------------------------------------------------------------- report --by FIELD, on hand-made cells

BY_TRAIN_LINES, BY_TEST_LINES = 8, 2  # per staged logic file


@pytest.fixture(scope="module")
def tiny_logic(tmp_path_factory, staged):
    """The logic task prepared from the first lines of every staged file: train0-6, test0-12."""
    import gzip

    from data_prep.readers.logic import TEST_MAX_OPS, TRAIN_MAX_OPS

    base = tmp_path_factory.mktemp("logic")
    folder = base / "data" / "logic_inference"
    folder.mkdir(parents=True)
    for kind, last, n_lines in (("train", TRAIN_MAX_OPS, BY_TRAIN_LINES), ("test", TEST_MAX_OPS, BY_TEST_LINES)):
        for n in range(last + 1):
            with gzip.open(staged(f"logic_inference/{kind}{n}.gz"), "rt", encoding="utf-8") as handle:
                lines = [line for _, line in zip(range(n_lines), handle)]
            with gzip.open(folder / f"{kind}{n}.gz", "wt", encoding="utf-8") as handle:
                handle.writelines(lines)
    prepared = base / "prepared"
    prepare(PrepareSettings(task="logic", data=base / "data", out=prepared, annotator="none"))
    return prepared


def fake_cell(cell, prepared: Path, gold: list[str], right: list[bool]) -> None:
    """A finished cell without training: its config names the prepared data, its test predictions are
    the gold label where ``right`` and another relation elsewhere."""
    from cn3.runs.layout import RunDir

    run = RunDir(cell.run_dir)
    run.path.mkdir(parents=True)
    run.config.write_text(yaml.safe_dump({"data": {"task": "logic", "prepared": str(prepared), "limit": 0}}))
    pred = [g if ok else ("#" if g != "#" else "=") for g, ok in zip(gold, right)]
    entry = run.write_predictions("test", gold, pred, "accuracy", None, "logic")
    score = 100 * sum(right) / len(right)
    run.results.write_text(json.dumps({"scores": {"test": {"metric": "accuracy", "score": score}},
                                       "predictions": {"test": entry}}))


@pytest.fixture
def by_grid(tmp_path, tiny_logic):
    """lstm: seed 1 right everywhere, seed 2 wrong on the first item of every length (so 100 and 50 per
    group: 75.00 ± 35.36); cn3: right up to 6 operators, wrong beyond, on both seeds."""
    records = [json.loads(line) for line in (tiny_logic / "test.jsonl").read_text().splitlines()]
    gold = [r["label"] for r in records]
    n_ops = [r["meta"]["n_ops"] for r in records]
    first = [i == 0 or n_ops[i - 1] != n for i, n in enumerate(n_ops)]
    spec_path = write_spec(tmp_path / "by.yaml", name="bylen", tasks=["logic"],
                           variants={"lstm": {"model.encoder": "lstm"}, "cn3": {"model.encoder": "cn3"}})
    spec = load_spec(spec_path)
    for cell in spec.cells(tmp_path / "runs"):
        if cell.variant == "lstm":
            right = [True] * len(gold) if cell.seed == 1 else [not f for f in first]
        else:
            right = [n <= 6 for n in n_ops]
        fake_cell(cell, tiny_logic, gold, right)
    train_ops = {json.loads(line)["meta"]["n_ops"] for line in (tiny_logic / "train.jsonl").read_text().splitlines()}
    assert train_ops == set(range(7)) and sorted(set(n_ops)) == list(range(13))  # what the test relies on
    return spec_path, tmp_path / "runs"


def test_report_by_n_ops_gives_mean_and_std_per_length_and_marks_the_unseen(by_grid, tmp_path):
    spec, runs = by_grid
    out = tmp_path / "out"
    result = invoke("experiment", "report", spec, "--runs", runs, "--by", "n_ops", "--out", out)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| n_ops |"))
    assert header == "| n_ops | " + " | ".join([*map(str, range(7)), *(f"{n}†" for n in range(7, 13))]) + " |"
    lstm = next(line for line in lines if line.startswith("| lstm (2) |"))
    assert lstm == "| lstm (2) | " + " | ".join(["75.00 ± 35.36"] * 7 + ["**75.00 ± 35.36**"] * 6) + " |"
    cn3 = next(line for line in lines if line.startswith("| cn3 (2) |"))
    assert cn3 == "| cn3 (2) | " + " | ".join(["**100.00 ± 0.00**"] * 7 + ["0.00 ± 0.00"] * 6) + " |"
    items = next(line for line in lines if line.startswith("| items |"))
    assert items == "| items | " + " | ".join([str(BY_TEST_LINES)] * 13) + " |"
    assert "†: no training item has this value" in result.stdout and "Holm over the groups" in result.stdout
    # cn3 against lstm, both seeds pooled (4 items a group): right 4 against 3 up to 6 operators, 0
    # against 3 beyond; exact randomization over the items they score differently (1 and 3 of them).
    # Welch across the seeds' group scores, by hand: (100, 100) against (100, 50) is t = 25 / 25 = 1
    # on 1 df, p = 0.5; (0, 0) against (100, 50) is t = -3 on 1 df, p = 1 - 2 atan(3) / pi = 0.2048
    tests = next(line for line in lines if line.startswith("| cn3 |"))
    assert tests == "| cn3 | " + " | ".join(["+25.00 (1.0) W 0.50"] * 7 + ["-75.00 (1.0) W 0.20"] * 6) + " |"

    record = json.loads((out / "by-n_ops.json").read_text())
    assert record["tasks"]["logic"]["unseen_in_training"] == {str(n): n > 6 for n in range(13)}
    row = next(r for r in record["rows"] if r["variant"] == "lstm" and r["group"] == "9")
    assert row["seeds"] == {"1": 100.0, "2": 50.0} and row["mean"] == 75.0 and row["n"] == 2
    assert row["std"] == pytest.approx(35.3553, abs=1e-4) and row["unseen_in_training"] is True
    csv_lines = (out / "by-n_ops.csv").read_text().splitlines()
    assert csv_lines[0].startswith("task,split,metric,field,group,unseen_in_training,items,variant,mean,std")
    assert any(line.startswith("logic,test,accuracy,n_ops,12,True,2,cn3,0.0,0.0,2,1:0.0;2:0.0,-75.0,")
               for line in csv_lines)
    test = next(r for r in record["rows"] if r["variant"] == "cn3" and r["group"] == "12")["test"]
    assert test["method"] == "exact randomization" and test["items"] == 4 and test["p"] == 0.25
    assert test["welch_p"] == pytest.approx(1 - 2 * math.atan(3) / math.pi)
    assert (out / "by-n_ops.md").read_text() == result.stdout
    assert (out / "by-n_ops.png").read_bytes()[:4] == b"\x89PNG"
    assert "$\\pm$" in (out / "by-n_ops.tex").read_text()


def test_report_by_an_unknown_field_names_it_and_the_available_ones(by_grid):
    spec, runs = by_grid
    result = invoke("experiment", "report", spec, "--runs", runs, "--by", "depth")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.strip().splitlines() == [
        "error: logic: --by depth: no item has this field; the items have: n_ops, n_ops_pair, length, source"]


def test_grid_wall_time_counts_overlapping_runs_once():
    from cn3.experiment.report.collect import grid_wall_seconds

    runs = [{"started": "2026-11-24T10:00:00", "wall_seconds": 600.0},  # 10:00-10:10
            {"started": "2026-11-24T10:05:00", "wall_seconds": 600.0},  # 10:05-10:15, beside the first
            {"started": "2026-11-24T10:07:00", "wall_seconds": 60.0},  # inside both
            {"started": "2026-11-25T09:00:00", "wall_seconds": 30.5}]  # the next session
    assert grid_wall_seconds(runs) == 900 + 30.5
    assert grid_wall_seconds([]) == 0


def test_one_seed_has_no_spread_in_the_table():
    """A cell with one finished seed prints its mean alone: "± 0.00" would claim a spread never measured."""
    from cn3.experiment.report.collect import TaskColumn
    from cn3.experiment.report.render import render, rows

    spec = load_spec("logic-length")
    columns = {"logic": TaskColumn("logic", "test", "accuracy", {"lstm": {1: 80.0}, "transformer": {1: 50.0, 2: 52.0}})}
    table = render(spec, columns)
    assert "| lstm | **80.00 (1)** [×] |" in table and "| transformer | 51.00 ± 1.41 (2) [×] |" in table
    records = {r["variant"]: r for r in rows(spec, columns)}
    assert records["lstm"]["std"] is None and records["transformer"]["std"] == pytest.approx(1.41421, abs=1e-5)


def test_a_cell_another_process_trains_is_left_to_it(tmp_path, data_root):
    """Two runners may share a grid: a cell whose run directory a trainer holds is "elsewhere", neither
    trained again nor marked failed; a second trainer of the same directory is refused at once."""
    from cn3.runs.layout import RunDir

    prepared = tmp_path / "trec"
    prepare(PrepareSettings(task="trec", data=data_root, out=prepared, annotator="none"))
    tiny = {"data.prepared": str(prepared), "data.embeddings": None, "data.limit": 60, "train.max_steps": 2,
            "model.hidden": 8, "model.char": "none", "model.pos_dim": 0, "model.spell_dim": 0}
    spec = write_spec(tmp_path / "s.yaml", set=tiny, seeds=[1],
                      variants={"nbow": {"model.encoder": "nbow"}, "lstm": {"model.encoder": "lstm"}}, baseline="nbow")
    held, free = load_spec(spec).cells(tmp_path / "runs")
    with RunDir(held.run_dir).training():
        listed = invoke("experiment", "run", spec, "--out", tmp_path / "runs", "--dry-run")
        assert listed.exit_code == 0 and "elsewhere" in listed.output
        result = invoke("experiment", "run", spec, "--out", tmp_path / "runs")
        assert result.exit_code == 0, result.output
        assert "1/2 cells finished, 1 being trained by another process" in " ".join(result.output.split())
        refused = invoke("train", "--task", "trec", "--prepared", prepared, "--run-dir", held.run_dir)
        assert refused.exit_code == 1 and "another process is training into" in refused.output
    assert (free.run_dir / "results.json").is_file()
    assert not (held.run_dir / "results.json").exists() and not (held.run_dir / "cell.failed").exists()
    assert not RunDir(held.run_dir).busy()  # released with the block
    recorded = json.loads((tmp_path / "runs/tiny/grid.json").read_text())["cells"]
    assert held.name not in recorded and recorded[free.name]["state"] == "done"  # the other runner records it


def test_p_values_below_a_thousandth_are_not_printed_as_zero():
    from cn3.experiment.report.render import _p_text

    test = {"difference": 2.35, "ci95": [1.97, 2.73], "p": 1 / 10_001, "p_holm": 3 / 10_001, "welch_p": 0.0412}
    assert _p_text(test) == "+2.35 [+1.97, +2.73] p 0.0001 (Holm 0.0003)*, Welch 0.041"
    assert _p_text({**test, "p": 0.2, "p_holm": 0.4, "welch_p": None}) == "+2.35 [+1.97, +2.73] p 0.20 (Holm 0.40)"


def test_a_cell_another_runner_finished_after_the_listing_is_not_trained_again(tmp_path):
    from cn3.experiment.launchers import LocalLauncher
    from cn3.experiment.runner import CellState, _start

    cell = load_spec(write_spec(tmp_path / "s.yaml")).cells(tmp_path / "runs")[0]
    state = CellState(cell, "queued")  # listed while nobody had trained it
    cell.run_dir.mkdir(parents=True)
    (cell.run_dir / "results.json").write_text(json.dumps({"scores": {"test": {"score": 90.0}}}))
    _start(state, 1, LocalLauncher())
    assert state.job is None and (state.state, state.score) == ("skipped", "test 90.00")
    assert not (cell.run_dir / "experiment.log").exists()


def test_a_runner_records_only_the_cells_it_started_over_another_runners_entries(tmp_path):
    """Two runners of one grid: what B merely listed (queued) does not overwrite A's entry for it."""
    from cn3.experiment.runner import CellState, _write_grid

    spec = load_spec(write_spec(tmp_path / "s.yaml"))
    first, second = spec.cells(tmp_path / "runs")[:2]
    _write_grid(spec, [first], [CellState(first, "done", submitted=1.0, started=1.0, seconds=12.0)], 0.0, 1, 1, "A")
    listed, started = CellState(first, "queued"), CellState(second, "running", submitted=2.0, started=2.0)
    _write_grid(spec, [first, second], [listed, started], 0.0, 1, 1, "B")
    record = json.loads((first.run_dir.parents[2] / "grid.json").read_text())
    assert record["cells"][first.name] == {"run_dir": str(first.run_dir), "state": "done", "seconds": 12.0}
    assert record["cells"][second.name]["state"] == "running"
    assert [i["id"] for i in record["invocations"]] == ["A", "B"]


def test_a_cell_that_a_finished_run_already_is_is_adopted_not_trained(grid, tmp_path):
    """Another grid under the same --out with one cell of the same config as the tiny grid's nbow seed 1
    (another variant name) and one of another config: the first is adopted (its files linked in,
    reused.json naming the run, the same results), the second trains; --no-reuse would train both."""
    import shutil

    spec, runs = grid
    copy = tmp_path / "runs"
    shutil.copytree(runs, copy)
    tiny = yaml.safe_load(spec.read_text())["set"]
    overlap = write_spec(tmp_path / "overlap.yaml", name="overlap", set=tiny, seeds=[1], baseline="again",
                         variants={"again": {"model.encoder": "nbow"},
                                   "wider": {"model.encoder": "nbow", "model.hidden": 12}})
    again, wider = load_spec(overlap).cells(copy)
    twin = load_spec(spec).cells(copy)[2]
    assert twin.name == "trec/nbow/seed1"

    dry = invoke("experiment", "run", overlap, "--out", copy, "--jobs", "2", "--dry-run")
    assert dry.exit_code == 0 and "reusable" in dry.output and "queued" in dry.output
    assert "reusable" not in invoke("experiment", "run", overlap, "--out", copy, "--jobs", "2", "--dry-run",
                                    "--no-reuse").output

    (again.run_dir.parent / "seed1.reusing").mkdir(parents=True)  # left by an adoption that was killed
    result = invoke("experiment", "run", overlap, "--out", copy, "--jobs", "2")
    assert result.exit_code == 0, result.output
    assert "2/2 cells finished (1 reused" in result.output
    assert (again.run_dir / "results.json").read_bytes() == (twin.run_dir / "results.json").read_bytes()
    assert json.loads((again.run_dir / "reused.json").read_text())["from"] == str(twin.run_dir)
    assert not (again.run_dir.parent / "seed1.reusing").exists()
    assert not (wider.run_dir / "reused.json").exists() and (wider.run_dir / "results.json").is_file()
    record = json.loads((copy / "overlap" / "grid.json").read_text())
    assert record["cells"][again.name]["reused_from"] == str(twin.run_dir)
    report = invoke("experiment", "report", overlap, "--runs", copy, "--resamples", "200")
    assert report.exit_code == 0 and f"{again.name} is {twin.run_dir}" in report.stdout


def test_a_variant_without_its_baseline_says_so():
    from cn3.experiment.report.collect import TaskColumn
    from cn3.experiment.report.render import render

    columns = {"logic": TaskColumn("logic", "test", "accuracy", {"transformer": {1: 50.0}})}
    assert "| transformer | no lstm run yet |" in render(load_spec("logic-length"), columns)


def test_the_report_gives_the_mean_local_gate_of_hybrid_runs(tmp_path):
    """xu-window's cells record their mean local gate on val (results.json ``gates``); the report pairs
    it with the window: mean ± std over seeds, and per gated layer the mean over seeds."""
    from cn3.experiment.report.collect import gate_rows
    from cn3.experiment.report.render import render_gates

    spec = load_spec("xu-window")
    cells = spec.cells(tmp_path, only={"variant": {"m1", "m2"}, "seed": {"1"}})
    for cell, gates in zip(cells, [{"mean": 0.5, "per_layer": [0.4, 0.6]}, {"mean": 0.7, "per_layer": [0.6, 0.8]}]):
        cell.run_dir.mkdir(parents=True)
        (cell.run_dir / "results.json").write_text(json.dumps({"scores": {"val": {"bleu": 30.0}},
                                                                 "gates": {"split": "val", **gates}}))
    rows_ = gate_rows(cells)
    assert [(r["variant"], r["seeds"]) for r in rows_] == [("m1", {1: 0.5}), ("m2", {1: 0.7})]
    rows_[0]["seeds"][2], rows_[0]["per_layer"][2] = 0.3, [0.2, 0.4]  # a second seed of m1
    md = render_gates(rows_, "md")
    assert "## mean local gate g on val" in md
    assert "| m1 | multi30k | 0.400 ± 0.141 (2) | 0.300 / 0.500 |" in md  # std of 0.5, 0.3 = 0.1414
    assert "| m2 | multi30k | 0.700 (1) | 0.600 / 0.800 |" in md  # one seed: no spread
    assert r"0.400 $\pm$ 0.141 (2)" in render_gates(rows_, "latex")
