"""The encoder zoo's names and task levels, read from its source without importing it (no torch).

Each encoder registers itself in its own module of ``cn3/encoders`` with
``@register("name", "paper", levels=..., table_order=...)`` (:func:`cn3.encoders.registry.register`).
The CLI needs the names to render its help (``cn3 nmt train --encoder``) and must not import torch to do
so; rather than a hand-kept copy, this module parses those decorators with :mod:`ast`. Adding an encoder
is then one file: its module under ``cn3/encoders`` (``tests/project/test_registries.py`` checks that
this table equals the imported registry).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

#: Every task level, and what a user calls it.
LEVELS = ("graph", "pair", "node", "translation")
LEVEL_NAMES = {"graph": "sentence", "pair": "pair", "node": "tagging", "translation": "translation"}
#: The levels of the sentence tasks (every level but translation).
SENTENCE_LEVELS = ("graph", "pair", "node")

ENCODERS_DIR = Path(__file__).resolve().parents[1] / "encoders"
_NAMED_LEVELS = {"LEVELS": LEVELS, "SENTENCE_LEVELS": SENTENCE_LEVELS}


def _levels(node: ast.expr, where: str) -> tuple[str, ...]:
    """The levels a ``levels=`` argument spells: ``LEVELS``, ``SENTENCE_LEVELS`` or a literal tuple/list."""
    if isinstance(node, ast.Name) and node.id in _NAMED_LEVELS:
        return _NAMED_LEVELS[node.id]
    try:
        levels = tuple(ast.literal_eval(node))
    except ValueError:
        raise ValueError(f"{where}: levels= must be LEVELS, SENTENCE_LEVELS or a literal tuple of "
                         f"{LEVELS}") from None
    if not set(levels) <= set(LEVELS):
        raise ValueError(f"{where}: unknown level in {levels} (known: {LEVELS})")
    return levels


def _registrations(path: Path) -> list[tuple[str, tuple[str, ...], int]]:
    """``(name, levels, table_order)`` of every ``@register(...)`` in ``path``, in source order."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            continue
        for deco in node.decorator_list:
            if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Name) and deco.func.id == "register"):
                continue
            where = f"{path.name}:{deco.lineno}"
            keywords = {k.arg: k.value for k in deco.keywords}
            levels = _levels(keywords["levels"], where) if "levels" in keywords else LEVELS
            order = ast.literal_eval(keywords["table_order"]) if "table_order" in keywords else 100
            found.append((deco.lineno, ast.literal_eval(deco.args[0]), levels, order))
    return [entry[1:] for entry in sorted(found)]


@cache
def encoder_levels() -> dict[str, tuple[str, ...]]:
    """``{name: levels}`` of every registered encoder, in the registry's order (``table_order``, ties in
    module then source order, as :mod:`cn3.encoders` imports them).

    Raises:
        ValueError: a ``register`` call whose levels are not spelled as this module can read.
    """
    entries = []
    for path in sorted(ENCODERS_DIR.glob("*.py")):
        entries.extend(_registrations(path))
    entries.sort(key=lambda entry: entry[2])  # stable: ties keep module and source order
    return {name: levels for name, levels, _ in entries}


def encoders_serving(level: str) -> tuple[str, ...]:
    """The names of the encoders that serve ``level`` (one of :data:`LEVELS`), in registry order."""
    return tuple(name for name, levels in encoder_levels().items() if level in levels)
