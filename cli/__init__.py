"""The ``cn3`` command-line application (Typer)."""
