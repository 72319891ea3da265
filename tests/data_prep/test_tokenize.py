"""The raw-text tokenizers (IMDB, ``cn3 predict``) and which one each task uses."""

import pytest

from data_prep.tasks import text_tokenizer
from data_prep.tokenize import tokenize, tokenize_attached_clitics


def test_clitics_numbers_hyphens_ellipsis_and_breaks():
    text = "I don't think it's 7/10...<br /><br />Well-made, 1,000 films!"
    assert tokenize(text) == [
        "I", "do", "n't", "think", "it", "'s", "7/10", "...", "Well-made", ",", "1,000", "films", "!"
    ]  # fmt: skip


def test_abbreviations_and_initials_keep_their_periods():
    assert tokenize("What is Susan B. Anthony's birthday?") == [
        "What", "is", "Susan", "B.", "Anthony", "'s", "birthday", "?"]
    assert tokenize("The U.S. army left.") == ["The", "U.S.", "army", "left", "."]


def test_pretokenized_text_is_unchanged():
    text = "What is Susan B. Anthony 's birthday ?"
    assert tokenize(text) == text.split()


def test_attached_clitics_keep_words_whole_as_the_mr_files_do():
    text = "It doesn't feel like the writer-director's film -- it's 7/10..."
    assert tokenize_attached_clitics(text) == [
        "It", "doesn't", "feel", "like", "the", "writer-director's", "film", "--", "it's", "7/10", "..."]
    assert tokenize_attached_clitics("do n't , it 's") == ["do", "n't", ",", "it", "'s"]  # split ones stay split


@pytest.mark.parametrize("task, least", [("mr", 90.0), ("subj", 90.0), ("sick", 96.0)])
def test_each_task_tokenizer_reproduces_its_files(task, least, load_real):
    """Raw text split by the task's ``tokenize_text`` matches the task's own tokens (space-joined)."""
    tokenize_text = text_tokenizer(task)
    sentences = [s.tokens for split in load_real(task).values() for ex in split for s in ex.sentences]
    same = sum(tokenize_text(" ".join(tokens)) == tokens for tokens in sentences)
    assert 100 * same / len(sentences) >= least
    if task != "sick":  # SICK has few clitics: both tokenizers agree on 96% of it
        assert sum(tokenize(" ".join(t)) == t for t in sentences) < 0.7 * same


def test_raw_text_tokenizers_per_task():
    assert text_tokenizer("snli")("It's") == ["It", "'s"]
    assert text_tokenizer("mr")("It's") == ["It's"]
    assert text_tokenizer("custom")("It's fine.") == ["It's", "fine."]  # custom files are split on spaces
    assert text_tokenizer("logic")("(not a) or b") == ["(", "not", "a", ")", "or", "b"]  # brackets are tokens


def test_raw_formulas_keep_their_operator_tree():
    from cn3.sentence.inference import text_examples
    from cn3.util.errors import DataError

    [example] = text_examples(["( a ( and b ) )\t( not c )"], {"level": "pair", "task": "logic"})
    assert [(s.tokens, s.heads) for s in example.sentences] == [
        (["(", "a", "(", "and", "b", ")", ")"], [4, 4, 4, 0, 4, 4, 4]), (["(", "not", "c", ")"], [2, 0, 2, 2])]
    [plain] = text_examples(["Who wrote Hamlet ?"], {"level": "graph", "task": "trec"})
    assert plain.sentences[0].heads is None  # English text gets its trees from the run's annotator
    with pytest.raises(DataError, match=r"in.txt, line 2: a '\(' is never closed"):
        text_examples(["a\tb", "( a\tb"], {"level": "pair", "task": "logic"}, source="in.txt")
