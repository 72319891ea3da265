"""MkDocs hooks of the documentation site (mkdocs.yml ``hooks:``): the generated pages and links.

* ``RESULTS.md`` (at the repository root, outside ``docs/``) joins the site as ``results.md``; links to it
  from ``docs/`` (``../RESULTS.md``) and its own links into ``docs/`` are rewritten to the site's paths.
* ``<!-- cn3:config-reference -->`` is replaced by :func:`config_reference`: every key of the typed run
  configs with its type, default and documentation, walked from the dataclasses.
* ``<!-- cn3:tasks -->`` is replaced by :func:`tasks_table`: the task registry and each task's config.

The configs' documentation is each dataclass's ``Args:`` section, parsed by griffe (the docstring parser
mkdocstrings uses, so the reference and the API pages read the same text); a key without an entry is
documented in its class's docstring prose, which the table points to.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import typing
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: (heading, dataclass path) of each config the reference covers, as ``module:Class``
CONFIGS = (
    ("Sentence tasks (`cn3 train`)", "cn3.sentence.config:RunConfig"),
    ("Translation (`cn3 nmt train`)", "cn3.nmt.config:NMTConfig"),
)
CONFIG_MARK = "<!-- cn3:config-reference -->"
TASKS_MARK = "<!-- cn3:tasks -->"


def _load(path: str) -> type:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def _arg_docs(cls: type) -> dict[str, str]:
    """``{name: description}`` from the ``Args:`` sections of ``cls`` and its dataclass bases (Google style);
    an entry naming several keys (``heads, ff: ...``) documents each."""
    from griffe import Docstring, DocstringSectionKind

    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass) or not klass.__doc__:
            continue
        parsed = Docstring(inspect.cleandoc(klass.__doc__)).parse("google", warnings=False)
        for section in parsed:
            if section.kind is DocstringSectionKind.parameters:
                for param in section.value:
                    for name in re.split(r",\s*", param.name):
                        docs[name] = " ".join(param.description.split())
    return docs


def _type_name(hint) -> str:
    text = getattr(hint, "__name__", None) if not typing.get_args(hint) else None
    text = text or str(hint).replace("typing.", "").replace("pathlib.", "")
    return re.sub(r"<class '([^']+)'>", r"\1", text)


def config_keys(cls: type, prefix: str = "") -> list[tuple[str, str, str, str, str]]:
    """Every leaf key of the config dataclass ``cls``: ``(key, type, default, doc, class name)``, nested
    sections (fields that are dataclasses) walked with a dotted prefix."""
    hints = typing.get_type_hints(cls)
    docs = _arg_docs(cls)
    rows = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            rows += config_keys(hint, f"{prefix}{f.name}.")
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = "(required)"
        doc = docs.get(f.name) or _prose_mention(cls, f.name)
        rows.append((f"{prefix}{f.name}", _type_name(hint), repr(default) if isinstance(default, str) else
                     str(default), doc, cls.__name__))
    return rows


def _prose_mention(cls: type, name: str) -> str:
    """The first paragraph or bullet of ``cls``'s docstring that names ``name`` as ````name````, or ``""``."""
    text = inspect.cleandoc(cls.__doc__ or "")
    for chunk in re.split(r"\n\s*\n|\n(?=\* )", text):
        if f"``{name}``" in chunk:
            return " ".join(chunk.lstrip("* ").split())
    return ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def config_reference() -> str:
    """The reference's tables: one per config, a row per key."""
    parts = []
    for heading, path in CONFIGS:
        cls = _load(path)
        parts.append(f"## {heading}\n\n`{path.replace(':', '.')}`\n")
        parts.append("| key | type | default | meaning |\n|---|---|---|---|")
        for key, type_name, default, doc, owner in config_keys(cls):
            doc = doc or f"not in `{owner}`'s `Args:`; see its docstring"
            parts.append(f"| `{key}` | `{_cell(type_name)}` | `{_cell(default)}` | {_cell(doc)} |")
        parts.append("")
    return "\n".join(parts)


def tasks_table() -> str:
    """Every registered task: level, description, gold annotations and its shipped config."""
    from data_prep.tasks import TASKS

    rows = ["| task | level | what | gold annotations | shipped config |", "|---|---|---|---|---|"]
    for name, spec in TASKS.items():
        stem = spec.config or name
        config = f"`cn3/configs/{stem}.yaml`" if (REPO / "cn3" / "configs" / f"{stem}.yaml").is_file() else "-"
        gold = ", ".join(sorted(spec.gold)) or "-"
        rows.append(f"| `{name}` | {spec.level} | {_cell(spec.description)} | {gold} | {config} |")
    return "\n".join(rows)


def on_files(files, config):
    """Add RESULTS.md to the site as ``results.md``."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, "results.md", abs_src_path=str(REPO / "RESULTS.md")))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Fill the generated sections and point links at the site's copies of files outside ``docs/``."""
    if CONFIG_MARK in markdown:
        markdown = markdown.replace(CONFIG_MARK, config_reference())
    if TASKS_MARK in markdown:
        markdown = markdown.replace(TASKS_MARK, tasks_table())
    depth = page.file.src_uri.count("/")
    if page.file.src_uri == "results.md":  # RESULTS.md links into docs/ from the repository root
        return re.sub(r"\]\(docs/", "](", markdown)
    up = "../" * (depth + 1)
    return markdown.replace(f"]({up}RESULTS.md", f"]({'../' * depth}results.md")
