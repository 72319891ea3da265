"""Constituency trees in PTB bracket notation (``.mrg``): read, cleaned of traces and function tags."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

from cn3.util.errors import DataError


@dataclass(frozen=True)
class Tree:
    """A constituency tree: a label and children, each a ``Tree`` or a word (``str``)."""

    label: str
    children: tuple[Union["Tree", str], ...]


_BRACKET_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def parse_brackets(text: str, source: str = "<text>") -> list[tuple[Tree, int]]:
    """Every tree of a PTB bracketed text (``.mrg``) with the 1-based line it starts on.

    ``(S (NP (DT the) (NN cat)) (VP (VBD sat)))``: a node is ``(LABEL child ...)``, a word a token
    without brackets; PTB files wrap each sentence in an unlabelled bracket ``( (S ...) )``, kept
    here as a node labelled ``""``. Unbalanced brackets are a ``DataError``.
    """
    trees: list[tuple[Tree, int]] = []
    stack: list[tuple[str, list, int]] = []  # open nodes: label, children so far, line
    label_next = False  # the token after "(" is the node's label
    for number, line in enumerate(text.splitlines(), start=1):
        for token in _BRACKET_TOKEN.findall(line):
            if token == "(":
                stack.append(("", [], number))
                label_next = True
            elif token == ")":
                if not stack:
                    raise DataError("unbalanced ')': no open bracket", source, number)
                label, children, start = stack.pop()
                node = Tree(label, tuple(children))
                if stack:
                    stack[-1][1].append(node)
                else:
                    trees.append((node, start))
                label_next = False
            elif label_next:
                _, children, start = stack.pop()
                stack.append((token, children, start))
                label_next = False
            elif stack:
                stack[-1][1].append(token)
            else:
                raise DataError(f"word {token!r} outside any bracket", source, number)
    if stack:
        raise DataError("unbalanced '(': the last tree is not closed", source, stack[0][2])
    return trees


def clean_tree(tree: Tree) -> Tree | None:
    """The tree without traces and function tags, as parsers output it: ``-NONE-`` words dropped with
    the constituents left empty, ``NP-SBJ-1`` read as ``NP`` (tags such as ``-LRB-`` kept), and the
    unlabelled wrapping bracket of a PTB sentence removed."""
    if tree.label == "-NONE-":
        return None
    children = tuple(c if isinstance(c, str) else clean_tree(c) for c in tree.children)
    children = tuple(c for c in children if c is not None)
    if not children:
        return None
    if tree.label == "" and len(children) == 1 and isinstance(children[0], Tree):
        return children[0]
    label = tree.label if tree.label.startswith("-") else re.split(r"[-=]", tree.label)[0]
    return Tree(label, children)


def words(tree: Tree) -> list[str]:
    """The words of a tree, left to right."""
    return [w for c in tree.children for w in ([c] if isinstance(c, str) else words(c))]
