"""The import direction is ``cli`` -> ``cn3`` -> ``data_prep`` -> ``cn3.util``: a lower layer never imports a
higher one; ``data_prep`` imports nothing of ``cn3`` but the leaf ``cn3.util``, which imports none of them.

Every import statement counts, including the ones inside functions (a lazy import is still a
dependency); the modules are parsed, not imported, so a violation is found without running it.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: For each package, the top-level packages it must not import (``data_prep`` may import ``cn3.util``).
FORBIDDEN = {"data_prep": {"cn3", "cli"}, "cn3": {"cli"}}
#: The leaf modules below every layer, and the one package a lower layer may import them from.
LEAF = "cn3.util"


def imported_packages(source: str, filename: str) -> set[tuple[int, str]]:
    """``(line, top-level package)`` of every absolute import in ``source``."""
    found = set()
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found.update((node.lineno, alias.name.split(".")[0]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add((node.lineno, node.module.split(".")[0]))
    return found


def test_imported_packages_sees_every_kind_of_import():
    source = "import cn3\nimport cli.main as m\ndef f():\n    from cn3.atomic import x\nfrom . import y\n"
    assert imported_packages(source, "<test>") == {(1, "cn3"), (2, "cli"), (4, "cn3")}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_upward_imports(package):
    modules = sorted((ROOT / package).rglob("*.py"))
    assert modules, f"no modules found under {ROOT / package}"
    violations = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in modules
        for line, name in sorted(imported_packages(path.read_text(encoding="utf-8"), str(path)))
        if name in FORBIDDEN[package] and not (package == "data_prep" and _in_leaf(path, line))
    ]
    assert not violations, "\n".join(violations)


def _in_leaf(path: Path, line: int) -> bool:
    """Whether every module imported on ``line`` of ``path`` is (inside) the leaf ``cn3.util``."""
    names = [name for at, name in imported_modules(path.read_text(encoding="utf-8"), str(path)) if at == line]
    return bool(names) and all(name == LEAF or name.startswith(LEAF + ".") for name in names)


def test_the_leaf_imports_no_layer():
    """``cn3.util`` is the bottom: it imports nothing of ``cli``, ``data_prep`` or the rest of ``cn3``."""
    violations = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted((ROOT / "cn3" / "util").rglob("*.py"))
        for line, name in sorted(imported_modules(path.read_text(encoding="utf-8"), str(path)))
        if name.split(".")[0] in {"cli", "data_prep"} or (name.split(".")[0] == "cn3" and not name.startswith(LEAF))
    ]
    assert (ROOT / "cn3" / "util").is_dir()
    assert not violations, "\n".join(violations)


def imported_modules(source: str, filename: str) -> set[tuple[int, str]]:
    """``(line, dotted module)`` of every absolute import in ``source``."""
    found = set()
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found.update((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add((node.lineno, node.module))
    return found


#: Inside cn3, what reads downward: the layers and encoders know nothing of the tools above them, and
#: the analysis does not draw through the visualisation (both draw through the leaf cn3.plotting).
WITHIN_CN3 = {
    "cn3/analysis": ("cn3.visualize", "cn3.experiment"),
    "cn3/layers": ("cn3.encoders", "cn3.sentence", "cn3.nmt", "cn3.experiment", "cn3.analysis", "cn3.visualize",
                   "cn3.probe", "cn3.train", "cn3.runs"),
    "cn3/encoders": ("cn3.sentence", "cn3.nmt", "cn3.experiment", "cn3.analysis", "cn3.visualize", "cn3.probe",
                     "cn3.train", "cn3.runs"),
    "cn3/train": ("cn3.sentence", "cn3.nmt", "cn3.experiment", "cn3.analysis", "cn3.visualize", "cn3.probe",
                  "cn3.kinds", "cn3.serve"),
    # the run directories and the contract of a kind sit below the trainer and every kind: the kinds are
    # collected above them, in cn3.kinds, which alone decides which kind a run is
    "cn3/runs": ("cn3.train", "cn3.sentence", "cn3.nmt", "cn3.experiment", "cn3.analysis", "cn3.visualize",
                 "cn3.probe", "cn3.kinds", "cn3.serve"),
    # a kind builds its task from below; the tools that use trained runs (probe, experiment...) sit above
    "cn3/sentence": ("cn3.nmt", "cn3.probe", "cn3.kinds", "cn3.experiment", "cn3.analysis", "cn3.visualize",
                     "cn3.serve"),
    "cn3/nmt": ("cn3.sentence", "cn3.probe", "cn3.kinds", "cn3.experiment", "cn3.analysis", "cn3.visualize",
                "cn3.serve"),
}


@pytest.mark.parametrize("folder", sorted(WITHIN_CN3))
def test_cn3_subpackages_read_downward(folder):
    violations = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line, name in sorted(imported_modules(path.read_text(encoding="utf-8"), str(path)))
        if name.startswith(WITHIN_CN3[folder])
    ]
    assert not violations, "\n".join(violations)


def test_the_library_never_starts_the_cli():
    """A process the library starts runs a library module (the experiment cell), not ``python -m cli``:
    an upward edge the import check above cannot see."""
    found = [f"{path.relative_to(ROOT)}" for path in sorted((ROOT / "cn3").rglob("*.py"))
             if '"-m", "cli"' in path.read_text(encoding="utf-8") or "'-m', 'cli'" in path.read_text(encoding="utf-8")]
    assert not found, found


def module_graph() -> dict[str, set[str]]:
    """Every module of ``cli``, ``cn3`` and ``data_prep`` with the modules of those packages it imports
    (lazy imports included; ``from package import module`` counts as importing the module)."""
    paths = {}
    for package in ("cli", "cn3", "data_prep"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in paths.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names if alias.name in paths)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in paths:
                subs = {f"{node.module}.{alias.name}" for alias in node.names} & paths.keys()
                edges.update(subs if subs else {node.module})
        graph[name] = edges - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycles_finds_a_cycle_through_a_lazy_import():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_back():
    """No import cycle between modules, lazy imports included: each module can be read knowing only
    what it imports."""
    graph = module_graph()
    assert "cn3.kinds" in graph and "cn3.train.trainer" in graph["cn3.kinds"]  # a lazy import, counted
    assert not cycles(graph), cycles(graph)


def package_of(module: str) -> str:
    """The package a module belongs to for the layering: ``cn3.<sub>`` inside cn3 (a loose module of cn3
    is its own package), else the top-level name."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "cn3" and len(parts) > 1 else parts[0]


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` collapsed to packages (:func:`package_of`), edges inside one package dropped."""
    packages: dict[str, set[str]] = {}
    for module, imported in graph.items():
        edges = packages.setdefault(package_of(module), set())
        edges.update(package_of(other) for other in imported)
    return {package: edges - {package} for package, edges in packages.items()}


def test_package_graph_sees_a_cycle_that_no_module_cycle_shows():
    """Two packages importing each other through different modules: no module cycle, one package cycle."""
    graph = {"cn3.runs.kinds": {"cn3.train.kinds"}, "cn3.train.trainer": {"cn3.runs.layout"},
             "cn3.train.kinds": set(), "cn3.runs.layout": set()}
    assert cycles(graph) == []
    assert cycles(package_graph(graph)) == [["cn3.runs", "cn3.train"]]


def test_no_package_imports_itself_back():
    """No cycle between packages either, lazy imports included: ``cn3.runs`` and ``cn3.train`` never
    import the kinds (``cn3.sentence``, ``cn3.nmt``) they train, nor the sentence kind the probe."""
    packages = package_graph(module_graph())
    assert "cn3.sentence" in packages["cn3.kinds"] and "cn3.train" in packages["cn3.sentence"]
    assert not cycles(packages), cycles(packages)


def test_cn3_keeps_few_loose_modules():
    """``cn3/`` holds packages named for their job and at most eight loose modules beside them."""
    loose = sorted(path.name for path in (ROOT / "cn3").glob("*.py") if path.name != "__init__.py")
    assert len(loose) <= 8, loose
