"""Every encoder of the zoo trains on real data at every level it serves, through one interface.

Real sentences from the staged data (TREC questions, SICK pairs, UD English EWT with gold trees,
Multi30k for translation), parsed by spaCy where the level needs trees; each encoder takes a few
optimizer steps on the same batch and its loss must fall well below where it started.
"""

from __future__ import annotations

import csv

import pytest
import torch

from cn3.encoders import ENCODERS
from cn3.sentence.batching import make_batch
from cn3.sentence.config import ModelConfig
from cn3.sentence.model import SentenceGraphModel, model_args_from_dataset
from cn3.train.optim import make_optimizer
from data_prep.dataset import load_prepared
from data_prep.prepare import PrepareSettings, prepare
from data_prep.taskspec import TaskOptions

# slow: every encoder trained on real data (`pytest -m "not slow"` is the quick loop)
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.slow]

SMALL = dict(word_dim=16, hidden=16, energy_dim=8, mlp_hidden=16, heads=2, dropout=0.0, attention_dropout=0.0,
             pos_dim=4, char="cnn", char_dim=4, char_out=6)
STEPS = 40


def _write_tsv(path, header, rows):
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
        writer.writerow(header)
        writer.writerows(rows)


@pytest.fixture(scope="module")
def datasets(tmp_path_factory, data_root):
    """Prepared graph (TREC), pair (SICK) and node (UD EWT, gold trees) datasets, small."""
    base = tmp_path_factory.mktemp("zoo")
    questions = (data_root / "trec" / "train_5500.label").read_text(encoding="latin-1").splitlines()[:96]
    rows = [(q.split(" ", 1)[1], q.split(" ", 1)[0].split(":")[0]) for q in questions]
    _write_tsv(base / "trec.tsv", ("text", "label"), rows)
    sick = (data_root / "sick" / "SICK.txt").read_text(encoding="utf-8").splitlines()[1:97]
    _write_tsv(base / "sick.tsv", ("text_a", "text_b", "label"), [tuple(line.split("\t")[1:4]) for line in sick])
    out = {}
    for level, name in (("graph", "trec"), ("pair", "sick")):
        files = {"train": base / f"{name}.tsv", "dev": base / f"{name}.tsv"}
        result = prepare(PrepareSettings(task="custom", out=base / name, annotator="spacy",
                                         options=TaskOptions(files=files, format="tsv")))
        out[level] = load_prepared(result.out)
    result = prepare(PrepareSettings(task="ud_pos", data=data_root, out=base / "ud", annotator="gold"))
    out["node"] = load_prepared(result.out)
    for ds in out.values():
        assert int(ds.manifest["n_edge_types"]) > 1  # every level carries dependency trees
    return out


def _falls(losses: list[float]) -> bool:
    start, end = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    return end < 0.7 * start


CASES = [(name, level) for name, spec in ENCODERS.items() for level in ("graph", "pair", "node")
         if level in spec.levels]


@pytest.mark.parametrize("encoder,level", CASES, ids=[f"{e}-{lv}" for e, lv in CASES])
def test_encoder_trains_on_real_data(encoder, level, datasets):
    ds = datasets[level]
    torch.manual_seed(0)
    model = SentenceGraphModel(ModelConfig(encoder=encoder, **SMALL), model_args_from_dataset(ds)).train()
    optimizer = make_optimizer(model, "adam", 1e-2)
    batch = make_batch(ds.splits["train"], list(range(24)))
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = model(batch).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert _falls(losses), f"{encoder} on {level}: {losses[:3]} ... {losses[-3:]}"


TRANSLATION = [name for name, spec in ENCODERS.items() if "translation" in spec.levels]


@pytest.fixture(scope="module")
def translation_batch(data_root):
    from cn3.nmt.config import NMTDataConfig
    from cn3.nmt.data import Tokenizer, encode_pairs, load_split
    from cn3.nmt.data import make_batch as nmt_batch

    pairs = load_split(NMTDataConfig(data=data_root), "val", 1)[:200]
    tok = Tokenizer.train(pairs, NMTDataConfig(vocab_size=300))
    data = encode_pairs(tok, pairs[:16], 100)
    return tok, nmt_batch(data, list(range(len(data))))


@pytest.mark.parametrize("encoder", TRANSLATION)
def test_encoder_trains_as_a_translation_encoder(encoder, translation_batch):
    from cn3.config import from_dict
    from cn3.nmt.config import NMTModelConfig
    from cn3.nmt.transformer import ModelArgs, Seq2Seq

    tok, batch = translation_batch
    torch.manual_seed(0)
    cfg = from_dict(NMTModelConfig, {"encoder": encoder, "d_model": 32, "heads": 2, "ff": 64, "encoder_layers": 2,
                                     "decoder_layers": 1, "dropout": 0.0, "attention_dropout": 0.0,
                                     "rnn": {"layers": 1}, "hybrid": {"layers": 1}, "cn3": {"energy_dim": 8}})
    model = Seq2Seq(cfg, ModelArgs(tok.src_vocab, tok.tgt_vocab)).train()
    optimizer = make_optimizer(model, "adam", 1e-2)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss, _ = model.loss(model(batch.src, batch.tgt_in), batch.tgt_out)
        (loss / batch.tokens).backward()
        optimizer.step()
        losses.append(loss.item() / batch.tokens)
    assert _falls(losses), f"{encoder}: {losses[:3]} ... {losses[-3:]}"
