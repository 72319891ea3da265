"""Run directories written by cn3 0.1.x: translation runs load under the renamed encoders; sentence runs
of a replaced encoder fail with a message naming the version and what to do."""

from __future__ import annotations

import pytest
import torch

import cn3
from cn3.config import ConfigError, from_dict, to_dict
from cn3.nmt.config import NMTConfig, NMTDataConfig, NMTModelConfig
from cn3.nmt.data import Tokenizer
from cn3.nmt.inference import load_run
from cn3.nmt.transformer import ModelArgs, Seq2Seq
from cn3.runs.layout import RunDir
from cn3.sentence.inference import load_model
from cn3.train.kinds import TRANSLATION_CHECKPOINT as CHECKPOINT_KIND


@pytest.mark.parametrize("old, new", [("onlstm", "onlstm_san"), ("lstm", "lstm_san")])
def test_a_0_1_translation_run_loads_under_the_new_encoder_name(tmp_path, old, new):
    tok = Tokenizer.train([("a red cat sits", "eine rote Katze sitzt"), ("the dog runs", "der Hund rennt")] * 20,
                          NMTDataConfig(vocab_size=40))
    model_cfg = from_dict(NMTModelConfig, {"encoder": new, "d_model": 16, "heads": 2, "ff": 32, "encoder_layers": 2,
                                           "decoder_layers": 1, "rnn": {"chunk_size": 4}})
    torch.manual_seed(0)
    model = Seq2Seq(model_cfg, ModelArgs(tok.src_vocab, tok.tgt_vocab))
    config = to_dict(NMTConfig(model=model_cfg))
    config["model"]["encoder"] = old  # as 0.1.0 named it
    run = RunDir(tmp_path)
    torch.save({"kind": CHECKPOINT_KIND, "cn3_version": "0.1.0", "config": config,
                "model_args": ModelArgs(tok.src_vocab, tok.tgt_vocab).__dict__, "model": model.state_dict(),
                "spm": tok.models}, run.best)
    loaded = load_run(tmp_path, torch.device("cpu"))
    assert loaded.config.model.encoder == new
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in loaded.model.state_dict().items())


@pytest.mark.parametrize("old, new", [("bilstm", "lstm"), ("gcn", "pdgraph"), ("transformer", "transformer")])
def test_a_0_1_sentence_run_of_a_replaced_encoder_fails_clearly(tmp_path, old, new):
    run = RunDir(tmp_path)
    torch.save({"cn3_version": "0.1.0", "config": {"data": {"task": "trec"}, "model": {"encoder": old}}}, run.best)
    with pytest.raises(ConfigError) as err:
        load_model(run, torch.device("cpu"))
    message = str(err.value)
    assert f"cn3 0.1.0's '{old}' encoder" in message and f"--set model.encoder={new}" in message


def test_a_run_of_another_release_is_not_resumed(tmp_path):
    from cn3.runs.compat import check_resumable

    check_resumable(cn3.__version__, tmp_path / "latest.pt")  # the same release resumes
    with pytest.raises(ConfigError, match=r"written by cn3 0\.1\.0.*start a new run"):
        check_resumable("0.1.0", tmp_path / "latest.pt")


def test_a_0_2_sentence_config_loses_the_removed_vectors_vocab_key():
    from cn3.runs.compat import upgrade_sentence_config
    from cn3.sentence.config import RunConfig

    saved = to_dict(RunConfig())
    saved["data"]["vectors_vocab"] = True  # written by cn3 0.2.x
    with pytest.raises(ConfigError, match="vectors_vocab"):
        from_dict(RunConfig, saved)
    assert from_dict(RunConfig, upgrade_sentence_config(saved, "0.2.0")) == RunConfig()


def test_resuming_a_run_of_an_older_release_says_so(tmp_path):
    """A 0.2 run directory's config has a key 0.3 removed: --resume names the release, not the key alone."""
    import yaml

    from cn3.sentence.config import RunConfig
    from cn3.train.kinds import LOOP_RESUMABLE as RESUMABLE_CHANGES
    from cn3.train.trainer import open_run

    saved = to_dict(RunConfig())
    saved["data"]["vectors_vocab"] = True
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(saved))
    with pytest.raises(ConfigError, match="probably written by another release") as err:
        open_run(RunConfig(), tmp_path, resume=True, device_name="cpu", resumable=RESUMABLE_CHANGES)
    assert "vectors_vocab" in str(err.value)


def test_a_checkpoint_whose_config_has_an_unknown_key_is_named_in_the_error(tmp_path):
    """A run written by a build with a key this one lacks: the message names the checkpoint file and the key."""
    run = RunDir(tmp_path)
    torch.save({"cn3_version": cn3.__version__,
                "config": {"data": {"task": "trec"}, "model": {"encoder": "cn3", "hub_bound": 2.0}}}, run.best)
    with pytest.raises(ConfigError) as err:
        load_model(run, torch.device("cpu"))
    assert str(err.value).startswith(
        f"{run.best}: its recorded config does not load here: unknown key 'model.hub_bound'")
