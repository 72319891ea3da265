"""The raw-text tokenizer (IMDB, ``cn3 predict``)."""

from data_prep.tokenize import tokenize


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
