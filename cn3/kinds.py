"""The kinds of run, collected above what they build, and :func:`train`.

Each kind is a :class:`~cn3.runs.kinds.RunKind` in its own package (:mod:`cn3.sentence.kind`,
:mod:`cn3.nmt.kind`); :data:`KINDS` holds them, and this module is the one place that decides which
kind a run directory, a config or an experiment task is. It imports the kinds, the trainer and the run
directory; nothing below it imports it back (``tests/project/test_layering.py``), so the trainer, handed
a kind, never climbs up to the packages that build tasks.

A third kind: a :class:`~cn3.runs.kinds.RunKind` subclass in its package and one entry here.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from cn3.config import ConfigError
from cn3.nmt.kind import TRANSLATION, TRANSLATION_TASKS
from cn3.runs.kinds import RunKind
from cn3.runs.layout import RunDir
from cn3.sentence.kind import SENTENCE
from cn3.util.errors import RunError

#: every kind of run by name; the first is the default kind of an experiment task no kind claims
KINDS: dict[str, RunKind] = {kind.name: kind for kind in (SENTENCE, TRANSLATION)}

__all__ = ["KINDS", "SENTENCE", "TRANSLATION", "TRANSLATION_TASKS", "RunKind", "kind_of_config", "kind_of_run",
           "kind_of_settings", "kind_of_task", "train"]


def kind_of_task(task: str) -> RunKind:
    """The kind of run that trains ``task`` (an experiment spec's task name): the kind that lists it,
    else the default kind (sentence tasks are those of ``cn3 tasks``)."""
    default = next(iter(KINDS.values()))
    return next((kind for kind in KINDS.values() if task in kind.tasks), default)


def kind_of_settings(cfg) -> RunKind:
    """The kind of run a resolved config object trains (an instance of the kind's config class).

    Raises:
        ConfigError: ``cfg`` is the config of no kind.
    """
    for kind in KINDS.values():
        if isinstance(cfg, kind.config_class()):
            return kind
    raise ConfigError(f"not a cn3 run config: {type(cfg).__name__}")


def kind_of_config(config: dict) -> RunKind:
    """The kind of a resolved config, as a run's ``config.yaml`` holds it: translation configs name
    their languages (``data.src_lang``), sentence configs their task (``data.task``).

    Raises:
        ConfigError: the data section names neither.
    """
    data = config.get("data") if isinstance(config, dict) else None
    if isinstance(data, dict):
        for kind in KINDS.values():
            if kind.owns_config(data):
                return kind
    raise ConfigError("not a cn3 run config: its data section names neither a task nor the languages")


def kind_of_run(path: str | Path) -> RunKind:
    """The kind of the run in directory ``path``, from its ``config.yaml``.

    Raises:
        RunError: no such directory, or no ``config.yaml`` in it.
        ConfigError: the ``config.yaml`` is not YAML or not a run config.
    """
    path = Path(path)
    config = RunDir(path).config
    if not path.is_dir():
        raise RunError(f"run directory not found: {path}")
    if not config.is_file():
        raise RunError(f"{path} has no config.yaml: not a cn3 run directory")
    try:
        return kind_of_config(yaml.safe_load(config.read_text(encoding="utf-8")))
    except yaml.YAMLError as err:
        raise ConfigError(f"{config} is not valid YAML ({err})") from None
    except ConfigError as err:
        raise ConfigError(f"{config}: {err}") from None


def train(cfg, run_path: str | Path, resume: bool = False, device_name: str = "auto",
          command: str | None = None) -> dict:
    """Train a resolved config (a sentence :class:`~cn3.sentence.config.RunConfig` or a translation
    :class:`~cn3.nmt.config.NMTConfig`) into ``run_path``: :func:`cn3.train.trainer.train_kind` with the
    config's kind, whose docstring has the arguments, the result and what is raised."""
    from cn3.train.trainer import train_kind  # torch: loaded when a run trains, not when a kind is asked

    return train_kind(kind_of_settings(cfg), cfg, run_path, resume, device_name, command)
