"""Typed configs: YAML + --set overrides, named errors, every shipped config valid."""

from pathlib import Path

import pytest
import torch

import cn3.sentence.resolve
from cn3.config import CONFIG_DIR, ConfigError, apply_overrides, parse_override
from cn3.sentence.resolve import resolve_config
from data_prep.tasks import TASKS


def test_defaults_and_task_config():
    cfg = resolve_config("trec", None, {}, [])
    assert cfg.data.task == "trec" and cfg.model.char == "cnn"  # from cn3/configs/trec.yaml
    assert cfg.train.optimizer == "adadelta"


def test_overrides_are_typed():
    cfg = resolve_config("trec", None, {"train.seed": 7}, ["model.graph_layers=2", "train.lr=0.5",
                                                           "model.edge_attrs=true", "data.embeddings=null"])
    assert cfg.model.graph_layers == 2 and cfg.train.lr == 0.5 and cfg.model.edge_attrs is True
    assert cfg.train.seed == 7 and cfg.data.embeddings is None


@pytest.mark.parametrize("override, message", [
    ("model.hiden=3", "did you mean 'model.hidden'"),
    ("modle.hidden=3", "unknown key 'modle'"),
    ("model.hidden=big", "model.hidden: expected int"),
    ("model.encoder=rnnn", "unknown encoder 'rnnn'; did you mean 'rnn'?"),
    ("train.lr=-1", "train.lr must be positive"),
    ("model.dropout=1.5", "model.dropout must be in [0, 1)"),
    ("train.loader_workers=-1", "train.loader_workers must be >= 0"),
    ("noequals", "expected key=value"),
])
def test_bad_values_name_the_key(override, message):
    with pytest.raises(ConfigError) as err:
        resolve_config("trec", None, {}, [override])
    assert message in str(err.value)


def test_loader_workers_default_to_none_on_cpu_and_two_on_cuda():
    t = resolve_config("trec", None, {}, []).train
    assert t.loader_workers is None
    assert t.workers(torch.device("cpu")) == 0 and t.workers(torch.device("cuda")) == 2
    t.loader_workers = 3
    assert t.workers(torch.device("cpu")) == 3


def test_bad_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("model:\n  hidden: [1, 2\n")
    with pytest.raises(ConfigError, match=r"bad.yaml, line \d+"):
        resolve_config(None, path, {}, [])


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_task_config_is_valid(path: Path):
    users = [name for name, spec in TASKS.items() if (spec.config or name) == path.stem]
    if users == [path.stem]:  # a task's own config names it
        assert resolve_config(None, path, {}, []).data.task == path.stem
    for task in users:  # a shared one (probe.yaml) is found through each task that uses it
        assert resolve_config(task, None, {}, []).data.task == task


def test_every_registered_task_has_a_tuned_config():
    assert {path.stem for path in CONFIG_DIR.glob("*.yaml")} == {spec.config or name for name, spec in TASKS.items()}


def test_a_missing_tuned_config_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(cn3.sentence.resolve, "CONFIG_DIR", tmp_path)  # as in an installation without package data
    with pytest.raises(ConfigError, match=r"tuned config of task 'trec' is missing: .*trec.yaml"):
        resolve_config("trec", None, {}, [])
    given = tmp_path / "given.yaml"
    given.write_text("model:\n  hidden: 7\n")
    assert resolve_config("trec", given, {}, []).model.hidden == 7  # --config needs no tuned file
    assert resolve_config("custom", None, {}, []).data.task == "custom"  # no tuned config to miss


def test_parse_override_yaml_values():
    assert resolve_config("trec", None, {}, ["train.lr=1e-3"]).train.lr == 1e-3  # YAML 1.1 says str
    assert parse_override("a=hello world") == (["a"], "hello world")
    data = apply_overrides({"a": {"b": 1}}, ["a.c=2"])
    assert data == {"a": {"b": 1, "c": 2}}
