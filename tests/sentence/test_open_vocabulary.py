"""New text gets everything the model knows: a file scores the same staged or not.

The vocabularies come from the train split alone, and words outside them keep their pretrained
vector at scoring time: on a staged split (looked up at prepare time) and on ``--file`` / ``predict``
text (looked up through the run's recorded vectors file) alike. For every task with a staged test
file, the test file read as new text must give the staged split's per-item outputs.
"""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
import torch
from typer.testing import CliRunner

from cli.main import app
from cn3.sentence.config import ModelConfig
from cn3.sentence.inference import examples_dataset, predict_with_probabilities, read_task_file, run_vectors
from cn3.sentence.model import SentenceGraphModel, model_args_from_dataset
from data_prep.coverage import coverage
from data_prep.dataset import load_prepared
from data_prep.prepare import PrepareSettings, prepare

# slow: real trainings on six tasks (`pytest -m "not slow"` is the quick loop)
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.slow]
GLOVE = "glove/glove.6B.50d.top100k.txt.gz"
SMALL = dict(hidden=16, energy_dim=8, mlp_hidden=16, dropout=0.0, char="cnn", char_dim=4, char_out=6,
             spell_dim=4)


def _imdb_root(data_root, root):
    """A data root of IMDB's every 25th train review (1,000, both labels) and its first 300 test reviews:
    the staged test split and the new text are those 300 (preparing all 50,000 reviews took most of
    this test's time); the smaller train vocabulary leaves more test words to their vectors."""
    (root / "imdb").mkdir(parents=True)
    for name, keep in (("train.jsonl.gz", lambda i: i % 25 == 0), ("test.jsonl.gz", lambda i: i < 300)):
        with gzip.open(data_root / "imdb" / name, "rt", encoding="utf-8") as src, \
                gzip.open(root / "imdb" / name, "wt", encoding="utf-8") as dst:
            dst.writelines(line for i, line in enumerate(src) if keep(i))
    return root


def _sick_test_rows(source, target) -> None:
    lines = source.read_text(encoding="utf-8").splitlines()
    target.write_text("\n".join([lines[0]] + [line for line in lines[1:] if line.endswith("\tTEST")]) + "\n",
                      encoding="utf-8")


# task -> (the test file as new text, how many of its items, the encoder); SICK's test pairs share
# SICK.txt with train and dev, so its TEST rows are copied into a file of their own; IMDB's first 300
# test reviews stand for its 25,000 (_imdb_root). CV tasks (MR, SUBJ, CR, MPQA) have no test file;
# PTB-POS's test split is two files (tags, trees), for which there is no single-file reader; SNLI, SST
# and CoNLL-2003 have no staged test split.
CASES = {
    "trec": ("trec/TREC_10.label", None, "cn3"),
    "sick": ("sick/SICK.txt", _sick_test_rows, "cn3"),
    "conll2000": ("conll2000/test.txt.gz", None, "cn3"),
    "ud_pos": ("ud_english_ewt/en_ewt-ud-test.conllu", None, "cn3"),
    "logic": ("logic_inference/test9.gz", None, "treelstm"),  # the formulas' operator trees, read from both
    "imdb": ("imdb/test.jsonl.gz", None, "lstm"),  # from a smaller data root (_imdb_root)
}
# imdb as cn3/configs/imdb.yaml (parsing 50,000 reviews takes an hour); SICK and CoNLL-2000 unparsed
# too (spaCy over their ~10,000 sentences is half a minute each): TREC checks that a parsed file
# reads as its staged split, UD-EWT and logic their own trees.
ANNOTATOR = {"imdb": "none", "sick": "none", "conll2000": "none"}


@pytest.mark.parametrize("task", list(CASES))
def test_a_test_file_scores_as_the_staged_test_split(task, tmp_path, data_root):
    relative, copy, encoder = CASES[task]
    embeddings = None if task == "logic" else data_root / GLOVE  # logic's configs use no vectors
    root = _imdb_root(data_root, tmp_path / "data") if task == "imdb" else data_root
    ds = load_prepared(prepare(PrepareSettings(task=task, data=root, out=tmp_path / task,
                                               annotator=ANNOTATOR.get(task), embeddings=embeddings)).out)
    staged = ds.splits["test"]
    source = root / relative
    file = source
    if copy is not None:
        file = tmp_path / source.name.removesuffix(".gz")
        copy(source, file)
    manifest = ds.manifest
    vectors, _ = run_vectors(manifest)
    new = examples_dataset(read_task_file(manifest, file), ds.vocabs, manifest, with_labels=True,
                           vectors=vectors).dataset
    # the staged items that come from this file (logic's test split joins 13 files), in file order
    records = [staged.record(i) for i in range(len(staged))]
    wanted = [i for i, r in enumerate(records) if r["source"] == str(source)][: len(new)]
    assert len(wanted) == len(new) > 0
    staged = staged.subset(wanted)

    known_staged, known_new = coverage(staged, ds.vocabs), coverage(new, ds.vocabs)
    assert known_new == known_staged
    if embeddings is not None:
        assert known_new["open_tokens"] > 0  # words outside the vocabulary were given vectors: checked below

    torch.manual_seed(0)
    config = ModelConfig(encoder=encoder, edge_attrs=ds.manifest["annotator"]["trees"],
                         pos_dim=4 if ds.manifest["annotator"]["pos_input"] else 0, **SMALL)
    model = SentenceGraphModel(config, model_args_from_dataset(ds), ds.embeddings).eval()
    preds_staged, probs_staged = predict_with_probabilities(model, staged, torch.device("cpu"))
    preds_new, probs_new = predict_with_probabilities(model, new, torch.device("cpu"))
    assert preds_new == preds_staged
    for a, b in zip(probs_new, probs_staged):
        torch.testing.assert_close(torch.tensor(a), torch.tensor(b), atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------- the CLI, from a trained run

runner = CliRunner()
TINY = ["--set", "model.hidden=16", "--set", "model.energy_dim=8", "--set", "model.mlp_hidden=16",
        "--set", "model.char=none", "--set", "model.pos_dim=0", "--set", "model.spell_dim=0",
        "--set", "data.limit=300", "--set", "train.epochs=1", "--set", "train.max_steps=20"]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def last_json(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def run_with_vectors(tmp_path_factory, data_root):
    """A tiny TREC run trained with a copy of the GloVe file (which tests then move or change)."""
    base = tmp_path_factory.mktemp("open")
    glove = base / "glove.txt.gz"
    shutil.copy(data_root / GLOVE, glove)
    prepared = base / "trec"
    prepare(PrepareSettings(task="trec", data=data_root, out=prepared, annotator="none", embeddings=glove))
    run = base / "run"
    result = invoke("train", "--task", "trec", "--prepared", prepared, "--run-dir", run, "--device", "cpu",
                    "--set", f"data.embeddings={glove}", *TINY)
    assert result.exit_code == 0, result.output
    return run, glove


def test_evaluate_split_and_file_agree_and_report_coverage(run_with_vectors, data_root):
    run, _ = run_with_vectors
    split = last_json(invoke("evaluate", run, "--split", "test", "--device", "cpu"))
    on_file = invoke("evaluate", run, "--file", data_root / "trec" / "TREC_10.label", "--device", "cpu")
    assert last_json(on_file)["score"] == split["score"]
    assert last_json(on_file)["coverage"] == split["coverage"]
    known = split["coverage"]
    assert known["open_tokens"] > 0 and known["oov_tokens"] == known["open_tokens"] + known["unk_tokens"]
    assert "outside the run's vocabulary" in on_file.output and "with a pretrained vector (used)" in on_file.output
    assert "annotation: none (the run reads neither POS tags nor trees)" in on_file.output

    off = invoke("evaluate", run, "--file", data_root / "trec" / "TREC_10.label", "--no-vectors", "--device", "cpu")
    off_known = last_json(off)["coverage"]
    assert off_known["open_tokens"] == 0 and off_known["unk_tokens"] == known["oov_tokens"]
    assert "not used (--no-vectors)" in off.output

    mixed = invoke("evaluate", run, "--split", "test", "--no-vectors", "--device", "cpu")
    assert mixed.exit_code != 0 and "apply to --file" in mixed.output


def test_predict_gives_an_unseen_word_its_vector(run_with_vectors):
    from cn3.runs.layout import RunDir
    from cn3.sentence.inference import load_model

    run, _ = run_with_vectors
    loaded = load_model(RunDir(run), torch.device("cpu"))
    word = "walrus"
    assert word not in loaded.vocabs["lower"]  # not a TREC training word, but GloVe has it
    text = f"What is a {word} ?"
    with_vectors = invoke("predict", run, text, "--device", "cpu")
    without = invoke("predict", run, text, "--no-vectors", "--device", "cpu")
    assert "with a pretrained vector (used): 20.0% of tokens" in with_vectors.output
    assert last_json(with_vectors)["probs"] != last_json(without)["probs"]  # the vector reached the model


def test_a_moved_vectors_file_is_found_by_its_digest_or_named(run_with_vectors, tmp_path, monkeypatch, data_root):
    run, glove = run_with_vectors
    args = ("evaluate", run, "--file", data_root / "trec" / "TREC_10.label", "--device", "cpu")
    expected = last_json(invoke(*args))["score"]
    moved = tmp_path / "elsewhere.gz"
    shutil.move(glove, moved)
    try:
        assert last_json(invoke(*args))["score"] == expected  # the sha256-keyed cache still has it
        monkeypatch.setenv("CN3_CACHE", str(tmp_path / "fresh-cache"))  # a machine that never read it
        missing = invoke(*args)
        assert missing.exit_code == 1 and "--embeddings PATH" in missing.output and "--no-vectors" in missing.output
        assert "Traceback" not in missing.output
        assert last_json(invoke(*args, "--embeddings", moved))["score"] == expected
        other = tmp_path / "other.txt"
        other.write_text("what 1 2\n")
        wrong = invoke(*args, "--embeddings", other)
        assert wrong.exit_code == 1 and "is not the vectors file this run was trained with" in wrong.output
    finally:
        shutil.move(moved, glove)


def test_a_run_without_vectors_says_so(tmp_path, data_root):
    prepared = tmp_path / "trec"
    prepare(PrepareSettings(task="trec", data=data_root, out=prepared, annotator="none"))
    run = tmp_path / "run"
    result = invoke("train", "--task", "trec", "--prepared", prepared, "--run-dir", run, "--device", "cpu",
                    "--set", "data.embeddings=null", *TINY)
    assert result.exit_code == 0, result.output
    out = invoke("evaluate", run, "--file", data_root / "trec" / "TREC_10.label", "--device", "cpu")
    assert last_json(out)["coverage"]["open_tokens"] == 0
    assert "word vectors: none recorded by the run" in out.output
    refused = invoke("evaluate", run, "--file", data_root / "trec" / "TREC_10.label", "--embeddings",
                     data_root / GLOVE, "--device", "cpu")
    assert refused.exit_code == 1 and "records no word vectors" in refused.output


# ---------------------------------------------------------------- the pieces, on hand-made data


class _Vectors:
    """The two attributes of gensim's KeyedVectors that the open vocabulary reads."""

    def __init__(self, rows: dict[str, list[float]]):
        self.key_to_index = {w: i for i, w in enumerate(rows)}
        self.vectors = torch.tensor(list(rows.values())).numpy()
        self.vector_size = self.vectors.shape[1]


def _encode(sentences: list[list[str]], vectors=None, upos=None):
    from data_prep.example import Example, Sentence
    from data_prep.store import GraphDataset, encode_split
    from data_prep.vocab import Vocab

    vocabs = {"word": Vocab(["<pad>", "<unk>", "the", "cat"]), "lower": Vocab(["<pad>", "<unk>", "the", "cat"]),
              "chars": Vocab(["<pad>", "<unk>", *"theca"]), "labels": Vocab(["x"], specials=False),
              "upos": Vocab(["<pad>", "<unk>", "DET", "NOUN"])}
    examples = [Example([Sentence(s, upos=upos[i] if upos else None)], label="x") for i, s in enumerate(sentences)]
    tensors = encode_split(examples, "graph", vocabs, 20, use_pos=upos is not None, use_deps=False, vectors=vectors)
    return GraphDataset(tensors, "graph"), vocabs


def test_open_ids_follow_the_vocabulary_in_sorted_order():
    vectors = _Vectors({"the": [9.0, 9.0], "zebra": [1.0, 2.0], "ant": [3.0, 4.0]})
    ds, _ = _encode([["The", "zebra", "cat"], ["ant", "Zebra", "dog"]], vectors)
    assert ds[0].lower.tolist() == [2, 5, 3]  # the: trained row; zebra: 4 + 1 (after "ant")
    assert ds[1].lower.tolist() == [4, 5, 1]  # ant: 4 + 0; Zebra looked up lower-cased; dog: no vector
    assert ds.open_vectors.tolist() == [[3.0, 4.0], [1.0, 2.0]]
    assert ds.subset([1]).open_vectors is ds.open_vectors  # a subset keeps the rows its ids point to


def test_node_encoder_embeds_open_ids_with_the_given_rows():
    from cn3.sentence.batching import SideBatch
    from cn3.sentence.node_encoder import NodeEncoder, NodeEncoderSizes

    enc = NodeEncoder(NodeEncoderSizes(n_words=3, n_chars=2, n_upos=2, n_spell=1), word_dim=2).eval()
    ids = torch.tensor([[2, 3, 4, 1]])
    side = SideBatch(word=ids, lower=ids, chars=torch.zeros(1, 4, 1, dtype=torch.long), spell=torch.zeros(1, 4, 1),
                     mask=torch.ones(1, 4, dtype=torch.bool))
    rows = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    with enc.open_vocabulary(rows):
        x, _ = enc(side)
    expected = torch.stack([enc.word.weight[2], rows[0], rows[1], enc.word.weight[1]])
    torch.testing.assert_close(x[0], expected)
    with pytest.raises(IndexError):  # outside the block the open ids mean nothing
        enc(side)
    with pytest.raises(ValueError, match="3 dimensions"):
        with enc.open_vocabulary(torch.zeros(1, 3)):
            pass


def test_coverage_counts_tokens_types_and_unknown_symbols():
    vectors = _Vectors({"zebra": [1.0, 2.0]})
    ds, vocabs = _encode([["The", "zebra", "cat"], ["the", "Zebra", "dog", "dög"]], vectors,
                         upos=[["DET", "NOUN", "NOUN"], ["DET", "NOUN", "NOUN", "X"]])
    report = coverage(ds, vocabs)
    assert report == {"tokens": 7, "types": 5,  # the, zebra, cat, dog, dög (lower-cased)
                      "open_tokens": 2, "unk_tokens": 2, "open_types": 1, "unk_types": 2,
                      "oov_tokens": 4, "oov_types": 3,
                      "unknown_chars": 5,  # The (T), zebra, Zebra, dog, dög: a character outside t h e c a
                      "unknown_pos": 1, "unknown_relations": None}


def test_the_annotation_of_new_text(monkeypatch):
    from cn3.config import ConfigError
    from cn3.sentence.inference import annotator_for_run

    made = []
    monkeypatch.setattr("data_prep.annotators.make_annotator", lambda name, **_: made.append(name) or name)
    gold_trees = {"annotator": {"name": "gold", "pos_input": False, "trees": True}}
    assert annotator_for_run(gold_trees, True)[1].startswith("gold (the file's own")
    assert annotator_for_run(gold_trees, False)[1].startswith("spacy, standing in for the gold")
    assert annotator_for_run(gold_trees, True, "spacy")[1].startswith("spacy (--annotator; the run was trained on gold")
    with pytest.raises(ConfigError, match="no gold"):
        annotator_for_run(gold_trees, False, "gold")
    assert made == ["gold", "spacy", "spacy"]
    words_only = {"annotator": {"name": "none", "pos_input": False, "trees": False}}
    assert annotator_for_run(words_only, False) == (None, "none (the run reads neither POS tags nor trees)")
    with pytest.raises(ConfigError, match="neither POS tags nor trees"):
        annotator_for_run(words_only, False, "spacy")
