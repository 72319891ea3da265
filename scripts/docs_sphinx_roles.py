"""A Griffe extension (mkdocs.yml, mkdocstrings ``extensions:``): the docstrings' Sphinx markup as
Markdown the site renders. The sources keep Sphinx's roles (PyG's style, and what ``help()`` shows);
the site gets links and equations:

* ``:class:`~a.b.C``` (and ``func``, ``meth``, ``mod``, ``attr``, ``data``, ``obj``, ``exc``) becomes
  an optional autorefs cross-reference: a link where the object is documented on the site, the name
  in code font where it is not (PyTorch, PyG), never the raw role. ``~`` shows the last name only.
* ``.. math::`` blocks become ``$$ ... $$`` and ``:math:`x``` becomes ``\\(x\\)``, which
  ``pymdownx.arithmatex`` keeps for ``scripts/docs_math.py`` to render as MathML.
"""

from __future__ import annotations

import re

from griffe import Extension, Object

ROLE = re.compile(r":(?:py:)?(class|func|meth|mod|attr|data|obj|exc):`(~?)([^`<]+?)`")
MATH_ROLE = re.compile(r":math:`([^`]+)`")
MATH_BLOCK = re.compile(r"^(?P<indent>[ \t]*)\.\. math::[ \t]*\n(?P<body>(?:(?P=indent)[ \t]+\S.*\n|[ \t]*\n)+)",
                        re.M)


def _reference(match: re.Match) -> str:
    """One role as an optional autorefs reference, its title the (short) name in code font."""
    _, short, target = match.groups()
    target = target.strip()
    title = target.rsplit(".", 1)[-1] if short else target
    return f'<autoref identifier="{target}" optional><code>{title}</code></autoref>'


def _math_block(match: re.Match) -> str:
    """A ``.. math::`` directive as an arithmatex ``$$`` block at the directive's indentation."""
    indent = match.group("indent")
    lines = [line.strip() for line in match.group("body").splitlines() if line.strip()]
    return f"{indent}$$\n" + "".join(f"{indent}{line}\n" for line in lines) + f"{indent}$$\n\n"


def convert(text: str) -> str:
    """``text`` with its Sphinx roles and math directives as Markdown (see the module docstring)."""
    added = not text.endswith("\n")  # a directive may close the text
    text = MATH_BLOCK.sub(_math_block, text + "\n" if added else text)
    text = MATH_ROLE.sub(lambda m: "\\(" + m.group(1) + "\\)", text)
    text = ROLE.sub(_reference, text)
    return text.rstrip("\n") if added else text


class SphinxRoles(Extension):
    """Rewrites every loaded object's docstring with :func:`convert`."""

    def on_instance(self, *, obj: Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value)
