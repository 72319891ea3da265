"""The paper's "Spell" node attribute: a word's spelling/shape as a few binary features.

CN3 (Liu et al., 2019, Table 3 "+char+Spell") adds hand-made spelling features in the style of
Huang et al. (2015): capitalisation pattern, digits, punctuation. They are a fixed function of the
word, so they need no vocabulary and are identical at train and test time.
"""

from __future__ import annotations

import unicodedata

SPELL_FEATURES = (
    "init_cap",      # Paris
    "all_caps",      # NATO
    "all_lower",     # paris
    "mixed_case",    # iPhone
    "has_digit",     # 3rd
    "all_digit",     # 1999, 3,000.50
    "is_punct",      # , . ?
    "has_punct",     # U.S. , well-known , 's
    "has_hyphen",    # well-known
    "has_apostrophe",  # 's n't
    "is_long",       # more than 12 characters
)


def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch).startswith(("P", "S"))


def spell_features(word: str) -> tuple[int, ...]:
    """Binary features of ``word`` in the order of ``SPELL_FEATURES``."""
    letters = [c for c in word if c.isalpha()]
    n_upper = sum(c.isupper() for c in letters)
    n_digit = sum(c.isdigit() for c in word)
    n_punct = sum(_is_punct(c) for c in word)
    init_cap = bool(letters) and word[0].isupper() and n_upper == 1
    all_caps = len(letters) > 1 and n_upper == len(letters)
    all_lower = bool(letters) and n_upper == 0
    return (
        int(init_cap),
        int(all_caps),
        int(all_lower),
        int(bool(letters) and not (init_cap or all_caps or all_lower)),
        int(n_digit > 0),
        int(n_digit > 0 and n_digit + word.count(",") + word.count(".") == len(word)),
        int(n_punct == len(word) > 0),
        int(0 < n_punct < len(word)),
        int("-" in word),
        int("'" in word or "\u2019" in word),
        int(len(word) > 12),
    )
