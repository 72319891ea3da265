"""The documentation site: built offline in strict mode, its generated pages complete, every example run.

Every fenced block of every page is accounted for: ``python`` blocks are executed in order (one
interpreter per page, from an empty directory with ``CN3_DATA`` set), ``bash`` lines that are cheap
(help, ``cn3 tasks``, dry runs) are run through the CLI, and every other ``bash`` line must match a
rule of :data:`NOT_RUN`, which says why it is not (it trains, or reads a run a checkout does not have).
``yaml`` blocks parse; ``text`` blocks quote recorded output, checked against the record they name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import typing
import urllib.request
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)

#: commands cheap enough to run here; the first group runs in the quick loop, the second is slow
CHEAP = (r"^cn3( [\w-]+)* --help$", r"^cn3 --version$", r"^cn3 tasks( \w+)?$", r"^cn3 encoders --names$")
CHEAP_SLOW = (r"^cn3 encoders$", r"^cn3 experiment run [\w-]+( --(budget|only|jobs) \S+)* --dry-run$")

#: (pattern, why the command is not run by the tests)
NOT_RUN = (
    (r"^bash scripts/main\.sh$", "the main job itself (minutes; RESULTS.md records a run from a clean clone)"),
    (r"^bash scripts/test\.sh", "the test suite, which runs this test"),
    (r"^bash scripts/docs\.sh$", "serves until stopped; test_docs_sh_serves_the_site starts and stops it"),
    (r"^bash docs/runs/regenerate\.sh$", "renders every committed grid report again (minutes)"),
    (r"^source \.venv/bin/activate$", "changes the calling shell"),
    (r"^(pip install|ray start)", "changes the environment or starts a cluster"),
    (r"^cn3 prepare ", "prepares a dataset from the shared data (seconds to minutes); test_wheel.py runs "
                      "`cn3 prepare` through the installed console script"),
    (r"^(cn3 train|cn3 nmt train|torchrun|python bench/)", "trains a model (minutes to hours); test_cli_train.py "
                                                          "and test_wheel.py train tiny runs"),
    (r"^cn3 (evaluate|predict|visualize|analyze|probe|compare|compare-probes|plot|serve|checkpoint|"
     r"nmt (translate|evaluate|gates)) ", "reads a trained run directory, which a checkout does not hold"),
    (r"^cn3 experiment (run|report) ", "trains a grid's cells or reads their runs (a cluster for --launcher)"),
)


def pages() -> list[Path]:
    """The site's pages: every Markdown file under docs/ but the grid reports (mkdocs.yml exclude_docs)."""
    return sorted(p for p in DOCS.rglob("*.md") if p.relative_to(DOCS).parts[0] != "runs")


def blocks(text: str) -> list[tuple[str, str]]:
    """``(language, code)`` of each fenced block at the start of a line."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def shell_commands(code: str) -> list[str]:
    """The commands of a shell block, comments dropped, re-quoted as one normal form."""
    commands = []
    for line in code.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            commands.append(shlex.join(words))
    return commands


def classify(command: str) -> str:
    """``"cheap"``, ``"cheap-slow"`` or the reason a command is not run; AssertionError when none applies."""
    if any(re.match(p, command) for p in CHEAP):
        return "cheap"
    if any(re.match(p, command) for p in CHEAP_SLOW):
        return "cheap-slow"
    for pattern, reason in NOT_RUN:
        if re.match(pattern, command):
            return reason
    raise AssertionError(f"a documented command is neither run nor explained in NOT_RUN: {command}")


def run_cli(command: str, cwd: Path) -> None:
    """Run ``cn3 ...`` through Typer's runner in ``cwd``; exit 0 and some output."""
    from typer.testing import CliRunner

    from cli.main import app

    with contextlib.chdir(cwd):
        result = CliRunner().invoke(app, shlex.split(command)[1:], env={"COLUMNS": "120"})
    assert result.exit_code == 0, f"`{command}` exit {result.exit_code}:\n{result.output[-3000:]}"
    assert result.output.strip(), f"`{command}` printed nothing"


def documented_commands(paths) -> dict[str, str]:
    """Every shell command of ``paths`` -> its class (:func:`classify`)."""
    found = {}
    for path in paths:
        for lang, code in blocks(path.read_text()):
            if lang in ("bash", "sh", "console"):
                for command in shell_commands(code):
                    found[command] = classify(command)
    return found


# ---------------------------------------------------------------------------------------------- the build


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                           cwd=REPO, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert build.returncode == 0, build.stderr[-5000:]
    return out


@pytest.mark.slow  # the strict build (shared): about 10 s on 2 busy cores, torch imported by the hook
def test_strict_build_has_every_page_and_no_run_records(site):
    nav = yaml.load((REPO / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)["nav"]

    def files(entry):
        if isinstance(entry, str):
            yield entry
        elif isinstance(entry, dict):
            for value in entry.values():
                yield from files(value)
        else:
            for item in entry:
                yield from files(item)

    in_nav = set(files(nav))
    assert {p.relative_to(DOCS).as_posix() for p in pages()} | {"results.md"} == in_nav
    for page in in_nav:
        built = site / ("index.html" if page == "index.md" else page.removesuffix(".md") + "/index.html")
        assert built.is_file(), page
    assert not (site / "runs").exists(), "docs/runs is data, not pages"
    assert "Learn task-specific sentence graphs" in (site / "index.html").read_text()


def _config_classes():
    from cn3.nmt.config import NMTConfig
    from cn3.sentence.config import RunConfig

    return RunConfig, NMTConfig


def _leaf_keys(cls, prefix=""):
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            yield from _leaf_keys(hints[f.name], f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}"


@pytest.mark.slow  # the strict build (shared): about 10 s on 2 busy cores, torch imported by the hook
def test_configuration_reference_has_every_key_with_its_default(site):
    html = (site / "reference" / "config" / "index.html").read_text()
    for cls in _config_classes():
        keys = list(_leaf_keys(cls))
        assert len(keys) > 40 and "train.precision" in keys
        for key in keys:
            assert f"<code>{key}</code>" in html, f"{key} missing from the configuration reference"
    # one row read back: the documented default is the dataclass's
    row = re.search(r"<td><code>model\.hybrid\.window</code></td>\s*<td>.*?</td>\s*<td><code>(.*?)</code>", html)
    from cn3.sentence.config import RunConfig

    assert row and row.group(1) == str(RunConfig().model.hybrid.window)


@pytest.mark.slow  # the strict build (shared): about 10 s on 2 busy cores, torch imported by the hook
def test_tasks_page_lists_every_registered_task_and_its_config(site):
    from data_prep.tasks import TASKS

    html = (site / "tasks" / "index.html").read_text()
    for name, spec in TASKS.items():
        assert f"<code>{name}</code>" in html, name
        stem = spec.config or name
        if (REPO / "cn3" / "configs" / f"{stem}.yaml").is_file():
            assert f"cn3/configs/{stem}.yaml" in html


@pytest.mark.slow  # the strict build (shared): about 10 s on 2 busy cores, torch imported by the hook
def test_api_reference_renders_the_layers_docstrings(site):
    html = (site / "reference" / "api" / "index.html").read_text()
    for name in ("cn3.nn.DenseCN3Conv", "cn3.nn.CN3Conv", "data_prep.dataset.load_prepared"):
        assert f'id="{name}"' in html, name


#: what a reader must never see: a Sphinx role or directive, a TeX delimiter or command left as text
RAW_MARKUP = re.compile(r":(?:class|func|meth|mod|attr|data|obj|exc|math):(?:<code>|`)|\.\. math::"
                        r'|class="arithmatex"|\\[\[(]|\\(?:mathbf|frac|tanh|sum|alpha|tilde)\b')


@pytest.mark.slow  # the strict build (shared): about 10 s on 2 busy cores, torch imported by the hook
def test_built_pages_render_equations_and_references(site):
    """Every page of the built site: no raw role, no ``.. math::``, no TeX left as text (code blocks
    aside); the layers' equations are MathML and their roles links to the documented objects."""
    for page in site.rglob("*.html"):
        text = re.sub(r"<pre[^>]*>.*?</pre>", "", page.read_text(), flags=re.S)
        text = re.sub(r"<math .*?</math>", "", text, flags=re.S)  # MathML keeps no TeX, checked below
        assert not RAW_MARKUP.search(text), (page, RAW_MARKUP.search(text).group(0))
    html = (site / "reference" / "api" / "index.html").read_text()
    equations = re.findall(r'<math [^>]*display="block".*?</math>', html, flags=re.S)
    assert len(equations) >= 4 and not any("\\" in eq for eq in equations)  # two per layer, no TeX command
    assert "&#x1D4A9;" in equations[0]  # \mathcal{N}: the neighbourhood rendered as a symbol
    assert 'href="#cn3.nn.DenseCN3Conv"' in html  # CN3Conv's :class:`~cn3.nn.DenseCN3Conv` is a link


@pytest.mark.slow  # one more strict build of a one-page site: a few seconds
def test_strict_build_fails_on_raw_markup(tmp_path):
    """The hook makes raw markup a warning, so ``--strict`` refuses it: a page with a Sphinx role in
    HTML and a TeX command latex2mathml cannot render."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# t\n\n<p>:class:<code>Foo</code></p>\n\n$$\n\\notacommand x\n$$\n")
    config = {"site_name": "t", "docs_dir": str(docs), "site_dir": str(tmp_path / "site"), "plugins": [],
              "hooks": [str(REPO / "scripts" / "docs_math.py")],
              "markdown_extensions": [{"pymdownx.arithmatex": {"generic": True}}]}
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(tmp_path / "mkdocs.yml")],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert build.returncode == 1
    assert "raw Sphinx markup ':class:<code>'" in build.stderr
    assert "left \\notacommand unrendered" in build.stderr


# ---------------------------------------------------------------------------------------------- examples


def test_every_documented_command_is_run_or_says_why_not(tmp_path):
    commands = documented_commands(pages())
    assert len(commands) > 60
    assert "cn3 serve --help" in commands and "cn3 tasks trec" in commands
    for command, kind in commands.items():
        if kind == "cheap":
            run_cli(command, tmp_path)
        else:
            assert kind == "cheap-slow" or len(kind) > 20  # a reason in words


@pytest.mark.slow
def test_slow_cheap_commands_run(tmp_path):
    commands = [c for c, kind in documented_commands(pages()).items() if kind == "cheap-slow"]
    assert any(c.startswith("cn3 experiment run") for c in commands)
    for command in commands:
        run_cli(command, tmp_path)


def test_yaml_examples_parse():
    parsed = [yaml.safe_load(code) for p in pages() for lang, code in blocks(p.read_text()) if lang == "yaml"]
    assert parsed and all(isinstance(doc, dict) for doc in parsed)


def test_quoted_output_is_in_the_record_it_names():
    text = (DOCS / "quickstart.md").read_text()
    quotes = [code for lang, code in blocks(text) if lang == "text"]
    assert quotes
    record = (DOCS / "runs" / "main-trec" / "log.txt").read_text()
    for quote in quotes:
        for line in quote.splitlines():
            assert line == "..." or line in record, line


def python_examples(path: Path) -> list[str]:
    return [code for lang, code in blocks(path.read_text()) if lang == "python"]


@pytest.mark.slow  # prepares TREC and trains a tiny run, as the library page shows
def test_python_examples_run_in_order(tmp_path, data_root, monkeypatch):
    with_python = [p for p in pages() if python_examples(p)]
    assert DOCS / "library.md" in with_python
    monkeypatch.setenv("CN3_DATA", str(data_root))
    monkeypatch.chdir(tmp_path)
    for path in with_python:
        namespace: dict = {"__name__": f"docs_{path.stem}"}
        for code in python_examples(path):
            exec(compile(code, f"{path.relative_to(REPO)}", "exec"), namespace)
    assert (tmp_path / "runs" / "trec-tiny" / "results.json").is_file()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # mkdocs serve builds the whole site before it answers
def test_docs_sh_serves_the_site():
    port = _free_port()
    server = subprocess.Popen(["bash", str(REPO / "scripts" / "docs.sh")], cwd="/",
                              env={**os.environ, "DOCS_PORT": str(port), "OMP_NUM_THREADS": "1"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline, page = time.monotonic() + 120, None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/quickstart/", timeout=5).read().decode()
                break
            except OSError:
                time.sleep(0.5)
        assert page and "<title>Quickstart - cn3</title>" in page and "scripts/main.sh" in page
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
