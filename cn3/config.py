"""Typed configuration: YAML is the source of truth, ``--set key=value`` overrides, named errors.

A config is a tree of dataclasses. :func:`from_dict` checks every key and type and raises
:class:`ConfigError` naming the offending key (with a suggestion for typos) and the file.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from cn3.util.errors import ConfigError

T = TypeVar("T")

#: The shipped configs (package data): one per sentence task, ``nmt/`` for translation, ``experiments/``
CONFIG_DIR = Path(__file__).resolve().parent / "configs"


def _type_name(tp) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp, key: str):
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key)
            except ConfigError as err:
                errors.append(str(err))
        raise ConfigError(errors[0])
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise ConfigError(f"{key}: {value!r} is not one of {', '.join(map(repr, allowed))}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        (item_type, *_) = typing.get_args(tp) or (Any,)
        return [_coerce(v, item_type, f"{key}[{i}]") for i, v in enumerate(value)]
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping of {tp.__name__} fields, got {value!r}")
        return from_dict(tp, value, prefix=key + ".")
    if tp is Any:
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp is float and isinstance(value, str):
        try:  # YAML 1.1 reads "1e-3" (no dot) as a string
            return float(value)
        except ValueError:
            pass
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp is str and isinstance(value, str):
        return value
    if tp is Path and isinstance(value, (str, Path)):
        return Path(value)
    raise ConfigError(f"{key}: expected {_type_name(tp)}, got {value!r}")


def from_dict(cls: type[T], data: dict, prefix: str = "") -> T:
    """Build dataclass ``cls`` from ``data``; unknown keys and wrong types raise ``ConfigError``."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in data:
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"; did you mean '{prefix}{close[0]}'?" if close else f"; known: {', '.join(sorted(names))}"
            raise ConfigError(f"unknown key '{prefix}{key}'{hint}")
    kwargs = {name: _coerce(value, hints[name], prefix + name) for name, value in data.items()}
    obj = cls(**kwargs)
    validate = getattr(obj, "validate", None)
    if validate is not None:
        validate()
    return obj


def to_dict(obj) -> dict:
    def convert(v):
        if isinstance(v, Path):
            return str(v)
        if isinstance(v, dict):
            return {k: convert(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [convert(x) for x in v]
        return v

    return convert(dataclasses.asdict(obj))


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"model.hidden=200"`` -> ``(["model", "hidden"], 200)``; the value is parsed as YAML."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected key=value, e.g. --set train.lr=0.5")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"--set {text!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Set each ``key.path=value`` in the nested dict ``data`` (validation happens in from_dict)."""
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--set {text!r}: '{part}' is not a section")
            node = child
        node[path[-1]] = value
    return data


def load_yaml(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: not valid YAML ({getattr(err, 'problem', err)})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def merge(base: dict, update: dict) -> dict:
    """Recursive dict merge (``update`` wins)."""
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def resolve(cls: type[T], config_file: str | Path | None, flags: dict, overrides: list[str]) -> T:
    """The one config resolution of every command: ``cls``'s defaults <- ``config_file`` <- ``flags``
    (dotted keys of dedicated CLI options, ``None`` values ignored) <- ``--set`` overrides; errors
    name the key and where it came from."""
    data = to_dict(cls())
    if config_file is not None:
        data = merge(data, load_yaml(config_file))
    for key, value in flags.items():
        if value is not None:
            section, name = key.split(".")
            data.setdefault(section, {})[name] = str(value) if isinstance(value, Path) else value
    apply_overrides(data, overrides)
    where = f" (in {config_file} or --set)" if config_file else " (in --set)"
    try:
        return from_dict(cls, data)
    except ConfigError as err:
        raise ConfigError(f"{err}{where}") from None
