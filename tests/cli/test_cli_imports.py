"""The CLI answers at once: importing it and rendering every help, `--version` and `cn3 tasks` import no
torch (nor the other heavy libraries), because every command imports what it needs inside itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# the kinds of run (cn3.kinds, cn3.nmt.kind, cn3.sentence.kind) are light: their model code is what is heavy
HEAVY = ("torch", "torch_geometric", "cn3.encoders", "cn3.nmt.data", "cn3.nmt.transformer", "cn3.nmt.task",
         "cn3.sentence.model", "cn3.sentence.task", "sklearn", "matplotlib", "spacy", "stanza", "gensim", "scipy",
         "sacrebleu", "sentencepiece")

# Run in a fresh interpreter: the test session itself has long imported torch.
PROBE = r"""
import json, sys
import typer.main
from typer.testing import CliRunner

import cli.main

def paths(command, prefix=()):
    yield prefix
    for name, sub in getattr(command, "commands", {}).items():
        yield from paths(sub, prefix + (name,))

runner = CliRunner()
rendered = {}
for path in paths(typer.main.get_command(cli.main.app)):
    result = runner.invoke(cli.main.app, [*path, "--help"])
    rendered[" ".join(path)] = [result.exit_code, "Usage:" in result.output]
for args in (["--version"], ["tasks"]):
    result = runner.invoke(cli.main.app, args)
    rendered[" ".join(args)] = [result.exit_code, bool(result.output.strip())]
heavy = sorted(m for m in HEAVY if m in sys.modules)
print(json.dumps({"rendered": rendered, "heavy": heavy}))
"""


def _probe() -> dict:
    code = f"HEAVY = {HEAVY!r}\n{PROBE}"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "COLUMNS": "120"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_help_of_every_command_version_and_tasks_import_no_torch():
    report = _probe()
    rendered = report["rendered"]
    # the app, its sub-apps and all their commands (26 help pages today), --version and tasks
    assert len(rendered) >= 25, sorted(rendered)
    for name in ("", "train", "nmt", "nmt train", "visualize", "analyze graphs", "probe", "experiment run"):
        assert name in rendered, name
    for name, (code, ok) in rendered.items():
        assert code == 0 and ok, f"`cn3 {name}` exit {code}"
    assert report["heavy"] == [], f"imported while rendering help: {report['heavy']}"


def test_the_nmt_encoder_choices_are_the_registrys_translation_encoders():
    from cli.nmt import TRANSLATION_ENCODERS, Encoder
    from cn3.encoders import ENCODERS

    assert TRANSLATION_ENCODERS == tuple(name for name, spec in ENCODERS.items() if "translation" in spec.levels)
    assert [e.value for e in Encoder] == list(TRANSLATION_ENCODERS)
