"""The wheel works outside the checkout: installed into a fresh venv, run from another directory.

The venv is created without the checkout anywhere on its path. Its dependencies are not downloaded: a
``.pth`` file adds the project venv's site-packages *after* the fresh venv's own (a directory named in a
``.pth`` file is appended to ``sys.path`` and its own ``.pth`` files are not run, so the checkout's
editable install of cn3 stays out). cn3, cli and data_prep can therefore come only from the wheel, which
each probe asserts through the modules' ``__file__``. ``import cn3.nn`` is tried in a second venv that
sees torch, torch-geometric and what those two require, nothing else.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds a wheel and two venvs, prepares and trains through the console script

REPO = Path(__file__).resolve().parents[2]
SOURCES = ["pyproject.toml", "README.md", "cn3", "cli", "data_prep"]
TINY = ["--set", "model.hidden=16", "--set", "model.energy_dim=8", "--set", "model.mlp_hidden=16",
        "--set", "model.char=none", "--set", "model.pos_dim=0", "--set", "model.spell_dim=0",
        "--set", "data.limit=200", "--set", "train.epochs=1", "--set", "data.embeddings=null"]


def _run(args, cwd: Path, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    out = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert out.returncode == 0, f"{' '.join(map(str, args))}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    return out


def _venv(path: Path, dependency_dirs: list[Path]) -> Path:
    """A venv at ``path`` without pip whose dependencies are ``dependency_dirs`` (via a .pth file)."""
    _run([sys.executable, "-m", "venv", "--without-pip", path], cwd=path.parent)
    (site_dir,) = (path / "lib").glob("python3*/site-packages")
    (site_dir / "deps.pth").write_text("".join(f"{d}\n" for d in dependency_dirs))
    return path / "bin" / "python"


def _install(python: Path, wheel: Path) -> None:
    # the project venv's pip installs into the fresh venv (`--python`): console scripts get its interpreter
    _run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "--python", python, "install",
          "--no-deps", "--no-index", "--ignore-installed", wheel], cwd=wheel.parent)


def _env() -> dict:
    """A clean environment: no PYTHONPATH, the shared data, a cache of the test session."""
    keep = {k: v for k, v in os.environ.items() if k in ("HOME", "CN3_CACHE", "LANG", "TMPDIR")}
    return {**keep, "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "COLUMNS": "120"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("wheel")
    src, dist = base / "src", base / "dist"
    src.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(REPO / name, src / name)
    _run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "wheel", "--no-deps",
          "--no-build-isolation", "--no-index", ".", "-w", dist], cwd=src)
    (path,) = dist.glob("cn3-*.whl")
    return path


def test_the_wheel_carries_configs_and_assets(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for pattern in ("cn3/configs/*.yaml", "cn3/configs/nmt/*.yaml", "cn3/configs/experiments/*.yaml",
                    "cn3/serve/static/*"):
        files = sorted(p.relative_to(REPO).as_posix() for p in REPO.glob(pattern) if p.is_file())
        assert set(files) <= names, f"missing from the wheel: {sorted(set(files) - names)}"
    assert any(n.startswith("cn3/configs/trec.yaml") for n in names)
    assert not any(n.startswith(("tests/", "docs/", "bench/")) for n in names)


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


def test_installed_wheel_uses_the_tuned_configs(wheel, tmp_path):
    """Installed with ``pip install --target`` and imported in isolated mode (``-I``) from outside the
    checkout: the run configs resolve from the wheel's own copy of cn3/configs."""
    import yaml

    from cn3 import __version__
    from cn3.config import to_dict
    from cn3.sentence.config import RunConfig

    target, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    _run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "install", "--no-deps", "--no-index",
          "--target", target, wheel], cwd=tmp_path)
    elsewhere.mkdir()
    out = json.loads(_run([sys.executable, "-I", "-c", PROBE, target], cwd=elsewhere).stdout)
    for file in out["files"]:
        assert Path(file).is_relative_to(target), f"{file} was imported from outside the installed copy"
    tuned = yaml.safe_load((REPO / "cn3" / "configs" / "trec.yaml").read_text())
    defaults = to_dict(RunConfig())
    assert any(defaults[s][k] != v for s, keys in tuned.items() for k, v in keys.items()), \
        "trec.yaml sets only defaults: it cannot show whether it was read"
    for section, keys in tuned.items():
        for key, value in keys.items():
            assert out["trec"][section][key] == value, f"{section}.{key}: installed cn3 ignored trec.yaml"
    assert out["nmt_default_exists"] and Path(out["nmt_default"]).is_relative_to(target)
    assert out["version"] == __version__


def test_console_script_prepares_and_trains_outside_the_checkout(wheel, tmp_path, data_root):
    python = _venv(tmp_path / "venv", [Path(p) for p in site.getsitepackages()])
    _install(python, wheel)
    cn3 = python.parent / "cn3"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**_env(), "CN3_DATA": str(data_root)}

    where = _run([python, "-c", "import json, cli.main, cn3, data_prep, cn3.sentence.config as c; print(json.dumps("
                  "[m.__file__ for m in (cli.main, cn3, data_prep, c)]))"], cwd=elsewhere, env=env)
    for file in json.loads(where.stdout):
        assert Path(file).is_relative_to(tmp_path / "venv"), f"{file} is not the wheel's"

    version = _run([cn3, "--version"], cwd=elsewhere, env=env)
    from cn3 import __version__
    assert version.stdout.strip() == f"cn3 {__version__}"
    tasks = _run([cn3, "tasks"], cwd=elsewhere, env=env)  # cn3's tables go to stderr (cn3.util.console)
    assert "trec" in tasks.stderr and "conll2003" in tasks.stderr

    prepared, run = elsewhere / "prepared-trec", elsewhere / "run"
    _run([cn3, "prepare", "--task", "trec", "--annotator", "none", "--out", prepared], cwd=elsewhere, env=env)
    assert json.loads((prepared / "manifest.json").read_text())["task"] == "trec"
    _run([cn3, "train", "--task", "trec", "--prepared", prepared, "--run-dir", run, "--device", "cpu", *TINY],
         cwd=elsewhere, env=env, timeout=600)
    results = json.loads((run / "results.json").read_text())
    assert results["scores"]["dev"]["metric"] == "accuracy" and 0.0 < results["scores"]["dev"]["score"] <= 100.0
    config = (run / "config.yaml").read_text()
    assert "graph_layers" in config and not (REPO / "runs" / "run").exists()


def _requirement_closure(roots: tuple[str, ...]) -> set[str]:
    """The installed distributions ``roots`` require, transitively (extras and markers that do not apply
    left out)."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for req in dist.requires or []:
            if "extra ==" in req:
                continue
            todo.append(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req).group(0))
    return seen


def _only(distributions: set[str], into: Path) -> Path:
    """A directory of links to the top-level modules of ``distributions`` (and their metadata)."""
    into.mkdir()
    for name in distributions:
        dist = metadata.distribution(name)
        tops = {Path(str(f)).parts[0] for f in dist.files or []}
        for top in tops:
            source = Path(dist.locate_file(top))
            if source.exists() and not (into / top).exists() and top not in ("..", "bin"):
                (into / top).symlink_to(source)
    return into


def test_import_cn3_nn_with_torch_and_torch_geometric_alone(wheel, tmp_path):
    if not (REPO / "cn3" / "nn").is_dir():
        pytest.skip("cn3.nn is not in this checkout")
    closure = _requirement_closure(("torch", "torch-geometric"))
    assert {"torch", "torch-geometric"} <= closure and "typer" not in closure and "gensim" not in closure
    python = _venv(tmp_path / "venv", [_only(closure, tmp_path / "deps")])
    _install(python, wheel)
    probe = ("import json, sys, torch, cn3.nn\n"
             "print(json.dumps({'file': cn3.nn.__file__, 'names': dir(cn3.nn),\n"
             "                  'typer': 'typer' in sys.modules}))")
    out = json.loads(_run([python, "-c", probe], cwd=tmp_path, env=_env()).stdout)
    assert Path(out["file"]).is_relative_to(tmp_path / "venv")
    assert "DenseCN3Conv" in out["names"] and "CN3Conv" in out["names"]
    # and the same venv has no cn3 CLI dependencies: they really are absent
    absent = subprocess.run([python, "-c", "import typer"], capture_output=True, text=True, env=_env())
    assert absent.returncode != 0
