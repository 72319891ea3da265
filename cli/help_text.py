"""Command help from the docstrings, with prose paragraphs unwrapped: Typer keeps a docstring's line
breaks, which print ragged in a narrow terminal. A paragraph with an indented line (an example) or
a list item keeps its lines.
"""

from __future__ import annotations

import inspect

import typer


def unwrap(doc: str) -> str:
    """``doc`` with the lines of each prose paragraph joined by spaces."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(p if _keeps_lines(p) else " ".join(line.strip() for line in p.splitlines())
                       for p in paragraphs)


def _keeps_lines(paragraph: str) -> bool:
    return any(line[:1].isspace() or line.startswith(("- ", "* ", "\b")) for line in paragraph.splitlines())


def unwrap_help(app: typer.Typer) -> None:
    """Give every command of ``app`` and of its sub-apps its docstring, unwrapped, as help."""
    for info in app.registered_commands:
        if info.help is None and info.callback is not None and info.callback.__doc__:
            info.help = unwrap(info.callback.__doc__)
    for group in app.registered_groups:
        unwrap_help(group.typer_instance)
