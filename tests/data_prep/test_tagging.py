"""Tag schemes: validation, spans, conversions (span sets preserved between IOB1, IOB2 and BIOES)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cn3.util.errors import DataError
from data_prep import tagging
from data_prep.tagging import TagSchemeError, convert, from_spans, spans, tag_inventory, validate

IOB1 = ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "O", "I-ORG"]
IOB2 = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "O", "B-ORG"]
BIOES = ["B-PER", "E-PER", "O", "S-LOC", "S-LOC", "O", "S-ORG"]
SPANS = [("PER", 0, 2), ("LOC", 3, 4), ("LOC", 4, 5), ("ORG", 6, 7)]


@pytest.mark.parametrize("tags,scheme", [(IOB1, "IOB1"), (IOB2, "IOB2"), (BIOES, "BIOES")])
def test_spans_of_each_scheme(tags, scheme):
    assert spans(tags, scheme) == SPANS
    assert from_spans(SPANS, len(tags), scheme) == tags


@pytest.mark.parametrize("source,tags", [("IOB1", IOB1), ("IOB2", IOB2), ("BIOES", BIOES)])
@pytest.mark.parametrize("target,expected", [("IOB1", IOB1), ("IOB2", IOB2), ("BIOES", BIOES)])
def test_convert_all_pairs(source, tags, target, expected):
    assert convert(tags, source, target) == expected


def test_iob1_b_after_o_is_lenient_unless_strict():
    tags = ["O", "B-MISC", "I-MISC"]
    assert spans(tags, "IOB1") == [("MISC", 1, 3)]
    with pytest.raises(TagSchemeError) as err:
        spans(tags, "IOB1", strict=True)
    assert err.value.index == 1


@pytest.mark.parametrize(
    "tags,scheme,index,fragment",
    [
        (["O", "I-NP"], "IOB2", 1, "I-NP must follow B-NP or I-NP"),
        (["I-NP"], "IOB2", 0, "sentence start"),
        (["B-NP", "I-VP"], "IOB2", 1, "I-VP must follow"),
        (["B-PER", "O"], "BIOES", 1, "continue with I-PER"),
        (["B-PER", "I-PER"], "BIOES", 1, "ends inside"),
        (["O", "E-PER"], "BIOES", 1, "E-PER must follow"),
        (["B-PER", "E-LOC"], "BIOES", 1, "continue with I-PER or end with E-PER"),
        (["S-PER"], "IOB1", 0, "not valid IOB1"),
        (["O", "E-PER"], "IOB2", 1, "not valid IOB2"),
        (["PER"], "IOB2", 0, "not valid"),
        (["B-"], "IOB2", 0, "not valid"),
        (["o"], "BIOES", 0, "not valid"),
    ],
)
def test_invalid_sequences(tags, scheme, index, fragment):
    with pytest.raises(TagSchemeError) as err:
        validate(tags, scheme)
    assert err.value.index == index
    assert fragment in str(err.value)
    assert isinstance(err.value, DataError)


def test_unknown_type():
    with pytest.raises(TagSchemeError) as err:
        validate(["O", "B-FOO"], "IOB2", types={"NP", "VP"})
    assert err.value.index == 1 and "unknown tag type 'FOO'" in str(err.value)


def test_unknown_scheme():
    with pytest.raises(DataError, match="unknown tag scheme"):
        convert(["O"], "IOB2", "BILOU")
    with pytest.raises(DataError, match="expected one of BIOES, IOB2"):
        tagging.check_scheme("IOB1", tagging.OUTPUT_SCHEMES)
    assert tagging.check_scheme("bioes") == "BIOES"


def test_from_spans_rejects_overlap_and_out_of_range():
    with pytest.raises(DataError, match="overlaps"):
        from_spans([("A", 0, 2), ("B", 1, 3)], 3, "IOB2")
    with pytest.raises(DataError, match="outside"):
        from_spans([("A", 2, 4)], 3, "IOB2")


def test_tag_inventory():
    assert tag_inventory(["PER"], "BIOES") == ("O", "B-PER", "I-PER", "E-PER", "S-PER")
    assert tag_inventory(["NP", "VP"], "IOB2") == ("O", "B-NP", "I-NP", "B-VP", "I-VP")


@st.composite
def span_sets(draw):
    """A sentence length and non-overlapping spans over it (adjacent spans of one type included)."""
    length = draw(st.integers(0, 12))
    out = []
    position = 0
    while position < length:
        position += draw(st.integers(0, 2))
        if position >= length:
            break
        end = draw(st.integers(position + 1, length))
        out.append((draw(st.sampled_from(["A", "B"])), position, end))
        position = end
    return length, out


@settings(max_examples=200, deadline=None)
@given(span_sets(), st.sampled_from(tagging.SCHEMES), st.sampled_from(tagging.SCHEMES))
def test_span_round_trip(case, first, second):
    length, span_list = case
    tags = from_spans(span_list, length, first)
    assert spans(tags, first) == span_list
    converted = convert(tags, first, second)
    assert spans(converted, second) == span_list
    assert convert(converted, second, first) == tags


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["O", "I-A", "B-A", "I-B", "B-B"]), max_size=12))
def test_any_iob_sequence_is_iob1_and_chain_preserves_spans(tags):
    expected = spans(tags, "IOB1")  # never raises without strict
    bioes = convert(tags, "IOB1", "BIOES")
    iob2 = convert(bioes, "BIOES", "IOB2")
    assert spans(bioes, "BIOES") == spans(iob2, "IOB2") == expected
    assert spans(convert(iob2, "IOB2", "IOB1"), "IOB1") == expected


#: BIOES as a regular language, each tag followed by a space: (O | S-X | B-X (I-X)* E-X)*.
BIOES_LANGUAGE = re.compile(r"(?:O |S-\w |B-(\w) (?:I-\1 )*E-\1 )*")


def bioes_valid(tags: list[str]) -> bool:
    return BIOES_LANGUAGE.fullmatch("".join(f"{tag} " for tag in tags)) is not None


def first_bioes_error(tags: list[str]) -> int:
    """The first position no valid sequence can have (the last one when only the end is missing)."""
    def completable(prefix):
        return bioes_valid(prefix) or any(bioes_valid([*prefix, f"E-{kind}"]) for kind in "AB")

    return next((i for i in range(len(tags)) if not completable(tags[: i + 1])), len(tags) - 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["O", "B-A", "I-A", "E-A", "S-A", "B-B", "E-B"]), max_size=10))
def test_random_bioes_either_valid_or_error_at_index(tags):
    try:
        found = spans(tags, "BIOES")
    except TagSchemeError as err:
        assert not bioes_valid(tags) and err.index == first_bioes_error(tags)
    else:
        assert bioes_valid(tags) and from_spans(found, len(tags), "BIOES") == tags
