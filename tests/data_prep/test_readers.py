"""Readers: counts on the real staged files, fold rules, and DataError (file + line) on malformed input."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import pytest

from cn3.util.errors import DataError
from data_prep.readers import (
    read_conll2000,
    read_conll2003,
    read_conllu,
    read_imdb,
    read_labelled_lines,
    read_logic,
    read_ptb_sample,
    read_sick,
    read_snli,
    read_sst2,
    read_sst5,
    read_trec,
)
from data_prep.readers.columns import read_blocks
from data_prep.readers.custom import load_custom
from data_prep.readers.logic import operator_tree
from data_prep.readers.splits import assign_folds, cv_split, hold_out
from data_prep.tasks import load_task
from data_prep.taskspec import TaskOptions


def n_tokens(examples) -> int:
    return sum(len(e.sentences[0]) for e in examples)


def labels(examples) -> dict:
    return dict(Counter(e.label for e in examples))


# ---------------------------------------------------------------- real data (counts from each SOURCE.md)


def test_snli(load_real, data_root):
    data = load_real("snli")
    assert set(data) == {"train", "dev"}
    assert len(data["train"]) == 5_502 - 4 and len(data["dev"]) == 9_842
    assert labels(data["train"]) == {"entailment": 1_806, "neutral": 1_786, "contradiction": 1_906}
    assert labels(data["dev"]) == {"entailment": 3_329, "neutral": 3_235, "contradiction": 3_278}
    first = data["train"][0]
    assert first.line == 1 and len(first.sentences) == 2
    assert first.sentences[1].tokens == ["a", "dog", "is", "outside"]
    assert first.sentences[0].tokens[-1] == "."
    stats: dict = {}
    read_snli(data_root / "snli" / "snli_1.0_dev.jsonl.gz", stats)
    assert stats["dropped"] == 158


def test_sick(load_real):
    data = load_real("sick")
    assert {k: len(v) for k, v in data.items()} == {"train": 4_439, "dev": 495, "test": 4_906}
    assert labels(data["train"]) == {"entailment": 1_274, "neutral": 2_524, "contradiction": 641}
    assert labels(data["dev"]) == {"entailment": 143, "neutral": 281, "contradiction": 71}
    relatedness = [e.meta["relatedness"] for e in data["test"]]
    assert relatedness[:3] == [3.3, 3.7, 3.0] and (min(relatedness), max(relatedness)) == (1.0, 5.0)
    assert sum(relatedness) / len(relatedness) == pytest.approx(3.5279, abs=1e-4)
    assert not any(t.endswith("\r") for e in data["train"] for s in e.sentences for t in s.tokens)


def test_trec(load_real, data_root):
    data = load_real("trec")
    train = data["train"] + data["dev"]
    assert len(train) == 5_452 and len(data["test"]) == 500
    assert len(data["dev"]) == 545
    assert labels(train) == {"ABBR": 86, "DESC": 1_162, "ENTY": 1_250, "HUM": 1_223, "LOC": 835, "NUM": 896}
    assert labels(data["test"]) == {"ABBR": 9, "DESC": 138, "ENTY": 94, "HUM": 65, "LOC": 81, "NUM": 113}
    fine = read_trec(data_root / "trec" / "train_5500.label", fine=True)
    assert len({e.label for e in fine}) == 50 and fine[0].label == "DESC:manner"


@pytest.mark.parametrize(
    "task,expected,sizes",
    [
        ("mr", {"positive": 5_331, "negative": 5_331}, [8_635, 960, 1_067]),
        ("subj", {"subjective": 5_000, "objective": 5_000}, [8_100, 900, 1_000]),
        ("cr", {"positive": 2_405, "negative": 1_366}, [3_054, 339, 378]),
        ("mpqa", {"positive": 3_311, "negative": 7_292}, [8_588, 954, 1_061]),
    ],
)
def test_cv_datasets(load_real, task, expected, sizes):
    data = load_real(task)
    every = data["train"] + data["dev"] + data["test"]
    assert labels(every) == expected
    assert [len(data[s]) for s in ("train", "dev", "test")] == sizes  # fold 0 of 10; dev held out of train


def test_mr_byte_0x85_is_an_ellipsis_inside_the_line(load_real):
    # byte 0x85 (cp1252 ellipsis; U+0085 in latin-1) must not split a line nor vanish
    every = [e for split in load_real("mr").values() for e in split]
    tokens = [t for e in every for t in e.sentences[0].tokens]
    assert any(t.endswith("interwoven\u2026") for t in tokens) and not any("\x85" in t for t in tokens)


def test_sst(load_real):
    sst2 = load_real("sst2")  # test: 10% of the 6,885 train sentences; train less them and their phrases
    assert sst2.held_out["sentences"] == 6_885 and sst2.held_out["train_phrases_before"] == 67_349
    assert len(sst2["test"]) == 688 and len(sst2["train"]) == 67_349 - 688 - sst2.held_out["train_phrases_dropped"]
    assert labels(sst2["dev"]) == {"negative": 428, "positive": 444}
    sst5 = load_real("sst5")
    assert labels(sst5["train"]) == {
        "very_negative": 1_092, "negative": 2_218, "neutral": 1_624, "positive": 2_322, "very_positive": 1_288
    }  # fmt: skip
    assert len(sst5["dev"]) == 1_101
    assert sst2["train"][0].sentences[0].tokens[-1] == "units" or sst2["train"][0].line > 1


@pytest.mark.slow  # reads the whole IMDB data
def test_imdb(load_real):
    data = load_real("imdb")
    assert len(data["train"]) + len(data["dev"]) == 25_000 and len(data["dev"]) == 2_500
    assert labels(data["test"]) == {"negative": 12_500, "positive": 12_500}
    assert labels(data["train"] + data["dev"]) == {"negative": 12_500, "positive": 12_500}
    assert not any("<br" in t for e in data["test"][:2000] for t in e.sentences[0].tokens)


def test_conll2003(load_real):
    data = load_real("conll2003")
    assert [len(data[s]) for s in ("train", "dev")] == [14_041, 3_250]
    assert [n_tokens(data[s]) for s in ("train", "dev")] == [203_621, 51_362]
    first = data["train"][0].sentences[0]
    assert first.tokens[:3] == ["EU", "rejects", "German"]
    assert first.tags[:3] == ["S-ORG", "O", "S-MISC"] and first.xpos[:2] == ["NNP", "VBZ"]
    assert data["train"][0].line == 3
    iob2 = load_task("conll2003", Path(data["train"][0].source).parent.parent, TaskOptions(tag_scheme="IOB2"))
    assert iob2["dev"][0].sentences[0].tags.count("O") == data["dev"][0].sentences[0].tags.count("O")


def test_conll2000(load_real):
    data = load_real("conll2000")
    assert len(data["train"]) == 7_936 and len(data["dev"]) == 1_000 and len(data["test"]) == 2_012
    assert n_tokens(data["train"]) + n_tokens(data["dev"]) == 211_727
    assert n_tokens(data["test"]) == 47_377
    assert data["train"][0].sentences[0].tags[:4] == ["S-NP", "S-PP", "B-NP", "E-NP"]


def test_ud_pos(load_real):
    data = load_real("ud_pos")
    assert [len(data[s]) for s in ("train", "dev", "test")] == [12_544, 2_001, 2_077]
    assert [n_tokens(data[s]) for s in ("train", "dev", "test")] == [204_577, 25_147, 25_094]
    s = data["dev"][0].sentences[0]
    assert s.tokens == ["From", "the", "AP", "comes", "this", "story", ":"]
    assert s.heads == [3, 3, 4, 0, 6, 4, 4] and s.deprels[0] == "case" and s.tags == s.upos
    assert s.xpos[0] == "IN"
    assert any(":" in d for e in data["dev"] for d in e.sentences[0].deprels)  # subtypes kept


def test_ptb_pos(load_real):
    data = load_real("ptb_pos")
    assert [len(data[s]) for s in ("train", "dev", "test")] == [3_396, 273, 245]
    assert [n_tokens(data[s]) for s in ("train", "dev", "test")] == [81_793, 6_327, 5_964]
    s = data["dev"][0].sentences[0]
    assert s.tokens[:3] == ["Savin", "Corp.", "reported"] and s.tags[:3] == ["NNP", "NNP", "VBD"]
    assert s.xpos == s.tags and s.heads[:3] == [2, 3, 0] and s.deprels is None


LOGIC_COUNTS = {
    "train": [30, 2_319, 12_451, 23_252, 30_373, 34_152, 32_952, 26_671, 18_962, 12_634, 8_181, 4_894, 4_831],
    "test": [6, 410, 2_198, 4_104, 5_361, 6_027, 5_816, 4_707, 3_347, 2_230, 1_444, 864, 853],
}


@pytest.mark.slow  # reads the whole Bowman logic data
def test_logic_per_file_counts(load_real, data_root):
    data = load_real("logic")
    per_file = Counter(Path(e.source).name for split in data.values() for e in split)
    train_all = data["train"] + data["dev"]
    relations = Counter(e.label for e in train_all)
    for n in range(7, 13):  # train files the task does not use (train = train0-6)
        examples = read_logic(data_root / "logic_inference" / f"train{n}.gz", n, open_ended=n == 12)
        per_file[f"train{n}.gz"] = len(examples)
        relations.update(e.label for e in examples)
    assert per_file == {f"{kind}{n}.gz": c for kind, counts in LOGIC_COUNTS.items() for n, c in enumerate(counts)}
    assert relations == {"#": 112_386, "<": 23_278, ">": 23_248, "v": 22_590, "|": 22_550, "=": 3_947, "^": 3_703}
    assert max(e.meta["n_ops"] for e in train_all) == 6
    assert all(e.meta["n_ops"] == int(Path(e.source).name[4:-3]) for e in data["test"])
    longest = max(data["test"], key=lambda e: e.meta["n_ops_pair"]).sentences
    assert all(s.tokens.count("(") == s.tokens.count(")") for s in longest)  # brackets are tokens
    assert sum(s.tokens.count("(") for s in longest) >= 12
    assert len(data["dev"]) == round(len(train_all) / 10)


# ---------------------------------------------------------------- splits and folds


def test_assign_folds_balanced_and_deterministic():
    folds = assign_folds(103, 10, seed=7)
    assert folds == assign_folds(103, 10, seed=7)
    assert folds != assign_folds(103, 10, seed=8)
    assert sorted(Counter(folds).values()) == [10] * 7 + [11] * 3


def test_cv_folds_real(data_root, load_real):
    base = load_real("cr")
    every = {(e.source, e.line) for split in base.values() for e in split}
    fold_of = {}
    tests = []
    for fold in range(10):
        data = load_task("cr", data_root, TaskOptions(fold=fold))
        keys = {s: {(e.source, e.line) for e in data[s]} for s in data}
        assert (not (keys["train"] & keys["dev"]) and not (keys["train"] & keys["test"])
                and not (keys["dev"] & keys["test"]))
        assert keys["train"] | keys["dev"] | keys["test"] == every
        tests.append(keys["test"])
        for split in data.values():
            for e in split:
                fold_of.setdefault((e.source, e.line), set()).add(e.meta["fold"])
        assert {e.meta["fold"] for e in data["test"]} == {fold}
    assert all(len(f) == 1 for f in fold_of.values())  # an item's fold never depends on options.fold
    assert set().union(*tests) == every and sum(map(len, tests)) == len(every)
    again = load_task("cr", data_root, TaskOptions(fold=3))
    assert [(e.line, e.label) for e in again["dev"]] == [
        (e.line, e.label) for e in load_task("cr", data_root, TaskOptions(fold=3))["dev"]
    ]


@pytest.mark.parametrize("fold,n_folds", [(-1, 10), (10, 10), (0, 1)])
def test_bad_fold(fold, n_folds):
    with pytest.raises(DataError, match="fold"):
        cv_split([], TaskOptions(fold=fold, n_folds=n_folds))


def test_hold_out():
    train, dev = hold_out(list(range(100)), seed=1)
    assert len(dev) == 10 and sorted(train + dev) == list(range(100))
    assert (train, dev) == hold_out(list(range(100)), seed=1)
    assert train == sorted(train)


# ---------------------------------------------------------------- small fixtures: well-formed


def write(tmp_path: Path, name: str, text: str | bytes, gz: bool = False) -> Path:
    path = tmp_path / name
    data = text.encode("utf-8") if isinstance(text, str) else text
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def test_conll2003_fixture(tmp_path):
    text = "-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ I-VP O\n\nPeter NNP I-NP I-PER\nBlack NNP I-NP I-PER\n"
    path = write(tmp_path, "ner.txt", text)
    got = read_conll2003(path)
    assert [e.line for e in got] == [3, 6]
    assert got[1].sentences[0].tags == ["B-PER", "E-PER"]
    assert read_conll2003(path, "IOB2")[1].sentences[0].tags == ["B-PER", "I-PER"]


def test_conllu_fixture_skips_ranges_and_empty_nodes(tmp_path):
    rows = [
        "# text = Don't go",
        "1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_",
        "1\tDo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_",
        "2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_",
        "2.1\tx\t_\t_\t_\t_\t_\t_\t_\t_",
        "3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_",
        "",
    ]
    (example,) = read_conllu(write(tmp_path, "a.conllu", "\n".join(rows) + "\n"))
    assert example.sentences[0].tokens == ["Do", "n't", "go"] and example.line == 3
    assert example.sentences[0].heads == [3, 3, 0]


def test_custom_formats(tmp_path):
    tsv = write(tmp_path, "train.tsv", "text_a\ttext_b\tlabel\nA b\tc d\tyes\nE\tf\tno\n")
    dev = write(tmp_path, "dev.tsv", "text_a\ttext_b\tlabel\nx\ty\tno\n")
    data = load_custom(None, TaskOptions(files={"train": tsv, "dev": dev}))
    assert [e.label for e in data["train"]] == ["yes", "no"] and data["train"][0].sentences[1].tokens == ["c", "d"]
    jsonl = write(tmp_path, "t.jsonl", '{"text": "a b", "label": 1}\n\n{"text": "c", "label": 0}\n')
    data = load_custom(None, TaskOptions(files={"train": jsonl}))
    assert [e.label for e in data["train"]] == ["1", "0"] and data["train"][1].line == 3
    conll = write(tmp_path, "t.conll", "a\tDT\tB-NP\t2\nb\tNN\tI-NP\t0\n\nc\tNN\tB-NP\t0\n")
    data = load_custom(None, TaskOptions(files={"train": conll}, columns="word,pos,tag,head"))
    s = data["train"][0].sentences[0]
    assert s.tokens == ["a", "b"] and s.tags == ["B-NP", "I-NP"] and s.xpos == ["DT", "NN"] and s.heads == [2, 0]


# ---------------------------------------------------------------- malformed input -> DataError(file, line)

UD_OK = "1\tA\ta\tDET\tDT\t_\t2\tdet\t_\t_\n2\tdog\tdog\tNOUN\tNN\t_\t0\troot\t_\t_\n"
SNLI_OK = ('{"gold_label": "neutral", "sentence1": "A b", "sentence2": "c d", '
           '"sentence1_binary_parse": "( A b )", "sentence2_binary_parse": "( c d )"}')
SICK_HEADER = "pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tSemEval_set\r\n"


def conllu(*rows: str) -> str:
    return "\n".join(rows) + "\n"


BAD_CASES = {
    # name: (file name, content, reader, line, message fragment)
    "conll2003 columns": ("eng.train", "EU NNP I-NP I-ORG\nrejects VBZ I-VP\n", read_conll2003, 2,
                          "expected 4 space-separated columns WORD POS CHUNK NER, found 3"),
    "conll2003 scheme": ("eng.train", "-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nx NN I-NP E-ORG\n", read_conll2003, 4,
                         "not valid IOB1"),
    "conll2003 unknown type": ("eng.train", "a NN O O\n\nb NN I-NP I-CITY\n", read_conll2003, 3,
                               "unknown tag type 'CITY'"),
    "conll2000 I after O": ("train.txt", "He PRP B-NP\nran VBD O\nfast RB I-NP\n", read_conll2000, 3,
                            "I-NP must follow B-NP or I-NP"),
    "conll2000 unknown type": ("train.txt", "He PRP B-XP\n", read_conll2000, 1, "unknown tag type 'XP'"),
    "conllu columns": ("d.conllu", conllu("1\tA\ta\tDET\tDT\t_\t0\troot\t_"), read_conllu, 1,
                       "expected 10 tab-separated"),
    "conllu head not int": ("d.conllu", UD_OK + "\n" + conllu("1\tA\ta\tDET\tDT\t_\tx\tdet\t_\t_"), read_conllu, 4,
                            "HEAD 'x' is not a non-negative integer"),
    "conllu head range": ("d.conllu", conllu("1\tA\ta\tDET\tDT\t_\t5\tdet\t_\t_",
                                             "2\tb\tb\tNOUN\tNN\t_\t0\troot\t_\t_"),
                          read_conllu, 1, "HEAD 5 is out of range"),
    "conllu two roots": ("d.conllu", conllu("1\tA\ta\tDET\tDT\t_\t0\tdet\t_\t_", "2\tb\tb\tNOUN\tNN\t_\t0\troot\t_\t_"),
                         read_conllu, 2, "exactly one word with HEAD 0"),
    "conllu cycle": ("d.conllu", conllu("1\tA\ta\tDET\tDT\t_\t2\tdet\t_\t_", "2\tb\tb\tNOUN\tNN\t_\t1\tnsubj\t_\t_",
                                        "3\tc\tc\tVERB\tVB\t_\t0\troot\t_\t_"), read_conllu, 1, "cycle"),
    "conllu unknown upos": ("d.conllu", conllu("1\tA\ta\tDETT\tDT\t_\t0\troot\t_\t_"), read_conllu, 1,
                            "unknown UPOS tag 'DETT'"),
    "conllu id sequence": ("d.conllu", conllu("1\tA\ta\tDET\tDT\t_\t0\troot\t_\t_",
                                              "3\tb\tb\tNOUN\tNN\t_\t1\tdep\t_\t_"),
                           read_conllu, 2, "out of sequence"),
    "snli json": ("s.jsonl", SNLI_OK + "\n{oops\n", read_snli, 2, "invalid JSON"),
    "snli label": ("s.jsonl", SNLI_OK.replace("neutral", "maybe"), read_snli, 1, "unknown label 'maybe'"),
    "snli empty side": ("s.jsonl", SNLI_OK.replace('"( c d )"', '"( )"'), read_snli, 1, "empty 'sentence2'"),
    "snli missing side": ("s.jsonl", SNLI_OK + "\n" + '{"gold_label": "neutral", "sentence1": "a"}', read_snli, 2,
                          "missing 'sentence2'"),
    "sick columns": ("SICK.txt", SICK_HEADER + "1\ta\tb\tNEUTRAL\t3.0\r\n", read_sick, 2,
                     "expected 6 tab-separated columns"),
    "sick label": ("SICK.txt", SICK_HEADER + "1\ta\tb\tMAYBE\t3.0\tTRAIN\r\n", read_sick, 2, "unknown label 'maybe'"),
    "sick empty": ("SICK.txt", SICK_HEADER + "1\ta\tb\tNEUTRAL\t3\tTRAIN\r\n2\ta\t \tNEUTRAL\t3\tTEST", read_sick, 3,
                   "empty sentence_B"),
    "sick set": ("SICK.txt", SICK_HEADER + "1\ta\tb\tNEUTRAL\t3\tDEV\r\n", read_sick, 2, "unknown SemEval_set"),
    "sick header": ("SICK.txt", "a\tb\r\n", read_sick, 1, "header lacks column"),
    "trec format": ("train_5500.label", "NUM:dist How far ?\nWhat is it ?\n", read_trec, 2,
                    "expected 'COARSE:fine question'"),
    "trec label": ("train_5500.label", "NUMBER:dist How far ?\n", read_trec, 1, "unknown coarse class 'NUMBER'"),
    "trec empty": ("train_5500.label", "NUM:dist \n", read_trec, 1, "empty question"),
    "sst2 columns": ("sentiment-train", "good movie \t1\nbad movie 0\n", read_sst2, 2,
                     "expected 2 tab-separated columns"),
    "sst2 label": ("sentiment-train", "good movie \t2\n", read_sst2, 1, "unknown label '2'"),
    "sst2 empty": ("sentiment-train", "good \t1\n \t0\n", read_sst2, 2, "empty sentence"),
    "sst5 label": ("sentiment-train", "4 great\n5 greater\n", read_sst5, 2, "unknown label '5'"),
    "sst5 empty": ("sentiment-train", "4 great\n3\n", read_sst5, 2, "empty sentence"),
    "imdb label": ("train.jsonl", '{"label": 1, "text": "ok"}\n{"label": 3, "text": "x"}\n', read_imdb, 2,
                   "unknown label 3"),
    "imdb empty": ("train.jsonl", '{"label": 1, "text": "<br />"}\n', read_imdb, 1, "empty 'text'"),
    "imdb json": ("train.jsonl", '{"label": 1, "text": "ok"}\n[1]\n', read_imdb, 2, "expected a JSON object"),
    "logic columns": ("train1", "#\ta\n", read_logic, 1,
                      "expected 3 tab-separated columns RELATION LEFT RIGHT, found 2"),
    "logic relation": ("train1", "#\ta\tb\n?\ta\tb\n", read_logic, 2, "unknown relation '?'"),
    "logic empty side": ("train1", "#\t( a )\t( )\n", read_logic, 1, "empty right formula"),
    "non-utf8": ("custrev.pos", b"good\nbad \xff\n", lambda p: read_labelled_lines(p, "positive"), 2,
                 "not valid utf-8"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_malformed_input(tmp_path, case):
    name, content, reader, line, fragment = BAD_CASES[case]
    path = write(tmp_path, name, content, gz=name.endswith("train.txt"))
    with pytest.raises(DataError) as err:
        reader(path)
    message = str(err.value)
    assert name in message and f"line {line}:" in message and fragment in message, message
    assert err.value.line == line


def test_logic_operator_count_checked(tmp_path):
    path = write(tmp_path, "train2.gz", "#\t( a ( and b ) )\tc\n", gz=True)
    assert read_logic(path, 1)[0].meta == {"n_ops": 1, "n_ops_pair": 1}
    with pytest.raises(DataError, match=r"line 1: pair has 1 \+ 0 operators; expected 2"):
        read_logic(path, 2)


@pytest.mark.parametrize("formula,tokens,heads", [
    ("c", ["c"], [0]),
    ("( not a )", ["(", "not", "a", ")"], [2, 0, 2, 2]),
    ("( not ( not a ) )", ["(", "not", "(", "not", "a", ")", ")"], [2, 0, 4, 2, 4, 4, 2]),
    ("( e ( or ( not a ) ) )", ["(", "e", "(", "or", "(", "not", "a", ")", ")", ")"], [4, 4, 4, 0, 6, 4, 6, 6, 4, 4]),
    ("( ( not e ) ( and a ) )", ["(", "(", "not", "e", ")", "(", "and", "a", ")", ")"], [7, 3, 7, 3, 3, 7, 0, 7, 7, 7]),
    ("( ( c ( or d ) ) ( and a ) )", ["(", "(", "c", "(", "or", "d", ")", ")", "(", "and", "a", ")", ")"],
     [10, 5, 5, 5, 10, 5, 5, 5, 10, 0, 10, 10, 10]),
    ("(not a)", ["(", "not", "a", ")"], [2, 0, 2, 2]),  # brackets need no spaces around them
])
def test_logic_operator_trees(formula, tokens, heads):
    """Each operator heads its constituent and its brackets: ( x ( op y ) ) -> op heads x, y and the
    brackets; ( not x ) -> not heads x. The brackets stay tokens, as in Shen et al.'s loader."""
    assert operator_tree(formula) == (tokens, heads)


def test_logic_reader_gives_trees_and_names_bad_brackets(tmp_path):
    path = write(tmp_path, "train1.gz", "#\t( a ( and b ) )\tc\n<\t( not a\tb\n", gz=True)
    with pytest.raises(DataError) as err:
        read_logic(path)
    assert "train1.gz, line 2:" in str(err.value) and "left formula: a '(' is never closed" in str(err.value)
    path = write(tmp_path, "train1.gz", "#\t( a ( and b ) )\tc\n", gz=True)
    left, right = read_logic(path, 1)[0].sentences
    assert (left.tokens, left.heads) == (["(", "a", "(", "and", "b", ")", ")"], [4, 4, 4, 0, 4, 4, 4])
    assert (right.tokens, right.heads) == (["c"], [0])


def test_ptb_files_must_agree(tmp_path):
    pos = write(tmp_path, "p.tsv", "A\tDT\ndog\tNN\n\nRuns\tVBZ\n")
    dep = write(tmp_path, "d.conllx", "1\tA\t_\tDT\tDT\t_\t2\t_\t_\t_\n2\tdog\t_\tNN\tNN\t_\t0\t_\t_\t_\n\n"
                                      "1\tRun\t_\tVBZ\tVBZ\t_\t0\t_\t_\t_\n")
    with pytest.raises(DataError) as err:
        read_ptb_sample(pos, dep)
    assert "p.tsv, line 4" in str(err.value) and "d.conllx (line 4)" in str(err.value)
    short = write(tmp_path, "d2.conllx", "1\tA\t_\tDT\tDT\t_\t0\t_\t_\t_\n")
    with pytest.raises(DataError, match=r"has 2 tokens here but 1 in .*d2.conllx"):
        read_ptb_sample(pos, short)
    bad_tag = write(tmp_path, "p2.tsv", "A\tDET\ndog\tNN\n")
    with pytest.raises(DataError, match="p2.tsv, line 1: unknown PTB tag 'DET'"):
        read_ptb_sample(bad_tag, dep)


def test_missing_file_and_dir(tmp_path):
    with pytest.raises(DataError, match="nope.jsonl.*file not found"):
        read_snli(tmp_path / "nope.jsonl")
    with pytest.raises(DataError, match="expected a file, found a directory"):
        read_conllu(tmp_path)
    with pytest.raises(DataError) as err:
        load_task("sst2", tmp_path / "missing")
    assert "missing" in str(err.value) and "--data" in str(err.value) and "CN3_DATA" in str(err.value)
    with pytest.raises(DataError) as err:
        load_task("ud_pos", tmp_path)
    assert str(tmp_path / "ud_english_ewt") in str(err.value) and "CN3_DATA" in str(err.value)


CUSTOM_BAD = {
    "tsv no label": ("train.tsv", "text\tclass\na\tb\n", None, 1, "no 'label' field"),
    "tsv columns": ("train.tsv", "text\tlabel\na b\tx\nc\n", None, 3,
                    "expected 2 tab-separated columns text label, found 1"),
    "tsv empty text": ("train.tsv", "text\tlabel\na b\tx\n \ty\n", None, 3, "empty text"),
    "tsv missing side": ("train.tsv", "text_a\tlabel\na\tx\n", None, 1, "a pair with a missing side"),
    "tsv empty side": ("train.tsv", "text_a\ttext_b\tlabel\na\t\tx\n", None, 2, "empty text_b"),
    "jsonl missing side": ("train.jsonl", '{"text_a": "a", "text_b": "b", "label": 1}\n{"text_a": "a", "label": 1}\n',
                           None, 2, "a pair with a missing side"),
    "jsonl empty label": ("train.jsonl", '{"text": "a", "label": ""}\n', None, 1, "empty label"),
    "conll columns": ("train.conll", "a\tB-NP\nb\n", "word,tag", 2,
                      "expected 2 tab-separated columns WORD TAG, found 1"),
    "conll head": ("train.conll", "a\tB-NP\t7\n", "word,tag,head", 1, "HEAD 7 is out of range"),
}


@pytest.mark.parametrize("case", sorted(CUSTOM_BAD))
def test_custom_malformed(tmp_path, case):
    name, content, columns, line, fragment = CUSTOM_BAD[case]
    path = write(tmp_path, name, content)
    with pytest.raises(DataError) as err:
        load_custom(None, TaskOptions(files={"train": path}, columns=columns))
    message = str(err.value)
    assert name in message and f"line {line}:" in message and fragment in message, message


def test_custom_unknown_dev_label(tmp_path):
    train = write(tmp_path, "train.jsonl", '{"text": "a", "label": "x"}\n')
    dev = write(tmp_path, "dev.jsonl", '{"text": "a", "label": "x"}\n{"text": "b", "label": "z"}\n')
    with pytest.raises(DataError, match=r"dev.jsonl, line 2: unknown label 'z' \(not in train\)"):
        load_custom(None, TaskOptions(files={"train": train, "dev": dev}))


def test_custom_options_errors(tmp_path):
    path = write(tmp_path, "train.conll", "a\tB-NP\n")
    with pytest.raises(DataError, match="need --columns"):
        load_custom(None, TaskOptions(files={"train": path}))
    with pytest.raises(DataError, match="lacks a 'tag' column"):
        load_custom(None, TaskOptions(files={"train": path}, columns="word,pos"))
    with pytest.raises(DataError, match="unknown column name 'lemma'"):
        load_custom(None, TaskOptions(files={"train": path}, columns="word,lemma,tag"))
    with pytest.raises(DataError, match="needs a train file"):
        load_custom(None, TaskOptions(files={"dev": path}, columns="word,tag"))
    with pytest.raises(DataError, match="cannot tell the format"):
        load_custom(None, TaskOptions(files={"train": tmp_path / "x.csv"}))


def test_read_blocks_whitespace(tmp_path):
    path = write(tmp_path, "w.txt", "a  b\n\n\nc d\n")
    assert [rows for _, rows in read_blocks(path, 2, "A B", None)] == [[["a", "b"]], [["c", "d"]]]
    with pytest.raises(DataError, match="w.txt, line 1: expected 2 space-separated columns A B, found an empty column"):
        list(read_blocks(path, 2, "A B", " "))
