"""Bad input ends a command with one clear line on stderr and exit code 1, never a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.markup import escape

from cn3.util.console import console
from cn3.util.errors import Cn3Error

#: Error types whose message is meant for the user (file, line, what was expected).
USER_ERRORS: tuple[type[Exception], ...] = (Cn3Error,)


@contextmanager
def user_errors() -> Iterator[None]:
    try:
        yield
    except USER_ERRORS as err:
        console.quiet = False  # a torchrun rank other than 0 is quiet, but not about its own error
        console.print(f"[bold red]error:[/] {escape(str(err))}", highlight=False, soft_wrap=True)
        raise typer.Exit(err.exit_code) from None
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: nothing was written")
        raise typer.Exit(130) from None
