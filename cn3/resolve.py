"""Resolve a run config: defaults <- configs/<task>.yaml <- --config FILE <- flags <- --set overrides."""

from __future__ import annotations

from pathlib import Path

from cn3.config import ConfigError, apply_overrides, from_dict, load_yaml, merge, to_dict
from cn3.run_config import RunConfig

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


def task_config_path(task: str) -> Path | None:
    path = CONFIG_DIR / f"{task}.yaml"
    return path if path.is_file() else None


def resolve_config(task: str | None, config_file: Path | None, flags: dict, overrides: list[str]) -> RunConfig:
    """Build the run config.

    Args:
        task: ``--task`` (may be ``None`` when the config file names it).
        config_file: ``--config``; without it ``configs/<task>.yaml`` is used when it exists.
        flags: dotted keys set by dedicated CLI flags (``{"data.prepared": ..., "train.seed": ...}``);
            ``None`` values are ignored.
        overrides: ``--set key=value`` strings, applied last.
    """
    data = to_dict(RunConfig())
    if config_file is None and task is not None:
        config_file = task_config_path(task)
    if config_file is not None:
        data = merge(data, load_yaml(config_file))
    if task is not None:
        data["data"]["task"] = task
    for key, value in flags.items():
        if value is not None:
            section, name = key.split(".")
            data[section][name] = str(value) if isinstance(value, Path) else value
    apply_overrides(data, overrides)
    where = f" (in {config_file} or --set)" if config_file else " (in --set)"
    try:
        return from_dict(RunConfig, data)
    except ConfigError as err:
        raise ConfigError(f"{err}{where}") from None
