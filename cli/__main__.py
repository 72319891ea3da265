"""``python -m cli``: the ``cn3`` command without its console script (``torchrun -m cli``, and tests
that run the command as a process, start it this way)."""

from cli.main import app

app(prog_name="cn3")
