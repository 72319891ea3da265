"""Reading run directories written by older releases of cn3 (what changed: docs/history.md,
"Code notes moved from docstrings").

* translation configs: encoder names of releases before 0.2 mapped to today's (:data:`NMT_RENAMED`);
* sentence runs of an encoder whose module 0.2 replaced fail with a message saying what to do;
* keys that later releases removed (``data.vectors_vocab``) are dropped: such runs keep the
  vocabulary they were trained with;
* resuming is refused across releases.
"""

from __future__ import annotations

from cn3.config import ConfigError

#: translation encoders renamed in 0.2 (same modules, same weights)
NMT_RENAMED = {"onlstm": "onlstm_san", "lstm": "lstm_san"}
#: sentence encoders whose modules 0.2 replaced, and what replaces them
SENTENCE_REPLACED = {"bilstm": "lstm", "gcn": "pdgraph", "transformer": "transformer", "cnn": "cnn"}


def _release(version: str | None) -> tuple[int, int]:
    major, minor = (int(part) for part in (version or "0.1").split(".")[:2])
    return major, minor


def _older_than_0_2(version: str | None) -> bool:
    return _release(version) < (0, 2)


def check_resumable(version: str | None, path) -> None:
    """Resuming is exact only within one release (another may build other models or batch orders):
    raises ConfigError otherwise.
    """
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
