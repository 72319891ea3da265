"""Resolve a run config: defaults <- cn3/configs/<task>.yaml <- --config FILE <- flags <- --set overrides.

The tuned configs are package data (``cn3/configs``, declared in pyproject.toml), so an installed
cn3 finds them too; a registered task without its tuned config is an error, never a silent fall back
to the dataclass defaults.
"""

from __future__ import annotations

from pathlib import Path

from cn3.config import CONFIG_DIR, ConfigError, resolve
from cn3.sentence.config import RunConfig
from data_prep.tasks import TASKS


def task_config_path(task: str) -> Path | None:
    """``cn3/configs/<task>.yaml`` (or the task's shared ``TaskSpec.config``, e.g. ``probe.yaml`` for
    the probing tasks); ``None`` for a task without one (``custom``).

    Raises:
        ConfigError: ``task`` is a registered task and its tuned config is missing (a broken
            installation: training it on the dataclass defaults would look like a result).
    """
    stem = (TASKS[task].config or task) if task in TASKS else task
    path = CONFIG_DIR / f"{stem}.yaml"
    if path.is_file():
        return path
    if task in TASKS:
        raise ConfigError(f"the tuned config of task {task!r} is missing: {path} does not exist "
                          "(reinstall cn3, or pass --config FILE)")
    return None


def resolve_config(task: str | None, config_file: Path | None, flags: dict, overrides: list[str]) -> RunConfig:
    """Build a sentence run's config with :func:`cn3.config.resolve`.

    Args:
        task: ``--task`` (may be ``None`` when the config file names it).
        config_file: ``--config``; without it ``cn3/configs/<task>.yaml`` (required for a registered task).
        flags: dotted keys set by dedicated CLI flags (``{"data.prepared": ..., "train.seed": ...}``);
            ``None`` values are ignored.
        overrides: ``--set key=value`` strings, applied last.
    """
    if config_file is None and task is not None:
        config_file = task_config_path(task)
    return resolve(RunConfig, config_file, {"data.task": task, **flags}, overrides)
