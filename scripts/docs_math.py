"""MkDocs hook (mkdocs.yml ``hooks:``): equations rendered at build time and raw markup refused.

``pymdownx.arithmatex`` (generic mode) leaves ``\\[...\\]`` / ``\\(...\\)`` in ``arithmatex`` elements;
this hook replaces each with MathML from ``latex2mathml`` (pure Python), which browsers render
natively: no JavaScript, no fonts, nothing fetched from a CDN. Then it warns (so ``mkdocs build
--strict`` fails) on what would reach a reader unrendered: a LaTeX command latex2mathml left as text,
a Sphinx role (``:class:`` ...) or a ``.. math::`` directive.
"""

from __future__ import annotations

import html
import importlib.util
import logging
import re
from pathlib import Path

from latex2mathml.converter import convert

_spec = importlib.util.spec_from_file_location("docs_sphinx_roles", Path(__file__).with_name("docs_sphinx_roles.py"))
roles = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(roles)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)

log = logging.getLogger("mkdocs.plugins.cn3_docs_math")

ARITHMATEX = re.compile(r'<(div|span) class="arithmatex">(.*?)</\1>', re.S)
RAW_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|obj|exc|math):(?:<code>|`)")
LEFT_COMMAND = re.compile(r"\\[A-Za-z]+")


def _mathml(match: re.Match, page: str) -> str:
    """One arithmatex element as ``<math>``: ``display="block"`` for a ``div``."""
    tag, body = match.groups()
    latex = html.unescape(body).strip()
    block = tag == "div"
    latex = latex[2:-2] if latex[:2] in ("\\[", "\\(") else latex  # arithmatex's generic delimiters
    mathml = convert(latex, display="block" if block else "inline")
    left = LEFT_COMMAND.findall(mathml)
    if left:
        log.warning("%s: latex2mathml left %s unrendered in %r", page, ", ".join(sorted(set(left))), latex[:80])
    return mathml


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Sphinx roles in a page's own Markdown (the generated configuration reference quotes
    docstrings) as cross-references, as the Griffe extension does for the API pages; code fences
    are left alone."""
    parts, last = [], 0
    for fence in FENCE.finditer(markdown):
        parts += [roles.convert(markdown[last:fence.start()]), fence.group(0)]
        last = fence.end()
    return "".join(parts) + roles.convert(markdown[last:])


def on_post_page(output: str, page, config) -> str:
    """The page's equations as MathML; a warning per raw role, directive or unrendered command."""
    name = page.file.src_uri
    output = ARITHMATEX.sub(lambda m: _mathml(m, name), output)
    text = re.sub(r"<pre[^>]*>.*?</pre>", "", output, flags=re.S)  # a code block may show roles on purpose
    for found in RAW_ROLE.findall(text) + re.findall(r"\.\. math::", text):
        log.warning("%s: raw Sphinx markup %r in the built page (scripts/docs_sphinx_roles.py converts docstrings)",
                    name, found)
    return output
