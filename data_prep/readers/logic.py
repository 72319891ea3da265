"""Propositional-logic inference (Bowman et al., 2015): ``RELATION<TAB>left<TAB>right`` per line.

Files ``trainN.gz`` / ``testN.gz``: N is the number of operators (``and``, ``or``, ``not``) of the
pair's larger side, checked on every line; N = 12 is open-ended (12 to 19). Tokens are the
formula's pieces, brackets included, as Shen et al.'s loader reads them: WHY, without them a formula
is ambiguous (``not a and b``). ``meta["n_ops"]`` = N, ``meta["n_ops_pair"]`` = operators of both sides.
Splits (Shen et al., ICLR 2019): train = train0..train6 minus a seeded 10% (dev); test =
test0..test12, so short and long pairs can both be reported via ``n_ops``.

Gold trees: the bracketing as unlabelled dependency heads (:func:`operator_tree`), for tree
encoders; no POS.
"""

from __future__ import annotations

from pathlib import Path

from cn3.util.errors import DataError
from data_prep.example import Example, Sentence
from data_prep.readers.common import check_label, gc_paused, task_dir, unbracket
from data_prep.readers.splits import hold_out
from data_prep.taskspec import TaskOptions
from data_prep.textio import read_lines

LOGIC_LABELS = ("#", "<", ">", "=", "^", "v", "|")
OPERATORS = ("and", "or", "not")  # counted as tokens (list.count)
TRAIN_MAX_OPS = 6
TEST_MAX_OPS = 12
LAST_FILE = 12  # train12/test12 hold every pair with 12 or more operators on a side


def formula_tokens(formula: str) -> list[str]:
    """The pieces of a formula, brackets included: ``(not a)`` -> ``( not a )``."""
    return formula.replace("(", " ( ").replace(")", " ) ").split()


def operator_tree(formula: str) -> tuple[list[str], list[int]]:
    """Tokens of a bracketed formula (brackets kept, see the module doc) and their heads, 1-based
    with 0 = root.

    Each constituent is headed by its operator: in ``( not X )`` and ``( and X )`` / ``( or X )``
    the operator (the first child, a token) heads the other children; in ``( X ( and Y ) )`` the
    head of the last child (``and``) heads the others; a constituent's two brackets hang from its
    head. So ``( not a )`` has heads ``2 0 2 2``: ``not`` the root over ``(``, ``a`` and ``)``.
    Raises ``ValueError`` on unbalanced brackets.
    """
    tokens: list[str] = []
    heads: list[int] = []
    stack: list[list[tuple[int, bool]]] = [[]]  # per open constituent: each child's head and whether it is a bare token
    opened: list[int] = []  # the index of each open constituent's '('
    for piece in formula_tokens(formula):
        if piece == "(":
            opened.append(len(tokens))
            tokens.append(piece)
            heads.append(0)
            stack.append([])
        elif piece == ")":
            if len(stack) < 2:
                raise ValueError("a ')' closes no '('")
            children = stack.pop()
            if not children:
                raise ValueError("empty brackets '( )'")
            (first, first_is_token), (last, _) = children[0], children[-1]
            head = first if first_is_token and tokens[first] in OPERATORS and len(children) > 1 else last
            for child, _ in children:
                if child != head:
                    heads[child] = head + 1
            heads[opened.pop()] = head + 1
            tokens.append(piece)
            heads.append(head + 1)
            stack[-1].append((head, False))
        else:
            tokens.append(piece)
            heads.append(0)
            stack[-1].append((len(tokens) - 1, True))
    if len(stack) != 1:
        raise ValueError("a '(' is never closed")
    roots = [head for head, _ in stack[0]]
    for extra in roots[1:]:  # several top-level pieces (not in the data): the first heads the rest
        heads[extra] = roots[0] + 1
    return tokens, heads


def formula_sentence(formula: str, path: Path, number: int, side: str) -> Sentence:
    """A formula as a :class:`Sentence` with its operator tree (unlabelled); bad brackets name the line."""
    try:
        tokens, heads = operator_tree(formula)
    except ValueError as err:
        raise DataError(f"{side} formula: {err}", path, number) from None
    return Sentence(tokens, heads=heads)


@gc_paused
def read_logic(path: str | Path, n_ops: int | None = None, open_ended: bool = False) -> list[Example]:
    """One file; when ``n_ops`` is given, every pair must have exactly that many operators on its larger
    side (at least that many when ``open_ended``)."""
    path = Path(path)
    source = str(path)
    out = []
    for number, text in read_lines(path):
        if not text.strip():
            continue
        cells = text.split("\t")
        if len(cells) != 3:
            raise DataError(f"expected 3 tab-separated columns RELATION LEFT RIGHT, found {len(cells)}", path, number)
        label = check_label(cells[0], LOGIC_LABELS, path, number, "relation")
        for side, formula in (("left", cells[1]), ("right", cells[2])):
            if not unbracket(formula):
                raise DataError(f"empty {side} formula; expected a bracketed formula on both sides", path, number)
        left_sentence = formula_sentence(cells[1], path, number, "left")
        right_sentence = formula_sentence(cells[2], path, number, "right")
        left, right = left_sentence.tokens, right_sentence.tokens
        ops_left = left.count("and") + left.count("or") + left.count("not")
        ops_right = right.count("and") + right.count("or") + right.count("not")
        larger = max(ops_left, ops_right)
        if n_ops is not None and (larger < n_ops if open_ended else larger != n_ops):
            expected = f"{n_ops} or more" if open_ended else str(n_ops)
            raise DataError(
                f"pair has {ops_left} + {ops_right} operators; expected {expected} on its larger side (file index)",
                path,
                number,
            )
        meta = {"n_ops": larger if n_ops is None else n_ops, "n_ops_pair": ops_left + ops_right}
        out.append(Example([left_sentence, right_sentence], label, number, source, meta))
    return out


@gc_paused
def load_logic(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
    folder = task_dir(root, "logic_inference")
    train_all: list[Example] = []
    for n in range(TRAIN_MAX_OPS + 1):
        train_all.extend(read_logic(folder / f"train{n}.gz", n, n == LAST_FILE))
    test: list[Example] = []
    for n in range(TEST_MAX_OPS + 1):
        test.extend(read_logic(folder / f"test{n}.gz", n, n == LAST_FILE))
    train, dev = hold_out(train_all, options.seed)
    return {"train": train, "dev": dev, "test": test}
