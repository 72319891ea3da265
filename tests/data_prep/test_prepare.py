"""The prepare pipeline: manifest, idempotence, atomicity, vocabularies, round trip, bad input."""

from __future__ import annotations

import json

import pytest
import torch

from cn3.util.errors import DataError
from data_prep import load_prepared
from data_prep.prepare import PrepareSettings, prepare
from data_prep.taskspec import TaskOptions

TREC_TEST_SHA = "033f22c028c2bbba9ca682f68ffe204dc1aa6e1cf35dd6207f2d4ca67f0d0e8e"


@pytest.fixture(scope="module")
def trec(tmp_path_factory, data_root):
    out = tmp_path_factory.mktemp("prep") / "trec"
    result = prepare(PrepareSettings(task="trec", data=data_root, out=out, annotator="none"))
    return result


def test_manifest_describes_the_dataset(trec):
    m = trec.manifest
    assert not trec.up_to_date
    assert m["task"] == "trec" and m["level"] == "graph"
    assert m["counts"]["train"]["examples"] + m["counts"]["dev"]["examples"] == 5452
    assert m["counts"]["test"]["examples"] == 500
    assert {s["sha256"] for s in m["sources"]} >= {TREC_TEST_SHA}
    assert m["annotator"]["name"] == "none" and m["n_edge_types"] == 0
    assert m["labels"] == ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"]
    assert m["statistics"]["splits"]["test"]["labels"]["DESC"] == 138
    assert m["vocab_sizes"] == {"word": 8830, "lower": 8121, "chars": 82, "labels": 6}
    for name in ("manifest.json", "vocab.json", "train.pt", "dev.pt", "test.pt", "test.jsonl"):
        assert (trec.out / name).is_file()


def test_rerun_is_a_no_op_and_force_rebuilds(trec, data_root):
    stamp = (trec.out / "train.pt").stat().st_mtime_ns
    again = prepare(PrepareSettings(task="trec", data=data_root, out=trec.out, annotator="none"))
    assert again.up_to_date and (trec.out / "train.pt").stat().st_mtime_ns == stamp
    forced = prepare(PrepareSettings(task="trec", data=data_root, out=trec.out, annotator="none", force=True))
    assert not forced.up_to_date and forced.manifest["fingerprint"] == trec.manifest["fingerprint"]


def test_changed_settings_rebuild(trec, data_root, tmp_path):
    out = tmp_path / "trec"
    first = prepare(PrepareSettings(task="trec", data=data_root, out=out, annotator="none"))
    second = prepare(PrepareSettings(task="trec", data=data_root, out=out, annotator="none", min_freq=2))
    assert not second.up_to_date
    assert second.manifest["fingerprint"] != first.manifest["fingerprint"]
    assert second.manifest["vocab_sizes"]["word"] < first.manifest["vocab_sizes"]["word"]


def test_a_new_reader_version_rebuilds(trec, data_root, tmp_path, monkeypatch):
    """A reader that now makes something else of the same files (logic: brackets became tokens)
    bumps its task's reader_version, and datasets the older reader prepared are prepared again."""
    import dataclasses

    from data_prep import tasks

    out = tmp_path / "trec"
    first = prepare(PrepareSettings(task="trec", data=data_root, out=out, annotator="none"))
    assert first.manifest["fingerprint"] == trec.manifest["fingerprint"]  # version 1 adds nothing
    monkeypatch.setitem(tasks.TASKS, "trec", dataclasses.replace(tasks.TASKS["trec"], reader_version=2))
    second = prepare(PrepareSettings(task="trec", data=data_root, out=out, annotator="none"))
    assert not second.up_to_date and second.manifest["fingerprint"] != first.manifest["fingerprint"]


def test_round_trip_through_the_store(trec):
    ds = load_prepared(trec.out)
    test = ds.splits["test"]
    assert len(test) == 500
    record = test.record(0)
    item = test[0]
    words = ds.vocabs["word"]
    expected = [t if t in words else "<unk>" for t in record["tokens"][0]]
    assert [words.itos[i] for i in item.word] == expected
    assert ds.vocabs["labels"].itos[int(item.y)] == record["label"]
    assert record["source"].endswith("TREC_10.label") and record["line"] == 1
    assert item.spell.shape[0] == item.num_nodes and item.chars.shape == (item.num_nodes, 20)


def test_interrupted_write_leaves_nothing(trec, data_root, tmp_path, monkeypatch):
    out = tmp_path / "trec"
    import data_prep.prepare as module

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "write_sidecar", boom)
    with pytest.raises(KeyboardInterrupt):
        prepare(PrepareSettings(task="trec", data=data_root, out=out, annotator="none"))
    assert not out.exists()
    # no temporary directory left behind; the empty lock file stays (removing it could let a waiting
    # process and a new one both hold "the" lock)
    assert [p.name for p in tmp_path.iterdir()] == [".trec.lock"]


def test_interrupted_rebuild_keeps_the_old_dataset(trec, data_root, monkeypatch):
    before = json.loads((trec.out / "manifest.json").read_text())
    item_before = load_prepared(trec.out).splits["dev"][0]
    import data_prep.prepare as module

    monkeypatch.setattr(module, "write_sidecar", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        prepare(PrepareSettings(task="trec", data=data_root, out=trec.out, annotator="none", force=True))
    assert json.loads((trec.out / "manifest.json").read_text()) == before
    item = load_prepared(trec.out).splits["dev"][0]
    assert item.num_nodes == item_before.num_nodes and torch.equal(item.word, item_before.word)


def test_gold_trees_and_no_pos_leak_for_pos_tagging(data_root, tmp_path):
    result = prepare(PrepareSettings(task="ptb_pos", data=data_root, out=tmp_path / "ptb"))
    m = result.manifest
    assert m["annotator"]["name"] == "gold" and m["annotator"]["trees"]
    assert not m["annotator"]["pos_input"]  # the labels are POS tags
    ds = load_prepared(result.out)
    item = ds.splits["dev"][0]
    assert "upos" not in item
    assert item.edge_index.shape[1] == 2 * item.num_nodes - int((item.head < 0).sum())
    assert item.y.shape == (item.num_nodes,)
    assert m["counts"]["train"]["examples"] == 3396


def _write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def test_custom_tsv_unknown_label_in_dev_names_file_and_line(tmp_path):
    train = _write(tmp_path / "train.tsv", "text\tlabel\ngood film\tpos\nbad film\tneg\n")
    dev = _write(tmp_path / "dev.tsv", "text\tlabel\nfine film\tpos\nodd film\tmeh\n")
    options = TaskOptions(files={"train": train, "dev": dev}, format="tsv")
    with pytest.raises(DataError) as err:
        prepare(PrepareSettings(task="custom", out=tmp_path / "out", annotator="none", options=options))
    assert "dev.tsv" in str(err.value) and "line 3" in str(err.value) and "'meh'" in str(err.value)
    assert not (tmp_path / "out").exists()


def test_max_len_truncates_and_counts(tmp_path):
    long = " ".join(f"w{i}" for i in range(50))
    train = _write(tmp_path / "train.tsv", f"text\tlabel\n{long}\tpos\nshort one\tneg\n")
    options = TaskOptions(files={"train": train, "dev": train}, format="tsv")
    result = prepare(PrepareSettings(task="custom", out=tmp_path / "out", annotator="none", max_len=10,
                                     options=options))
    assert result.manifest["statistics"]["truncated_sentences"] == 2  # once in train, once in dev
    assert result.manifest["statistics"]["splits"]["train"]["length"]["max"] == 10


def test_embeddings_rows_and_coverage(tmp_path):
    vectors = _write(tmp_path / "vec.txt", "good 1 0 0\nfilm 0 1 0\n")
    train = _write(tmp_path / "train.tsv", "text\tlabel\nGood film\tpos\nbad film\tneg\n")
    options = TaskOptions(files={"train": train, "dev": train}, format="tsv")
    result = prepare(PrepareSettings(task="custom", out=tmp_path / "out", annotator="none", embeddings=vectors,
                                     options=options))
    ds = load_prepared(result.out)
    lower = ds.vocabs["lower"]
    assert torch.equal(ds.embeddings[lower.id("good")], torch.tensor([1.0, 0, 0]))
    assert not ds.embeddings_found[lower.id("bad")]
    stats = result.manifest["statistics"]["splits"]["train"]
    assert stats["oov_embeddings_tokens"] == 0.25 and stats["oov_embeddings_types"] == pytest.approx(1 / 3, abs=1e-3)


def test_vocabulary_comes_from_train_and_dev_words_keep_their_vectors_beside_it(tmp_path):
    vectors = _write(tmp_path / "vec.txt", "good 1 0 0\nfilm 0 1 0\ngreat 0 0 1\nrare 1 1 0\n")
    train = _write(tmp_path / "train.tsv", "text\tlabel\nGood film\tpos\nbad film\tneg\nrare film\tneg\n")
    dev = _write(tmp_path / "dev.tsv", "text\tlabel\nGreat film\tpos\nawful film\tneg\n")
    options = TaskOptions(files={"train": train, "dev": dev}, format="tsv")
    result = prepare(PrepareSettings(task="custom", out=tmp_path / "out", annotator="none", embeddings=vectors,
                                     min_freq=2, options=options))
    ds = load_prepared(result.out)
    lower = ds.vocabs["lower"]
    # film (2 times) passes min_freq; good and rare are rarer but have vectors; bad has neither
    assert lower.itos == ["<pad>", "<unk>", "film", "good", "rare"]
    assert "great" not in lower  # a dev word is never in the vocabulary ...
    dev_split = ds.splits["dev"]
    assert dev_split[0].lower.tolist() == [len(lower), lower.id("film")]  # ... it gets the first open id
    assert torch.equal(dev_split.open_vectors, torch.tensor([[0.0, 0, 1]]))  # and its vector
    assert dev_split[1].lower.tolist() == [1, lower.id("film")]  # awful has no vector: <unk>
    assert ds.splits["train"].open_vectors.shape == (0, 3)  # bad: no vector, so nothing to open
    stats = result.manifest["statistics"]["splits"]["dev"]
    assert stats["oov_vocab_tokens"] == 0.5 and stats["oov_vectors_tokens"] == 0.25
    emb = result.manifest["embeddings"]
    assert emb["path"] == str(vectors.resolve()) and emb["format"] == "glove-text" and len(emb["sha256"]) == 64


def test_staging_a_test_file_changes_nothing_that_is_trained(tmp_path):
    """The vocabularies and vectors depend on the train split alone: adding a test file to the
    prepared data (with words of its own, with and without vectors, new characters) leaves them
    byte for byte as they were."""
    vectors = _write(tmp_path / "vec.txt", "good 1 0 0\nfilm 0 1 0\nzebra 0 0 1\n")
    train = _write(tmp_path / "train.tsv", "text\tlabel\nGood film\tpos\nbad film\tneg\n")
    test = _write(tmp_path / "test.tsv", "text\tlabel\nzebra film\tpos\nQuixotic ñ film\tneg\n")
    outs = {}
    for name, files in (("without", {"train": train, "dev": train}),
                        ("with", {"train": train, "dev": train, "test": test})):
        options = TaskOptions(files=files, format="tsv")
        outs[name] = prepare(PrepareSettings(task="custom", out=tmp_path / name, annotator="none",
                                             embeddings=vectors, options=options)).out
    assert (outs["with"] / "vocab.json").read_text() == (outs["without"] / "vocab.json").read_text()
    a, b = (torch.load(outs[n] / "embeddings.pt", weights_only=True) for n in ("with", "without"))
    assert torch.equal(a["vectors"], b["vectors"]) and torch.equal(a["found"], b["found"])
    test_split = load_prepared(outs["with"]).splits["test"]
    assert test_split.open_vectors.tolist() == [[0.0, 0.0, 1.0]]  # zebra, from the vectors file


def test_refuses_to_overwrite_a_foreign_directory(tmp_path, data_root):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("precious")
    with pytest.raises(DataError, match="not empty"):
        prepare(PrepareSettings(task="trec", data=data_root, out=out, annotator="none"))
    assert (out / "notes.txt").read_text() == "precious"


def test_a_folder_of_prepared_tasks_is_named_as_one(tmp_path, data_root):
    """``--prepared prepared`` where ``prepared/trec`` was meant: the message names the task's own folder."""
    out = tmp_path / "prepared"
    for task in ("sick", "trec"):
        (out / task).mkdir(parents=True)
        (out / task / "manifest.json").write_text("{}")
    with pytest.raises(DataError, match=r"holds prepared tasks \(sick, trec\): give the task's own, .*prepared/trec"):
        prepare(PrepareSettings(task="trec", data=data_root, out=out, annotator="none"))
    assert sorted(p.name for p in out.iterdir()) == ["sick", "trec"]


def test_written_files_are_ordinary_files(trec):
    import os
    import stat

    mask = os.umask(0)
    os.umask(mask)
    for name in ("manifest.json", "vocab.json"):
        mode = stat.S_IMODE((trec.out / name).stat().st_mode)
        assert mode == 0o666 & ~mask, oct(mode)  # not the 0600 of a temporary file


@pytest.mark.slow  # two real prepares in two processes
def test_parallel_prepares_of_one_dataset_take_turns(tmp_path, data_root):
    """Two trainings that prepare the same data on the fly: one builds it, the other waits and finds
    it up to date (without the lock each removed the other's temporary directory as stale)."""
    import subprocess
    import sys

    out = tmp_path / "trec"
    stale = tmp_path / ".trec.tmp-999999999"  # left by a process that died
    stale.mkdir()
    code = ("import sys; from data_prep.prepare import PrepareSettings, prepare; "
            "r = prepare(PrepareSettings(task='trec', data=sys.argv[1], out=sys.argv[2], annotator='none')); "
            "print('UP_TO_DATE' if r.up_to_date else 'BUILT')")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(data_root), str(out)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert sorted(o.strip().splitlines()[-1] for o in outputs) == ["BUILT", "UP_TO_DATE"], outputs
    assert load_prepared(out).manifest["task"] == "trec" and not stale.exists()
