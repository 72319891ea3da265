"""A small PTB-like regex tokenizer for raw text (IMDB reviews, ``cn3 predict`` input).

``n't`` and the clitics ``'s 're 've 'll 'd 'm`` are separate tokens (``don't`` -> ``do n't``,
``can't`` -> ``ca n't``), numbers keep inner ``.,:/`` (``7/10``, ``1,000``), abbreviations and
initials keep their periods (``U.S.``, ``B.``), words keep inner hyphens (``well-made``), ``...``
is one token, any other non-space character is a token of its own. ``<br />`` tags become spaces.
Case is kept.

:func:`tokenize_attached_clitics` keeps words with inner apostrophes whole (``don't``, ``it's``) and
``--`` as one token, as the MR, SUBJ and SICK files are written (it reproduces far more of their
lines than :func:`tokenize`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

BR_RE = re.compile(r"<br\s*/?>", re.IGNORECASE)
TOKEN_PATTERN = r"""\w+(?=n't\b)             # "do" of "don't"
      | n't\b
      | '(?:s|re|ve|ll|d|m)\b    # clitics
      | \d+(?:[.,:/]\d+)+        # 1,000  3.5  7/10  10:30
      | (?:[a-z]\.){2,}          # U.S.  e.g.
      | [a-z]\.$                 # an initial at the end of a chunk: "Susan B. Anthony"
      | \w+(?:-\w+)*             # words, hyphenated words
      | \.\.+                    # ellipsis
      | \S                       # any other character
"""
TOKEN_RE = re.compile(TOKEN_PATTERN, re.IGNORECASE | re.VERBOSE)
ATTACHED_RE = re.compile(r"\w+(?:-\w+)*(?:'\w+)+ | --+ |" + TOKEN_PATTERN, re.IGNORECASE | re.VERBOSE)


def tokenize(text: str) -> list[str]:
    """Tokens of a raw review (``<br />`` removed), see the module docstring."""
    return _split(text, TOKEN_RE.findall)


def tokenize_attached_clitics(text: str) -> list[str]:
    """:func:`tokenize`, but ``don't``, ``it's`` and ``--`` are one token each (:data:`ATTACHED_RE`)."""
    return _split(text, ATTACHED_RE.findall)


def _split(text: str, findall: Callable[[str], list[str]]) -> list[str]:
    """Whitespace-separated chunks that are plain ASCII letters/digits are tokens as they are (the regex
    would return them unchanged); only the other chunks go through ``findall``."""
    out: list[str] = []
    append, extend = out.append, out.extend
    for chunk in BR_RE.sub(" ", text).split():
        if chunk.isalnum() and chunk.isascii():
            append(chunk)
        else:
            extend(findall(chunk))
    return out
