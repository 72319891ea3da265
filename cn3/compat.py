"""Reading run directories written by older versions of cn3.

0.2.0 brought every encoder into one zoo (:mod:`cn3.encoders`). Runs of the encoders whose modules
did not change (CN3, NBOW, and every translation encoder) load as they are; translation encoders
were renamed (``onlstm`` -> ``onlstm_san``, ``lstm`` -> ``lstm_san``: plain ``onlstm``/``lstm`` are now
the recurrent stacks without self-attention). Sentence runs of an encoder that 0.2.0 replaced by
the published model fail with a message naming the version and what to do.

0.3.0 builds the vocabulary from the train split alone and gives words outside it their pretrained
vector when scored, so ``data.vectors_vocab`` (0.2.x: words of every staged split with a vector
joined the vocabulary) is gone; older runs load without it and keep the vocabulary they were
trained with.
"""

from __future__ import annotations

from cn3.config import ConfigError

#: translation encoders renamed in 0.2.0 (same modules, same weights)
NMT_RENAMED = {"onlstm": "onlstm_san", "lstm": "lstm_san"}
#: sentence encoders of 0.1.x whose modules 0.2.0 replaced, and what replaces them
SENTENCE_REPLACED = {"bilstm": "lstm", "gcn": "pdgraph", "transformer": "transformer", "cnn": "cnn"}


def _release(version: str | None) -> tuple[int, int]:
    major, minor = (int(part) for part in (version or "0.1").split(".")[:2])
    return major, minor


def _older_than_0_2(version: str | None) -> bool:
    return _release(version) < (0, 2)


def check_resumable(version: str | None, path) -> None:
    """Resuming is exact only within one release: another one may build other models or batch
    orders (0.2.0 changed the sentence heads' dropout and the translation batches)."""
    from cn3 import __version__

    if _release(version) != _release(__version__):
        raise ConfigError(f"cannot resume {path}: it was written by cn3 {version or '0.1'}, and this is cn3 "
                          f"{__version__}, whose models or batch orders differ; evaluate or translate the run as "
                          "it is, or start a new run")


def upgrade_nmt_config(config: dict, version: str | None) -> dict:
    """A translation run's saved config, with 0.1.x encoder names mapped to today's."""
    if _older_than_0_2(version):
        model = config.get("model", {})
        model["encoder"] = NMT_RENAMED.get(model.get("encoder"), model.get("encoder"))
    return config


def upgrade_sentence_config(config: dict, version: str | None) -> dict:
    """A sentence run's saved config without the keys that later releases removed."""
    if _release(version) < (0, 3):
        config.get("data", {}).pop("vectors_vocab", None)
    return config


def check_sentence_run(config: dict, version: str | None, where: str) -> None:
    """Fail clearly on a sentence run whose encoder module 0.2.0 replaced."""
    encoder = config.get("model", {}).get("encoder")
    if _older_than_0_2(version) and encoder in SENTENCE_REPLACED:
        new = SENTENCE_REPLACED[encoder]
        raise ConfigError(f"{where} was trained with cn3 {version or '0.1'}'s '{encoder}' encoder, which cn3 0.2.0 "
                          f"replaced by the published model '{new}' (different weights); retrain it, e.g. "
                          f"`cn3 train --task {config.get('data', {}).get('task', 'TASK')} --set model.encoder={new}`")
