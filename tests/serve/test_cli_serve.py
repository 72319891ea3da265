"""``cn3 serve`` from the command line: one-line errors and exit codes for bad run directories, the
URL it prints, the warning for a host other than this machine."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def assert_clean_error(result, *fragments: str, code: int = 1):
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    if code == 1:
        assert result.output.startswith("error:") and len(result.output.strip().splitlines()) == 1, result.output
    for fragment in fragments:
        assert fragment in result.output, result.output


def test_bad_run_directories(tmp_path):
    assert_clean_error(runner.invoke(app, ["serve", str(tmp_path / "nope")]), "run directory not found")
    (tmp_path / "empty").mkdir()
    assert_clean_error(runner.invoke(app, ["serve", str(tmp_path / "empty")]),
                       "neither a run directory", "nor a grid with finished runs")
    untrained = tmp_path / "untrained"
    untrained.mkdir()
    (untrained / "config.yaml").write_text("data: {task: trec}\nmodel: {encoder: cn3}\n")
    assert_clean_error(runner.invoke(app, ["serve", str(untrained)]), "holds no checkpoint")
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "config.yaml").write_text("something: else\n")
    assert_clean_error(runner.invoke(app, ["serve", str(tmp_path / "odd")]), "not a cn3 run config")


def test_a_taken_port_is_said_before_any_model_loads(tmp_path):
    """The port is bound first: a run that could not even load is not reached when the port is taken."""
    import socket

    untrained = tmp_path / "untrained"
    untrained.mkdir()
    (untrained / "config.yaml").write_text("data: {task: trec}\nmodel: {encoder: cn3}\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert_clean_error(runner.invoke(app, ["serve", str(untrained), "--port", str(port)]),
                           f"cannot listen on 127.0.0.1:{port}")
    assert_clean_error(runner.invoke(app, ["serve", str(untrained), "--port", "0"]), "holds no checkpoint")


def test_bad_options_are_usage_errors(tmp_path):
    assert_clean_error(runner.invoke(app, ["serve", str(tmp_path), "--port", "70000"]), "--port", code=2)
    assert_clean_error(runner.invoke(app, ["serve", str(tmp_path), "--max-words", "0"]), "--max-words", code=2)
    assert_clean_error(runner.invoke(app, ["serve"]), "Missing argument", "RUN", code=2)


def test_help_names_the_command():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "serve" in result.output
    result = runner.invoke(app, ["serve", "--help"])
    assert result.exit_code == 0 and "--host" in result.output and "127.0.0.1" in result.output


def start(*args: str) -> tuple[subprocess.Popen, list[str]]:
    """``cn3 serve ARGS`` in a process; returns it once it printed its URL, with the lines so far."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    process = subprocess.Popen([sys.executable, "-m", "cli", "serve", *args, "--device", "cpu"], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if line.startswith("serving on "):
            return process, lines
    process.kill()
    raise AssertionError("cn3 serve printed no URL:\n" + "\n".join(lines))


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


@pytest.mark.slow
@pytest.mark.parametrize(("host", "warned"), [("127.0.0.1", False), ("0.0.0.0", True)])
def test_serve_prints_its_url_and_warns_for_other_hosts(serve_runs, host, warned):
    process, lines = start(str(serve_runs["trec"]), str(serve_runs["multi30k"]), "--port", "0", "--host", host)
    try:
        url = re.fullmatch(r"serving on (http://[\d.]+:(\d+)/) \(Ctrl-C stops\)", lines[-1])
        assert url and url.group(1) == f"http://{host}:{url.group(2)}/", lines
        assert any(line.startswith("warning: --host 0.0.0.0") for line in lines) == warned, lines
        assert lines[-3].startswith("r0: ") and lines[-2].startswith("r1: "), lines
        with urllib.request.urlopen(f"http://127.0.0.1:{url.group(2)}/api/runs", timeout=30) as response:
            runs = json.loads(response.read())["runs"]
        assert [(r["id"], r["name"]) for r in runs] == [("r0", serve_runs["trec"].name),
                                                        ("r1", serve_runs["multi30k"].name)]
    finally:
        stop(process)


@pytest.mark.slow
def test_a_taken_port_is_one_line(serve_runs):
    process, lines = start(str(serve_runs["trec"]), "--port", "0")
    try:
        port = re.search(r":(\d+)/", lines[-1]).group(1)
        result = runner.invoke(app, ["serve", str(serve_runs["trec"]), "--port", port, "--device", "cpu"])
        assert_clean_error(result, f"cannot listen on 127.0.0.1:{port}")
    finally:
        stop(process)
