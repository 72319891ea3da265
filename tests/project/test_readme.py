"""The README: one screen for a newcomer, its two commands exactly as CI runs them, every command
and link in it working as written (commands run through the CLI, or a reason why not: see
tests/project/test_docs.py, whose rules it shares)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.project.test_docs import blocks, documented_commands, run_cli

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def test_readme_is_short_and_keeps_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    bash = [code for lang, code in blocks(text) if lang == "bash"]
    assert bash[0].splitlines()[0].startswith("bash scripts/main.sh ")
    assert bash[0].splitlines()[1].startswith("bash scripts/test.sh ")
    assert "bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()  # CI runs the README's test command


def test_every_readme_command_runs_or_says_why_not(tmp_path):
    commands = documented_commands([README])
    assert {"bash scripts/main.sh", "bash scripts/test.sh", "cn3 tasks", "cn3 --help"} <= set(commands)
    for command, kind in commands.items():
        if kind == "cheap":
            run_cli(command, tmp_path)
        else:
            assert kind == "cheap-slow" or len(kind) > 20


@pytest.mark.slow  # `cn3 encoders` builds every encoder; the dry run resolves a grid's configs
def test_readme_slow_cheap_commands_run(tmp_path):
    commands = [c for c, kind in documented_commands([README]).items() if kind == "cheap-slow"]
    assert "cn3 encoders" in commands
    for command in commands:
        run_cli(command, tmp_path)


def test_readme_python_example_runs():
    (code,) = [code for lang, code in blocks(README.read_text()) if lang == "python"]
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})


def test_links_point_at_files_and_the_serve_screenshot_slot():
    text = README.read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if not re.match(r"https?://", t)]
    assert len(local) >= 12
    for target in local:
        assert (REPO / target).is_file(), f"README links to {target}, which does not exist"
    # the screenshot `cn3 serve` saves is shown once it exists, and only then
    shot = REPO / "docs" / "figures" / "serve.png"
    shown = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    assert ("](docs/figures/serve.png)" in shown) == shot.is_file()
