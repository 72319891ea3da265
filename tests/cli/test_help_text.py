"""Help text: prose paragraphs unwrapped, examples and lists kept, every command covered."""

from cli.help_text import unwrap
from cli.main import app


def test_prose_is_joined_and_examples_and_lists_keep_their_lines():
    doc = """First line.

    A paragraph wrapped
    at some width.

    Examples:

        cn3 train --task trec
        cn3 train --task snli

    - one
    - two
    """
    assert unwrap(doc) == ("First line.\n\nA paragraph wrapped at some width.\n\nExamples:\n\n"
                           "    cn3 train --task trec\n    cn3 train --task snli\n\n- one\n- two")


def test_every_command_has_its_unwrapped_docstring_as_help():
    def commands(typer_app):
        yield from typer_app.registered_commands
        for group in typer_app.registered_groups:
            yield from commands(group.typer_instance)

    infos = list(commands(app))
    assert len(infos) >= 8
    for info in infos:
        assert info.help == unwrap(info.callback.__doc__), info.name
    predict = next(i for i in infos if i.name == "predict")
    assert "(SNLI: \"does n't\"; MR, SUBJ, SICK: \"doesn't\"; custom: on spaces)" in predict.help
