"""The ``cn3`` application: one Typer app, sub-apps per concern."""

from __future__ import annotations

import typer

import cn3
from cli.analyze import analyze_app
from cli.checkpoint import checkpoint_app
from cli.compare import compare_command
from cli.encoders import encoders_command
from cli.experiment import experiment_app
from cli.help_text import unwrap_help
from cli.nmt import nmt_app
from cli.plot import plot_command
from cli.prepare import prepare_command, tasks_command
from cli.probe import compare_probes_command, probe_command
from cli.serve import serve_command
from cli.train import evaluate_command, predict_command, train_command
from cli.visualize import visualize_app

app = typer.Typer(
    name="cn3",
    help="Learn task-specific sentence graphs (CN3), train and inspect graph-based sentence encoders.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("prepare")(prepare_command)
app.command("tasks")(tasks_command)
app.command("encoders")(encoders_command)
app.command("train")(train_command)
app.command("evaluate")(evaluate_command)
app.command("predict")(predict_command)
app.command("serve")(serve_command)
app.command("compare")(compare_command)
app.command("plot")(plot_command)
app.command("probe")(probe_command)
app.command("compare-probes")(compare_probes_command)
app.add_typer(nmt_app, name="nmt")
app.add_typer(visualize_app, name="visualize")
app.add_typer(analyze_app, name="analyze")
app.add_typer(experiment_app, name="experiment")
app.add_typer(checkpoint_app, name="checkpoint")
unwrap_help(app)


def _version(value: bool) -> None:
    if value:
        print(f"cn3 {cn3.__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and exit.")) -> None:
    """Learn task-specific sentence graphs (CN3), train and inspect graph-based sentence encoders."""
