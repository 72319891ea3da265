"""Chunk/NER tag schemes: validation, spans and conversion between IOB1, IOB2 and BIOES.

A tag is ``O`` or ``PREFIX-TYPE``:

* ``IOB1`` (CoNLL-2003): ``I-X`` inside; ``B-X`` only to start a span right after another of type
  ``X``. A ``B-X`` elsewhere (eng.train has two) is unambiguous, so accepted unless ``strict=True``.
* ``IOB2`` (CoNLL-2000): ``B-X`` starts every span, ``I-X`` continues it.
* ``BIOES``: ``S-X`` single-token span; ``B-X`` (``I-X``)* ``E-X`` longer spans.

Spans are ``(type, start, end)``, ``end`` exclusive. Problems raise :class:`TagSchemeError` (a
:class:`DataError`) with ``index``, the offending tag's position, for readers to name file and line.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from cn3.util.errors import DataError

SCHEMES = ("IOB1", "IOB2", "BIOES")
OUTPUT_SCHEMES = ("BIOES", "IOB2")
_PREFIXES = {"IOB1": frozenset("IB"), "IOB2": frozenset("IB"), "BIOES": frozenset("BIOES") - {"O"}}

Span = tuple[str, int, int]


class TagSchemeError(DataError):
    """A tag sequence that is not valid in its scheme; ``index`` is the offending position."""

    def __init__(self, message: str, index: int):
        self.index = index
        super().__init__(message)


def check_scheme(scheme: str, allowed: Sequence[str] = SCHEMES) -> str:
    """``scheme`` upper-cased, or DataError when it is not one of ``allowed``."""
    name = str(scheme).upper()
    if name not in allowed:
        raise DataError(f"unknown tag scheme {scheme!r}; expected one of {', '.join(allowed)}")
    return name


def _split(tag: str, index: int, scheme: str, types: Collection[str] | None) -> tuple[str, str]:
    """``(prefix, type)`` of a tag; ``("O", "")`` for ``O``."""
    if tag == "O":
        return "O", ""
    prefix, dash, kind = tag.partition("-")
    if not dash or not kind or len(prefix) != 1 or prefix not in _PREFIXES[scheme]:
        expected = "O or " + "/".join(f"{p}-TYPE" for p in sorted(_PREFIXES[scheme]))
        raise TagSchemeError(f"tag {tag!r} is not valid {scheme}; expected {expected}", index)
    if types is not None and kind not in types:
        raise TagSchemeError(
            f"unknown tag type {kind!r} in {tag!r}; expected one of {', '.join(sorted(types))}", index
        )
    return prefix, kind


def spans(
    tags: Sequence[str], scheme: str, types: Collection[str] | None = None, strict: bool = False
) -> list[Span]:
    """The spans of a tag sequence, validating it against ``scheme`` (and the type inventory ``types``).

    ``strict`` only matters for IOB1: then ``B-X`` must follow a tag of type ``X``.
    """
    scheme = check_scheme(scheme)
    out: list[Span] = []
    start = -1  # start of the open span, -1 when none
    open_type = ""
    prev_prefix, prev_type = "O", ""
    for i, tag in enumerate(tags):
        prefix, kind = _split(tag, i, scheme, types)
        if scheme == "BIOES":
            if start >= 0 and (prefix not in "IE" or kind != open_type):
                raise TagSchemeError(
                    f"tag {tag!r} after {tags[i - 1]!r}: a BIOES span opened by B-{open_type} must "
                    f"continue with I-{open_type} or end with E-{open_type}",
                    i,
                )
            if prefix in "IE":
                if start < 0:
                    after = repr(tags[i - 1]) if i else "the sentence start"
                    raise TagSchemeError(
                        f"tag {tag!r} after {after}: in BIOES, {prefix}-{kind} must follow B-{kind} or I-{kind}",
                        i,
                    )
                if prefix == "E":
                    out.append((kind, start, i + 1))
                    start = -1
            elif prefix == "B":
                start, open_type = i, kind
            elif prefix == "S":
                out.append((kind, i, i + 1))
        else:
            if scheme == "IOB2":
                begins = prefix == "B"
                if prefix == "I" and (prev_prefix == "O" or prev_type != kind):
                    after = repr(tags[i - 1]) if i else "the sentence start"
                    raise TagSchemeError(
                        f"tag {tag!r} after {after}: in IOB2, I-{kind} must follow B-{kind} or I-{kind}", i
                    )
            else:  # IOB1
                begins = prefix == "B" or prev_type != kind
                if strict and prefix == "B" and prev_type != kind:
                    after = repr(tags[i - 1]) if i else "the sentence start"
                    raise TagSchemeError(
                        f"tag {tag!r} after {after}: in IOB1, B-{kind} is only used right after a {kind} span",
                        i,
                    )
            if start >= 0 and (prefix == "O" or begins):
                out.append((open_type, start, i))
                start = -1
            if prefix != "O" and begins:
                start, open_type = i, kind
        prev_prefix, prev_type = prefix, kind
    if start >= 0:
        if scheme == "BIOES":
            raise TagSchemeError(
                f"the sentence ends inside a BIOES span (B-{open_type} ... without E-{open_type})",
                len(tags) - 1,
            )
        out.append((open_type, start, len(tags)))
    return out


def from_spans(span_list: Sequence[Span], length: int, scheme: str) -> list[str]:
    """Tags of ``length`` tokens writing ``span_list`` (non-overlapping) in ``scheme``."""
    scheme = check_scheme(scheme)
    tags = ["O"] * length
    previous_end, previous_type = -1, ""
    for kind, start, end in sorted(span_list, key=lambda s: s[1]):
        if not 0 <= start < end <= length:
            raise DataError(f"span {(kind, start, end)} is outside a sentence of {length} tokens")
        if start < previous_end:
            raise DataError(f"span {(kind, start, end)} overlaps the previous span")
        if scheme == "BIOES":
            if end - start == 1:
                tags[start] = f"S-{kind}"
            else:
                tags[start] = f"B-{kind}"
                for j in range(start + 1, end - 1):
                    tags[j] = f"I-{kind}"
                tags[end - 1] = f"E-{kind}"
        else:
            first = "B" if scheme == "IOB2" or (start == previous_end and kind == previous_type) else "I"
            tags[start] = f"{first}-{kind}"
            for j in range(start + 1, end):
                tags[j] = f"I-{kind}"
        previous_end, previous_type = end, kind
    return tags


def convert(
    tags: Sequence[str],
    source: str,
    target: str,
    types: Collection[str] | None = None,
    strict: bool = False,
) -> list[str]:
    """Validate ``tags`` as ``source`` and rewrite them in ``target``; the span set is unchanged."""
    return from_spans(spans(tags, source, types, strict), len(tags), target)


def validate(
    tags: Sequence[str], scheme: str, types: Collection[str] | None = None, strict: bool = False
) -> None:
    """Raise :class:`TagSchemeError` unless ``tags`` is a valid ``scheme`` sequence."""
    spans(tags, scheme, types, strict)


def tag_inventory(types: Collection[str], scheme: str) -> tuple[str, ...]:
    """All tags of ``scheme`` over ``types``: ``O`` first, then by type and prefix."""
    scheme = check_scheme(scheme)
    prefixes = "BIES" if scheme == "BIOES" else "BI"
    return ("O",) + tuple(f"{p}-{t}" for t in sorted(types) for p in prefixes)
