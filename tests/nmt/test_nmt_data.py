"""Parallel files, splits, subwords and token batching."""

from __future__ import annotations

import gzip

import pytest

from cn3.config import ConfigError
from cn3.nmt.config import NMTDataConfig, resolve_nmt_config
from cn3.nmt.data import EOS, Tokenizer, canonical_split, encode_pairs, load_split, make_batch, read_parallel
from cn3.train.bucketing import bucketed_batches
from cn3.util.errors import DataError


def write(path, lines, gz=False):
    text = "".join(line + "\n" for line in lines)
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_read_parallel_reads_gzip_and_strips(tmp_path):
    src = write(tmp_path / "a.en.gz", ["Hello world. ", "Two"], gz=True)
    tgt = write(tmp_path / "a.de", ["Hallo Welt.", " Zwei"])
    assert read_parallel(src, tgt) == [("Hello world.", "Hallo Welt."), ("Two", "Zwei")]


def test_mismatched_line_counts_name_the_file_and_line(tmp_path):
    src = write(tmp_path / "a.en", ["one", "two", "three"])
    tgt = write(tmp_path / "a.de", ["eins", "zwei"])
    with pytest.raises(DataError) as err:
        read_parallel(src, tgt)
    assert err.value.path == src and err.value.line == 3
    assert "a.de has 2" in str(err.value) and "line-aligned" in str(err.value)


@pytest.mark.parametrize("content", [[], ["", "  "]])
def test_empty_parallel_file_is_an_error(tmp_path, content):
    src = write(tmp_path / "a.en", ["one", "two"])
    tgt = write(tmp_path / "a.de", content)
    with pytest.raises(DataError, match="empty file") as err:
        read_parallel(src, tgt)
    assert err.value.path == tgt


def test_split_names_and_aliases():
    assert canonical_split("test_2016_flickr", "multi30k") == "test2016"
    assert canonical_split("dev", "multi30k") == "val"
    assert canonical_split("test2016", "files") == "test"
    with pytest.raises(ConfigError, match="unknown split 'test2018'"):
        canonical_split("test2018", "multi30k")


def test_held_out_dev_split_is_disjoint_and_seeded(tmp_path):
    src = write(tmp_path / "t.en", [f"s{i}" for i in range(100)])
    tgt = write(tmp_path / "t.de", [f"t{i}" for i in range(100)])
    d = NMTDataConfig(corpus="files", train_src=src, train_tgt=tgt, valid_size=5)
    train, val = load_split(d, "train", 1), load_split(d, "val", 1)
    assert len(val) == 5 and len(train) == 95 and not set(val) & set(train)
    assert load_split(d, "val", 1) == val and load_split(d, "val", 2) != val


def test_multi30k_splits_are_found(data_root, staged):
    staged("multi30k/raw")
    pairs = load_split(NMTDataConfig(), "test2016", 1, data_root=data_root)
    assert len(pairs) == 1000 and all(s and t for s, t in pairs)


def test_token_batches_cover_everything_within_budget():
    """Translation batches by tokens alone (no row cap, one pool): the shared bucketing."""
    src = [3, 10, 4, 25, 7, 7, 2, 30] * 5
    tgt = [4, 9, 5, 20, 8, 6, 1, 31] * 5
    lengths = [max(s, t + 1) for s, t in zip(src, tgt)]

    def batches_of(seed=None):
        return bucketed_batches(lengths, 0, shuffle=seed is not None, seed=seed or 0, max_tokens=64, pool=0)

    batches = batches_of(3 * 100_003)
    assert sorted(i for b in batches for i in b) == list(range(len(src)))
    for b in batches:
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 64
    assert batches == batches_of(3 * 100_003)  # pure function of (seed, epoch)
    assert batches != batches_of(3 * 100_003 + 1)
    order = [i for b in batches_of() for i in b]  # evaluation order: sorted by length
    assert [lengths[i] for i in order] == sorted(lengths)


def test_sentencepiece_round_trip_and_batches(tmp_path):
    pairs = [("a red cat sits", "eine rote Katze sitzt"), ("the dog runs", "der Hund rennt")] * 20
    d = NMTDataConfig(vocab_size=60)
    tok = Tokenizer.train(pairs, d)
    assert tok.joint and tok.src_vocab <= 60
    assert tok.decode_tgt(tok.encode_tgt(["der Hund rennt"])) == ["der Hund rennt"]
    data = encode_pairs(tok, pairs, max_len=100)
    assert all(s[-1] == EOS for s in data.src)
    batch = make_batch(data, [0, 1])
    assert batch.tgt_in[0, 0] == 2 and (batch.tgt_out[0] == EOS).any()
    for name, blob in tok.files().items():
        (tmp_path / name).write_bytes(blob)
    assert Tokenizer.from_dir(tmp_path).encode_src(["a red cat"]) == tok.encode_src(["a red cat"])
    separate = Tokenizer.train(pairs, NMTDataConfig(vocab_size=60, joint_vocab=False))
    assert not separate.joint and set(separate.files()) == {"spm.src.model", "spm.tgt.model"}


def test_bad_config_keys_are_named():
    with pytest.raises(ConfigError, match=r"unknown key 'model.dmodel'; did you mean 'model.d_model'\?"):
        resolve_nmt_config(None, {}, ["model.dmodel=64"])
    with pytest.raises(ConfigError, match="model.hybrid.window"):
        resolve_nmt_config(None, {}, ["model.hybrid.window=-1"])
    with pytest.raises(ConfigError, match="data.joint_vocab"):
        resolve_nmt_config(None, {}, ["data.joint_vocab=false"])
    with pytest.raises(ConfigError, match="unknown encoder 'rnnn'; did you mean 'rnn'"):
        resolve_nmt_config(None, {"model.encoder": "rnnn"}, [])
