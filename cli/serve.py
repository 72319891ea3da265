"""``cn3 serve``: look inside trained runs in the browser."""

from __future__ import annotations

from pathlib import Path

import typer

from cli.errors import user_errors
from cli.train import Device
from cn3.util.console import console


def serve_command(
    runs: list[Path] = typer.Argument(..., metavar="RUN", help="Run directories (cn3 train, cn3 nmt train) or a grid "
                                      "directory (cn3 experiment run --out: its finished runs and its report)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind; anything but 127.0.0.1/localhost "
                             "lets other machines read the runs (a warning is printed). Requests must name "
                             "this address or localhost/127.0.0.1 in their Host header (0.0.0.0: any name)."),
    port: int = typer.Option(8008, "--port", min=0, max=65535, help="Port; 0 picks a free one."),
    max_words: int = typer.Option(120, "--max-words", min=1, help="The most words (tokens, as the model reads "
                                  "them) per sentence a request may send; longer ones get a 413."),
    device: Device = typer.Option(Device.auto, "--device"),
    open_browser: bool = typer.Option(False, "--open/--no-open", help="Open the page in the default browser."),
) -> None:
    """Serve a local page: type a sentence, see the prediction and each layer's learned graph
    (CN3's edges, other encoders' attention, a translation's source attention), compare two runs,
    read a run's scores and curves and a grid's report.

    The port is taken first, then the models are loaded once; one request at a time uses each
    (waitress answers the HTTP side). The page and its scripts come from this
    server only (no CDN). Stop with Ctrl-C.

    Examples:

        cn3 serve runs/trec-cn3-seed1

        cn3 serve runs/snli-cn3-seed1 runs/snli-lstm-seed1 --port 0

        cn3 serve runs/experiments/liu-table3 --no-open
    """
    from cn3.serve.api import ServeApp
    from cn3.serve.runs import expand, load_served
    from cn3.serve.server import LOCAL_HOSTS, make_server
    from cn3.train.runtime import resolve_device

    with user_errors():
        dev = resolve_device(device.value)
        paths, grid = expand(runs)
        app = ServeApp([], max_words, grid)
        try:  # the port first: a taken one is said before the models load
            server = make_server(app, host, port)
        except OSError as err:
            from cn3.util.errors import ArgumentError

            raise ArgumentError(f"cannot listen on {host}:{port} ({err.strerror or err})") from None
        try:
            app.add_runs([load_served(path, f"r{i}", dev) for i, path in enumerate(paths)])
        except BaseException:
            server.server_close()
            raise
    if host not in LOCAL_HOSTS:
        console.print(f"[yellow]warning[/]: --host {host}: every machine that can reach this one can read these "
                      "runs and use their models; the server has no login", soft_wrap=True)
    for run in app.runs.values():
        console.print(f"{run.id}: {run.path} ({run.kind}, {run.encoder})", soft_wrap=True, highlight=False)
        for note in run.notes:
            console.print(f"  note: {note}", soft_wrap=True, highlight=False)
    console.print(f"serving on {server.url} (Ctrl-C stops)", soft_wrap=True, highlight=False)
    if open_browser:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
