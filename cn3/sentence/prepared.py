"""The prepared dataset a sentence run trains on, found or built with ``cn3 prepare``."""

from __future__ import annotations

from pathlib import Path

from cn3.config import ConfigError
from cn3.sentence.config import RunConfig
from cn3.util.console import console


def _prepare_settings(cfg: RunConfig):
    """What ``cn3 prepare`` is asked for by ``cfg.data``."""
    from data_prep.paths import data_root
    from data_prep.prepare import PrepareSettings
    from data_prep.taskspec import TaskOptions

    d = cfg.data
    embeddings = d.embeddings
    if embeddings is not None and not embeddings.is_absolute() and not embeddings.exists():
        embeddings = data_root(d.data) / embeddings  # configs name vectors relative to the data root
    return PrepareSettings(task=d.task, data=d.data, out=d.prepared, annotator=d.annotator,
                           max_len=d.max_len, min_freq=d.min_freq, embeddings=embeddings,
                           options=TaskOptions(fold=d.fold, fine=d.fine))


def prepared_path(cfg: RunConfig, prepare: bool = True) -> Path:
    """The prepared dataset a sentence run of ``cfg`` trains (or trained) on, worked out here for
    training, ``cn3 evaluate``/``predict`` and reports alike: ``data.prepared`` when it holds a
    dataset, else the one ``cn3 prepare`` builds or finds up to date for ``cfg.data``
    (:func:`ensure_prepared`). ``prepare=False`` (a report): never prepares; the dataset must exist.
    """
    given = cfg.data.prepared
    if given and (Path(given) / "manifest.json").is_file():
        return Path(given)
    if prepare:
        return ensure_prepared(cfg)
    from data_prep.paths import default_prepared_dir
    from data_prep.prepare import default_out_name, resolve_spec

    settings = _prepare_settings(cfg)
    out = Path(given) if given else default_prepared_dir(default_out_name(resolve_spec(settings), settings.options))
    if not (out / "manifest.json").is_file():
        raise ConfigError(f"{out} holds no prepared dataset: a report reads the data its runs trained on but never "
                          f"prepares it; run `cn3 prepare --task {cfg.data.task}` with the runs' data options first")
    return out


def ensure_prepared(cfg: RunConfig) -> Path:
    """The prepared dataset for ``cfg.data``, built (or found up to date) with ``cn3 prepare``."""
    from data_prep.prepare import prepare

    result = prepare(_prepare_settings(cfg))
    state = "up to date" if result.up_to_date else "prepared"
    console.print(f"dataset {state}: {result.out} (annotator {result.manifest['annotator']['name']})")
    return result.out
