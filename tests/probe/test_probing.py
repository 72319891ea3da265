"""Probing tasks (Conneau et al., 2018) rebuilt from the treebanks: every builder on hand-made sentences
and trees with literal expectations, balance, seeding and lexical splits, and one real ``prepare``."""

from __future__ import annotations

import random
import zipfile
from collections import Counter

import pytest

from cn3.util.errors import DataError
from data_prep.example import Example, Sentence
from data_prep.prepare import PrepareSettings, prepare
from data_prep.probing import brackets, selection, semantic, splitting, surface, syntactic, treebank_zip
from data_prep.tasks import TASKS

PROBES = ["probe_sentlen", "probe_wc", "probe_bshift", "probe_tense", "probe_subjnum", "probe_objnum",
          "probe_somo", "probe_coordinv", "probe_treedepth", "probe_topconst"]


def conllu(rows: str, line: int = 1) -> Example:
    """An EWT-like example from ``FORM UPOS XPOS HEAD DEPREL`` rows, one word per line."""
    cells = [r.split() for r in rows.strip().splitlines()]
    sentence = Sentence([c[0] for c in cells], [c[1] for c in cells], [c[2] for c in cells],
                        [int(c[3]) for c in cells], [c[4] for c in cells])
    return Example([sentence], None, line, "hand.conllu")


def filler(n: int, tag: str, label: str = "x") -> list[str]:
    """Rows of ``n`` distinct adverbs attached to word 2 (padding a sentence to length)."""
    return [f"{label}{tag}{k} ADV RB 2 advmod" for k in range(n)]


def labels_per_split(splits: dict) -> dict:
    return {name: Counter(ex.label for ex in items) for name, items in splits.items()}


def tokens(ex: Example) -> list[str]:
    return ex.sentences[0].tokens


# --- shared steps -----------------------------------------------------------------------------------

def test_eligible_keeps_5_to_28_tokens_once():
    short = Example([Sentence(["a", "b", "c", "d"])])
    five = Example([Sentence(["a", "b", "c", "d", "e"])])
    again = Example([Sentence(["a", "b", "c", "d", "e"])])
    long = Example([Sentence([str(i) for i in range(29)])])
    longest = Example([Sentence([str(i) for i in range(28)])])
    assert selection.eligible([short, five, again, long, longest]) == [five, longest]


def test_balance_downsamples_to_the_smallest_class_and_is_seeded():
    examples = [Example([Sentence([str(i)])], label) for i, label in enumerate("aaaaabbbcc")]
    kept = splitting.balance(examples, random.Random(1))
    assert Counter(ex.label for ex in kept) == {"a": 2, "b": 2, "c": 2}
    assert kept == splitting.balance(examples, random.Random(1))  # same seed, same items
    assert [examples.index(ex) for ex in kept] == sorted(examples.index(ex) for ex in kept)  # order kept


def test_stratified_split_is_80_10_10_per_class():
    examples = [Example([Sentence([str(i)])], label) for label in "ab" for i in range(20)]
    splits = splitting.stratified_split(examples, random.Random(3))
    assert labels_per_split(splits) == {"train": {"a": 16, "b": 16}, "dev": {"a": 2, "b": 2}, "test": {"a": 2, "b": 2}}
    again = splitting.stratified_split(examples, random.Random(3))
    assert all(splits[s] == again[s] for s in splits)
    other = splitting.stratified_split(examples, random.Random(4))
    assert splits["test"] != other["test"]


def test_lexical_split_puts_each_form_in_one_split():
    examples = [Example([Sentence(["w", str(k)])], label, meta={"target": f"{label}{form}"})
                for label in ("PAST", "PRES") for form in range(30) for k in range(1 + form % 4)]
    splits = splitting.lexical_split(examples, 13, "t")
    forms = {name: {ex.meta["target"] for ex in items} for name, items in splits.items()}
    assert not forms["train"] & forms["dev"] and not forms["train"] & forms["test"] and not forms["dev"] & forms["test"]
    for counts in labels_per_split(splits).values():
        assert counts["PAST"] == counts["PRES"] > 0  # balanced within every split
    sizes = [len(splits[s]) for s in ("train", "dev", "test")]
    assert sizes[0] > 5 * sizes[1] and sizes[1] > 0 and sizes[2] > 0
    assert splits == splitting.lexical_split(examples, 13, "t")


# --- SentLen ----------------------------------------------------------------------------------------

def test_length_bins_are_conneaus():
    assert [surface.length_bin(n) for n in (4, 5, 8, 9, 12, 13, 20, 21, 25, 26, 28, 29)] == [
        None, "5-8", "5-8", "9-12", "9-12", "13-16", "17-20", "21-25", "21-25", "26-28", "26-28", None]


def test_probe_sentlen_balanced_and_seeded():
    treebank = [Example([Sentence([f"w{n}_{k}"] * n)], line=n * 100 + k) for n in range(3, 31) for k in range(10)]
    splits = surface.probe_sentlen(treebank, 7)
    # bin 5-8 has 4 lengths x 10 sentences, 26-28 only 3 x 10: every bin is cut to 30
    assert labels_per_split(splits)["train"] == dict.fromkeys(("5-8", "9-12", "13-16", "17-20", "21-25", "26-28"), 24)
    assert all(len(splits[s]) == 18 for s in ("dev", "test"))
    assert all(surface.length_bin(len(tokens(ex))) == ex.label for items in splits.values() for ex in items)
    assert splits == surface.probe_sentlen(treebank, 7)
    assert splits != surface.probe_sentlen(treebank, 8)
    assert splits["train"][0].sentences[0].upos is None  # raw tokens: no annotation goes along


# --- WC ---------------------------------------------------------------------------------------------

def test_word_content_needs_exactly_one_target_once():
    targets = frozenset({"meeting", "long"})
    assert surface.word_content(["The", "Meeting", "was", "short"], targets) == "meeting"
    assert surface.word_content(["The", "meeting", "was", "long"], targets) is None  # two targets
    assert surface.word_content(["meeting", "after", "meeting"], targets) is None  # one target twice
    assert surface.word_content(["nothing", "here"], targets) is None


def test_wc_targets_skip_short_words_and_words_without_sentences_of_their_own():
    counts = Counter({"the": 50, "city": 9, "of": 8, "rain": 7, "new": 6, "snow": 5, "cold": 4})
    sentences = ([["rain", "in", "the", "city"]] * 3 + [["city", "lights"]] * 3 + [["snow", "falls"]] * 3
                 + [["cold", "wind"]] * 3)
    # from rank 2 on ("the" is rank 1), words of 4+ letters: city, rain, snow, cold ("of", "new" are short)
    assert surface.wc_targets(sentences, counts, start=1, n_words=1, min_sentences=1) == ["city"]
    # rain is never the one target (city is in all its sentences): the next word, snow, takes its place
    assert surface.wc_targets(sentences, counts, start=1, n_words=2, min_sentences=1) == ["city", "snow"]
    # only city is in 4+ sentences: fewer targets than asked rather than weak ones
    assert surface.wc_targets(sentences, counts, start=1, n_words=2, min_sentences=4) == ["city"]


# --- BShift -----------------------------------------------------------------------------------------

def test_shift_positions_exclude_first_token_punctuation_and_equal_words():
    words = ["He", "said", ",", "very", "very", "well", "."]
    upos = ["PRON", "VERB", "PUNCT", "ADV", "ADV", "ADV", "PUNCT"]
    assert syntactic.shift_positions(words, upos) == [4]  # (very, well); (very, very) would change nothing
    assert syntactic.shift_bigram(words, 4) == ["He", "said", ",", "very", "well", "very", "."]


def test_probe_bshift_makes_one_adjacent_swap_in_half():
    treebank = [conllu("\n".join([f"S{k} PRON PRP 2 nsubj", "saw VERB VBD 0 root", *filler(4, str(k)),
                                  ", PUNCT , 2 punct", f"it{k} PRON PRP 2 obj", ". PUNCT . 2 punct"]), line=k)
                for k in range(40)]
    treebank.append(conllu('I PRON PRP 2 nsubj\nsaid VERB VBD 0 root\n" PUNCT `` 2 punct\nno INTJ UH 2 obj\n'
                           'way NOUN NN 2 obj\n" PUNCT \'\' 2 punct', line=999))  # double quotes: left out
    splits = syntactic.probe_bshift(treebank, 5)
    by_line = {ex.line: ex for ex in treebank}
    items = [ex for part in splits.values() for ex in part]
    assert Counter(ex.label for ex in items) == {"I": 20, "O": 20}
    for ex in items:
        original = by_line[ex.line].sentences[0]
        changed = [i for i, (a, b) in enumerate(zip(original.tokens, tokens(ex))) if a != b]
        if ex.label == "O":
            assert changed == []
            continue
        i = ex.meta["position"]
        assert changed == [i, i + 1] and i >= 1
        assert tokens(ex)[i:i + 2] == original.tokens[i:i + 2][::-1]
        assert "PUNCT" not in (original.upos[i], original.upos[i + 1])
    assert splits == syntactic.probe_bshift(treebank, 5)


# --- Tense, SubjNum, ObjNum -------------------------------------------------------------------------

def test_tense_of_the_root_or_its_copula():
    assert semantic.tense(conllu("She PRON PRP 2 nsubj\nlaughed VERB VBD 0 root\nloudly ADV RB 2 advmod")
                         .sentences[0]) == ("PAST", "laughed")
    assert semantic.tense(conllu("She PRON PRP 3 nsubj\nis AUX VBZ 3 cop\nhappy ADJ JJ 0 root")
                         .sentences[0]) == ("PRES", "is")
    assert semantic.tense(conllu("They PRON PRP 2 nsubj\nknow VERB VBP 0 root\nit PRON PRP 2 obj")
                         .sentences[0]) == ("PRES", "know")
    assert semantic.tense(conllu("She PRON PRP 3 nsubj\nhas AUX VBZ 3 aux\neaten VERB VBN 0 root")
                         .sentences[0]) is None  # the main verb is VBN


def test_subject_and_object_number():
    dogs = conllu("Dogs NOUN NNS 2 nsubj\nchase VERB VBP 0 root\ncats NOUN NNS 2 obj").sentences[0]
    assert semantic.subject_number(dogs) == ("NNS", "dogs")
    assert semantic.object_number(dogs) == ("NNS", "cats")
    dog = conllu("The DET DT 2 det\ndog NOUN NN 3 nsubj\nbarks VERB VBZ 0 root").sentences[0]
    assert semantic.subject_number(dog) == ("NN", "dog") and semantic.object_number(dog) is None
    passive = conllu("Letters NOUN NNS 3 nsubj:pass\nwere AUX VBD 3 aux:pass\nsent VERB VBN 0 root").sentences[0]
    assert semantic.subject_number(passive) == ("NNS", "letters")
    assert semantic.subject_number(conllu("She PRON PRP 2 nsubj\nsleeps VERB VBZ 0 root").sentences[0]) is None
    assert semantic.subject_number(conllu("Paris PROPN NNP 2 nsubj\nsleeps VERB VBZ 0 root").sentences[0]) is None


def tense_treebank() -> list[Example]:
    """20 past and 20 present verb forms, each in 3 + (k % 3) sentences."""
    out = []
    for tag, suffix in (("VBD", "ed"), ("VBZ", "s")):
        for k in range(20):
            for j in range(3 + k % 3):
                rows = [f"Someone{j} PRON NN 2 nsubj", f"v{k}{suffix} VERB {tag} 0 root", *filler(3, f"{k}{tag}{j}")]
                out.append(conllu("\n".join(rows), line=len(out) + 1))
    return out


def test_probe_tense_splits_by_verb_form():
    splits = semantic.probe_tense(tense_treebank(), 13)
    forms = {name: {ex.meta["target"] for ex in items} for name, items in splits.items()}
    assert not forms["train"] & forms["dev"] and not forms["train"] & forms["test"] and not forms["dev"] & forms["test"]
    for name, counts in labels_per_split(splits).items():
        assert counts["PAST"] == counts["PRES"] > 0, name
    assert all(ex.meta["target"] in tokens(ex) and ex.label == ("PAST" if ex.meta["target"].endswith("ed") else "PRES")
               for items in splits.values() for ex in items)
    assert splits == semantic.probe_tense(tense_treebank(), 13)


# --- SOMO -------------------------------------------------------------------------------------------

def test_frequency_bands():
    assert [semantic.frequency_band(n) for n in (4, 7, 8, 15, 16, 100)] == [2, 2, 3, 3, 4, 6]


def test_odd_man_out_replaces_with_the_same_tag_and_band():
    sentence = conllu("The DET DT 2 det\ncat NOUN NN 3 nsubj\nsat VERB VBD 0 root\non ADP IN 6 case\n"
                      "the DET DT 6 det\nmat NOUN NN 3 obl").sentences[0]
    counts = Counter({"cat": 6, "dog": 5, "mat": 2, "sat": 30, "cow": 9})
    assert semantic.somo_positions(sentence, counts) == [1, 2]  # mat is too rare (2 < 5)
    vocab = {("NN", 2): ["cat", "dog"], ("NN", 3): ["cow"], ("VBD", 4): ["sat"]}
    # "sat" has no other word in its band, "cat" has one: "dog" (not "cow", another band)
    assert semantic.odd_man_out(sentence, counts, vocab, random.Random(0)) == (1, "dog")


def somo_treebank() -> list[Example]:
    """Sentences "The nounK verbs the nounJ ..." whose nouns and verbs are 5-8 times in the corpus."""
    out = []
    letters = "abcdefghijkl"  # replaceable words are alphabetic
    for k in range(60):
        rows = ["The DET DT 2 det", f"noun{letters[k % 12]} NOUN NN 3 nsubj", f"verb{letters[k % 10]} VERB VBZ 0 root",
                "the DET DT 5 det", f"noun{letters[(k + 5) % 12]} NOUN NN 3 obj", f"x{k} ADV RB 3 advmod",
                ". PUNCT . 3 punct"]
        out.append(conllu("\n".join(rows), line=k + 1))
    return out


def test_probe_somo_changes_one_word_in_half_with_replacements_per_split():
    treebank = somo_treebank()
    splits = semantic.probe_somo(treebank, 2)
    by_line = {ex.line: ex for ex in treebank}
    replacements = {}
    for name, items in splits.items():
        assert Counter(ex.label for ex in items)["C"] == Counter(ex.label for ex in items)["O"] > 0, name
        replacements[name] = {ex.meta["replacement"] for ex in items if ex.label == "C"}
        for ex in items:
            original = by_line[ex.line].sentences[0]
            changed = [i for i, (a, b) in enumerate(zip(original.tokens, tokens(ex))) if a != b]
            if ex.label == "O":
                assert changed == []
            else:
                i = ex.meta["position"]
                assert changed == [i] and ex.meta["original"] == original.tokens[i]
                assert ex.meta["replacement"] == tokens(ex)[i] and ex.meta["replacement"][:4] == original.tokens[i][:4]
    assert not replacements["train"] & (replacements["dev"] | replacements["test"])
    assert not replacements["dev"] & replacements["test"]
    lines = [ex.line for items in splits.values() for ex in items]
    assert len(lines) == len(set(lines))  # no sentence in both versions
    assert splits == semantic.probe_somo(treebank, 2)


# --- CoordInv ---------------------------------------------------------------------------------------

CAME_BUT_LEFT = """I PRON PRP 2 nsubj
came VERB VBD 0 root
, PUNCT , 6 punct
but CCONJ CC 6 cc
she PRON PRP 6 nsubj
left VERB VBD 2 conj
. PUNCT . 2 punct"""
CAT_AND_DOG = """The DET DT 2 det
cat NOUN NN 3 nsubj
slept VERB VBD 0 root
and CCONJ CC 7 cc
the DET DT 6 det
dog NOUN NN 7 nsubj
barked VERB VBD 3 conj
loudly ADV RB 7 advmod
. PUNCT . 7 punct"""


def test_coordination_and_its_inversion():
    parts = semantic.coordination(conllu(CAME_BUT_LEFT).sentences[0])
    assert parts == semantic.Coordination(["I", "came"], [",", "but"], ["she", "left"], ["."])
    assert semantic.invert_coordination(parts, "PRP") == ["She", "left", ",", "but", "I", "came", "."]
    parts = semantic.coordination(conllu(CAT_AND_DOG).sentences[0])  # the final "." hangs on the conjunct
    assert parts == semantic.Coordination(["The", "cat", "slept"], ["and"], ["the", "dog", "barked", "loudly"], ["."])
    assert semantic.invert_coordination(parts, "DT") == ["The", "dog", "barked", "loudly", "and", "the", "cat",
                                                        "slept", "."]


def test_coordination_needs_two_clauses_and_one_cc():
    vp = "I PRON PRP 2 nsubj\ncame VERB VBD 0 root\nand CCONJ CC 4 cc\nleft VERB VBD 2 conj\n. PUNCT . 2 punct"
    assert semantic.coordination(conllu(vp).sentences[0]) is None  # "left" has no subject of its own
    two_cc = CAME_BUT_LEFT.replace(". PUNCT . 2 punct", "and CCONJ CC 8 cc\nwe PRON PRP 2 conj")
    assert semantic.coordination(conllu(two_cc).sentences[0]) is None


def coordinated(k: int, n_extra: int) -> Example:
    """"The catK slept [longJ ...] and the dog barked loudly .": clauses of 3 + n_extra and 4 words."""
    barked = 7 + n_extra
    rows = ["The DET DT 2 det", f"cat{k} NOUN NN 3 nsubj", "slept VERB VBD 0 root",
            *[f"long{j} ADV RB 3 advmod" for j in range(n_extra)],
            f"and CCONJ CC {barked} cc", f"the DET DT {barked - 1} det", f"dog NOUN NN {barked} nsubj",
            "barked VERB VBD 3 conj", f"loudly ADV RB {barked} advmod", ". PUNCT . 3 punct"]
    return conllu("\n".join(rows), line=k + 1)


def test_probe_coordinv_balances_clause_lengths():
    treebank = [coordinated(k, k % 3 * 2) for k in range(24)]  # first clause 3 (shorter), 5 or 7 (longer)
    splits = semantic.probe_coordinv(treebank, 3)
    items = [ex for part in splits.values() for ex in part]
    # 8 with the second clause longer, 16 with the first: 4 + 4 of each kept and 4 + 4 swapped, so both
    # classes show as many "first longer" as "second longer" sentences
    assert Counter((ex.label, ex.meta["longer"]) for ex in items) == {
        ("O", "first"): 4, ("O", "second"): 4, ("I", "first"): 4, ("I", "second"): 4}
    swapped = next(ex for ex in items if ex.label == "I" and ex.meta["longer"] == "first")
    assert tokens(swapped)[:6] == ["The", "dog", "barked", "loudly", "and", "the"]
    assert tokens(swapped)[7:] == ["slept", "."]
    assert splits == semantic.probe_coordinv(treebank, 3)


# --- constituency trees -----------------------------------------------------------------------------

MRG = """( (S
    (NP-SBJ-1 (DT The) (NN cat) )
    (VP (VBD sat)
      (NP (-NONE- *T*-1) ))
    (. .) ))
( (S (NP-SBJ (PRP It)) (VP (VBD rained)) (. .)) )"""


def test_parse_and_clean_bracketed_trees():
    (first, line1), (second, line2) = brackets.parse_brackets(MRG)
    assert (line1, line2) == (1, 6)
    tree = brackets.clean_tree(first)
    T = brackets.Tree
    assert tree == T("S", (T("NP", (T("DT", ("The",)), T("NN", ("cat",)))), T("VP", (T("VBD", ("sat",)),)),
                           T(".", (".",))))  # trace and its empty NP gone, function tags stripped
    assert brackets.words(tree) == ["The", "cat", "sat", "."]
    assert syntactic.tree_depth(tree) == 3  # S > NP > DT
    assert syntactic.top_constituents(tree) == "NP_VP_."


def test_tree_depth_counts_the_longest_path():
    (tree, _), = brackets.parse_brackets("(S (NP (NP (DT the) (NN end)) (PP (IN of) (NP (NN time)))) (VP (VBZ is)))")
    assert syntactic.tree_depth(tree) == 5  # S > NP > PP > NP > NN
    assert syntactic.top_constituents(tree) == "NP_VP"


@pytest.mark.parametrize("text, line", [("(S (NP x)\n", 1), ("(S x))", 1), ("\nx (S y)", 2)])
def test_bad_brackets(text, line):
    with pytest.raises(DataError) as err:
        brackets.parse_brackets(text, "f.mrg")
    assert err.value.line == line and str(err.value.path) == "f.mrg"


def test_read_treebank_zip(tmp_path):
    path = tmp_path / "treebank.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("treebank/combined/wsj_0002.mrg", "( (S (NP (NN b)) (VP (VBD c))) )\n")
        archive.writestr("treebank/combined/wsj_0001.mrg", MRG)
        archive.writestr("treebank/combined/README", "not a tree")
    trees = treebank_zip.read_treebank_zip(path)
    members = [(t.source.split(":")[-1].split("/")[-1], t.line) for t in trees]
    assert members == [("wsj_0001.mrg", 1), ("wsj_0001.mrg", 6), ("wsj_0002.mrg", 1)]  # file order, not zip order
    assert brackets.words(trees[0].tree) == ["The", "cat", "sat", "."]
    (tmp_path / "bad.zip").write_text("no zip")
    with pytest.raises(DataError, match="not a readable zip"):
        treebank_zip.read_treebank_zip(tmp_path / "bad.zip")


def synthetic_trees(spec: dict[str, int]) -> list[treebank_zip.ParsedSentence]:
    """``count`` trees per top-constituent sequence, each with distinct words (5+ of them)."""
    out = []
    for sequence, count in spec.items():
        for k in range(count):
            children = " ".join(f"({label} (NN w{len(out)}x{j}) (NN y{j}))" if label[0].isalpha() else
                                f"({label} {label})" for j, label in enumerate(sequence.split("_")))
            (tree, _), = brackets.parse_brackets(f"(S {children})")
            out.append(treebank_zip.ParsedSentence(tree, "t.mrg", len(out) + 1))
    return out


def test_probe_topconst_keeps_the_commonest_sequences_and_other():
    trees = synthetic_trees({"NP_VP_.": 40, "PP_,_NP_VP_.": 30, "CC_NP_VP_.": 20, "ADVP_NP_VP_.": 12,
                             "SBAR_NP_VP_.": 10, "NP_ADVP_VP": 50, "``_NP_VP_.": 50})
    splits = syntactic.probe_topconst(trees, 1, n_classes=3)
    counts = Counter(ex.label for part in splits.values() for ex in part)
    # NP_ADVP_VP (no final '.') and the quoted sequence are left out, even of OTHER (12 + 10 = 22 items)
    assert counts == {"NP_VP_.": 20, "PP_,_NP_VP_.": 20, "CC_NP_VP_.": 20, "OTHER": 20}
    assert {ex.meta["sequence"] for part in splits.values() for ex in part if ex.label == "OTHER"} == {
        "ADVP_NP_VP_.", "SBAR_NP_VP_."}


def test_probe_treedepth_classes_5_to_12():
    trees = []
    for depth in range(3, 15):
        for k in range(10):
            text = f"(NN w{depth}x{k})"
            for level in range(depth - 1):
                text = f"(X{level} {text} (NN a{level}) (NN b{level}))" if level < 4 else f"(X{level} {text})"
            (tree, _), = brackets.parse_brackets(text)
            trees.append(treebank_zip.ParsedSentence(tree, "t.mrg", len(trees) + 1))
    splits = syntactic.probe_treedepth(trees, 4)
    counts = Counter(ex.label for part in splits.values() for ex in part)
    assert counts == {str(d): 10 for d in range(5, 13)}  # depths 3, 4, 13, 14 left out
    assert all(syntactic.tree_depth(next(t.tree for t in trees if t.line == ex.line)) == int(ex.label)
               for part in splits.values() for ex in part)


# --- the registry and a real prepare ----------------------------------------------------------------

@pytest.mark.parametrize("name", PROBES)
def test_probing_specs(name, data_root):
    spec = TASKS[name]
    assert spec.level == "graph" and spec.gold == frozenset() and spec.read_file is None
    assert all((data_root / f).is_file() for f in spec.files)
    assert "Conneau et al. (2018)" in spec.notes and "majority-class baseline" in spec.notes
    leaks = name in ("probe_tense", "probe_subjnum", "probe_objnum", "probe_treedepth", "probe_topconst")
    assert (spec.annotator == "none") == leaks


def test_prepare_probe_sentlen_from_the_staged_treebank(data_root, tmp_path):
    result = prepare(PrepareSettings(task="probe_sentlen", data=data_root, out=tmp_path / "p", annotator="none"))
    splits = result.manifest["statistics"]["splits"]
    for name in ("train", "dev", "test"):
        assert sorted(splits[name]["labels"]) == sorted(TASKS["probe_sentlen"].labels)
        assert len(set(splits[name]["labels"].values())) == 1, name  # balanced: one count for every bin
    per_class = {name: splits[name]["labels"]["5-8"] for name in splits}
    assert per_class["dev"] == per_class["test"] and 7 * per_class["dev"] < per_class["train"] < 9 * per_class["dev"]
    assert splits["train"]["length"]["max"] == 28 and result.manifest["annotator"]["name"] == "none"
