"""``cn3 checkpoint upgrade``: rewrite the checkpoints of earlier cn3 releases in plain forms."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from cli.errors import user_errors
from cn3.config import ConfigError
from cn3.util.console import console

checkpoint_app = typer.Typer(
    help="Checkpoints (best.pt, latest.pt): convert those of earlier cn3 releases.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: the checkpoints a run directory holds
CHECKPOINT_NAMES = ("best.pt", "latest.pt")


def checkpoints_under(path: Path) -> list[Path]:
    """``path`` itself when it is a file, else every ``best.pt``/``latest.pt`` in it or below it
    (a run, or a grid of runs), in path order."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ConfigError(f"{path} does not exist")
    found = sorted(p for name in CHECKPOINT_NAMES for p in path.rglob(name) if p.is_file())
    if not found:
        raise ConfigError(f"{path} holds no checkpoint ({' or '.join(CHECKPOINT_NAMES)}) in it or below it")
    return found


@checkpoint_app.command("upgrade")
def upgrade_command(
    path: Path = typer.Argument(..., help="A run directory, a directory of runs (an experiment grid) or one .pt file."),
    trust: bool = typer.Option(False, "--trust", help="Also convert checkpoints that carry other pickled Python "
                               "objects, by unpickling them, which runs whatever code they name: only for "
                               "files whose origin you trust."),
) -> None:
    """Rewrite the checkpoints of earlier cn3 releases so that this one opens them.

    cn3 reads checkpoints with torch.load(weights_only=True): tensors, numbers, strings and plain
    containers only, so opening a run someone shared cannot run code. Earlier releases pickled
    NumPy's random state into latest.pt; this converts it (without running code from the file)
    and rewrites each file atomically. A checkpoint that carries other pickled objects is refused
    unless --trust is given. Files already plain are left as they are.

    Examples:

        cn3 checkpoint upgrade runs/trec-cn3-seed1

        cn3 checkpoint upgrade runs/grids/xu-table1
    """
    from cn3.train.checkpoints import upgrade_checkpoint

    with user_errors():
        files = checkpoints_under(path)
        upgraded = [f for f in files if upgrade_checkpoint(f, trust=trust)]
    for f in files:
        console.print(escape(f"{'upgraded' if f in upgraded else 'already plain'}: {f}"), soft_wrap=True)
