"""One place decides what kind of run a directory, a config or an experiment cell is."""

from __future__ import annotations

from pathlib import Path

import pytest

from cn3.config import ConfigError
from cn3.kinds import SENTENCE, TRANSLATION, kind_of_config, kind_of_run, kind_of_task
from cn3.util.errors import RunError

RECORDS = Path(__file__).resolve().parents[2] / "docs" / "runs" / "experiments"


def test_a_run_directory_says_its_kind_by_its_config():
    """The committed records (no checkpoints, no subword model beside them) still tell their kind."""
    assert kind_of_run(RECORDS / "xu-table1" / "multi30k" / "local" / "seed1") is TRANSLATION
    assert kind_of_run(RECORDS / "liu-table3-cpu" / "trec" / "cn3" / "seed1") is SENTENCE


def test_what_is_not_a_run_is_named(tmp_path):
    with pytest.raises(RunError, match="run directory not found"):
        kind_of_run(tmp_path / "nowhere")
    with pytest.raises(RunError, match="has no config.yaml: not a cn3 run directory"):
        kind_of_run(tmp_path)
    (tmp_path / "config.yaml").write_text("data: {words: 3}\n")
    with pytest.raises(ConfigError, match="config.yaml: not a cn3 run config"):
        kind_of_run(tmp_path)
    with pytest.raises(ConfigError, match="not a cn3 run config"):
        kind_of_config(["a list"])


def test_each_kind_owns_its_config_resume_keys_and_command():
    from cn3.nmt.config import NMTConfig
    from cn3.sentence.config import RunConfig
    from cn3.train.kinds import LOOP_RESUMABLE as RESUMABLE_CHANGES
    from cn3.train.kinds import TRANSLATION_RESUMABLE as NMT_RESUMABLE

    assert kind_of_task("multi30k") is TRANSLATION and kind_of_task("trec") is SENTENCE
    assert (SENTENCE.config_class(), TRANSLATION.config_class()) == (RunConfig, NMTConfig)
    assert (SENTENCE.resumable_changes(), TRANSLATION.resumable_changes()) == (RESUMABLE_CHANGES, NMT_RESUMABLE)
    assert (SENTENCE.command, TRANSLATION.command) == (("train",), ("nmt", "train"))
    cfg = SENTENCE.resolve("trec", {"train.seed": 3}, ["model.encoder=lstm"])
    assert isinstance(cfg, RunConfig) and cfg.train.seed == 3 and cfg.model.encoder == "lstm"
    assert isinstance(TRANSLATION.resolve("multi30k", {}, ["model.encoder=local"]), NMTConfig)


def test_each_kind_names_its_default_run_directory():
    sentence = SENTENCE.resolve("mr", {"train.seed": 2}, ["data.fold=3"])
    assert SENTENCE.default_run_dir(sentence) == Path("runs/mr-cn3-fold3-seed2")
    assert SENTENCE.default_run_dir(SENTENCE.resolve("trec", {}, [])) == Path("runs/trec-cn3-seed1")
    translation = TRANSLATION.resolve("multi30k", {"train.seed": 4}, ["model.encoder=hybrid"])
    assert TRANSLATION.default_run_dir(translation) == Path("runs/nmt-multi30k-hybrid-seed4")
