"""The installed package, not the source tree: a wheel built from the repo carries the tuned configs.

The wheel is built from a copy of the sources (the build never writes into the repo), installed with
``pip install --target`` into a temporary directory and imported by the venv's interpreter in
isolated mode (``-I``: no PYTHONPATH, no script directory) from a directory outside the repo, so only
the installed copy can answer. No network: ``--no-index --no-build-isolation``.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cn3.config import to_dict
from cn3.sentence.config import RunConfig

# slow: builds and installs a wheel (`pytest -m "not slow"` is the quick loop)
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SOURCES = ["pyproject.toml", "README.md", "cn3", "cli", "data_prep"]

PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import cli.main, cn3, cn3.nmt.config, cn3.sentence.resolve, data_prep
from cn3.config import to_dict
print(json.dumps({
    "files": [m.__file__ for m in (cn3, cn3.sentence.resolve, cli.main, data_prep)],
    "trec": to_dict(cn3.sentence.resolve.resolve_config("trec", None, {}, [])),
    "nmt_default": str(cn3.nmt.config.DEFAULT_CONFIG),
    "nmt_default_exists": cn3.nmt.config.DEFAULT_CONFIG.is_file(),
    "version": cn3.__version__,
}))
"""


def pip(*args: str, cwd: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
                   cwd=cwd, check=True, capture_output=True, timeout=120)


def test_installed_wheel_uses_the_tuned_configs(tmp_path):
    src, dist, site, elsewhere = (tmp_path / name for name in ("src", "dist", "site", "elsewhere"))
    src.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(REPO / name, src / name)
    pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", ".", "-w", str(dist), cwd=src)
    (wheel,) = dist.glob("cn3-*.whl")
    pip("install", "--no-deps", "--no-index", "--target", str(site), str(wheel), cwd=tmp_path)
    elsewhere.mkdir()
    run = subprocess.run([sys.executable, "-I", "-c", PROBE, str(site)], cwd=elsewhere,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)

    for file in out["files"]:
        assert Path(file).is_relative_to(site), f"{file} was imported from outside the installed copy"
    tuned = yaml.safe_load((REPO / "cn3" / "configs" / "trec.yaml").read_text())
    defaults = to_dict(RunConfig())
    differs = [(s, k) for s, keys in tuned.items() for k, v in keys.items() if defaults[s][k] != v]
    assert differs, "trec.yaml sets only defaults: it cannot show whether it was read"
    for section, keys in tuned.items():
        for key, value in keys.items():
            assert out["trec"][section][key] == value, f"{section}.{key}: installed cn3 ignored trec.yaml"
    assert out["trec"]["model"]["char"] == "cnn"
    assert out["nmt_default_exists"] and Path(out["nmt_default"]).is_relative_to(site)
    from cn3 import __version__
    assert out["version"] == __version__
