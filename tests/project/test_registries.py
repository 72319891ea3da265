"""The registries a user extends are read in one place: the encoder names and levels the CLI shows
without importing torch are the imported registry's, read from the encoders' own ``@register`` lines."""

from __future__ import annotations

import pytest

from cn3.util.encoder_names import _registrations, encoder_levels, encoders_serving


def test_the_torch_free_table_is_the_registry_in_its_order():
    from cn3.encoders import ENCODERS

    assert encoder_levels() == {name: spec.levels for name, spec in ENCODERS.items()}
    assert list(encoder_levels()) == list(ENCODERS)
    assert encoders_serving("translation") == tuple(n for n, s in ENCODERS.items() if "translation" in s.levels)


def test_the_nmt_cli_offers_the_registrys_translation_encoders():
    from cli.nmt import TRANSLATION_ENCODERS, Encoder
    from cn3.encoders import ENCODERS

    assert TRANSLATION_ENCODERS == tuple(name for name, spec in ENCODERS.items() if "translation" in spec.levels)
    assert [e.value for e in Encoder] == list(TRANSLATION_ENCODERS)
    assert "hybrid" in TRANSLATION_ENCODERS and "treelstm" not in TRANSLATION_ENCODERS  # trees: sentences only


def test_a_new_encoder_module_is_read_with_its_levels_and_order(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text('@register("b", "p", levels=("graph", "node"), table_order=3)\ndef build_b(args): ...\n\n'
                    '@register("a", "p", levels=SENTENCE_LEVELS)\nclass A: ...\n\n'
                    '@other("x")\ndef f(): ...\n')
    assert _registrations(path) == [("b", ("graph", "node"), 3), ("a", ("graph", "pair", "node"), 100)]


def test_levels_it_cannot_read_fail_naming_the_line(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text('LV = ("graph",)\n\n@register("b", "p", levels=tuple(LV))\ndef build_b(args): ...\n')
    with pytest.raises(ValueError, match=r"mine\.py:3: levels="):
        _registrations(path)
    path.write_text('@register("b", "p", levels=("graph", "sentence"))\ndef build_b(args): ...\n')
    with pytest.raises(ValueError, match="unknown level"):
        _registrations(path)


def test_a_task_is_one_taskspec_its_readers_and_span_types_fields_of_it():
    import data_prep.tasks as tasks
    from data_prep.tagging import tag_inventory
    from data_prep.taskspec import TaskOptions

    for side_table in ("FILE_READERS", "TAGGING_TASKS", "SPAN_TYPES"):
        assert not hasattr(tasks, side_table), side_table
    assert {n for n, s in tasks.TASKS.items() if s.span_types} == {"conll2003", "conll2000"}
    assert tasks.TASKS["conll2003"].span_types == ("LOC", "MISC", "ORG", "PER")
    for scheme in ("IOB2", "BIOES"):
        spec = tasks.get_task("conll2000", TaskOptions(tag_scheme=scheme))
        assert spec.tag_scheme == scheme and spec.labels == tag_inventory(spec.span_types, scheme)
        assert "B-LST" in spec.labels  # fixed by the span types, though CoNLL-2000's train never uses LST
    assert tasks.TASKS["trec"].read_file is not None and tasks.TASKS["mr"].read_file is None  # labels from file names
