"""``python -m cli``: the ``cn3`` command without its console script (`cn3 experiment run` starts
its cells this way, with the interpreter that runs it)."""

from cli.main import app

app(prog_name="cn3")
