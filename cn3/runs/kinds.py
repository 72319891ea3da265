"""The kinds of run, and the one place that decides which kind a run, a checkpoint or a cell is.

cn3 trains two kinds of run with one trainer (:mod:`cn3.train.trainer`): **sentence** runs (``cn3 train``:
classification, pairs and tagging over prepared sentence graphs) and **translation** runs
(``cn3 nmt train``). Each kind owns its config class, how a config is resolved, which keys a resumed
run may change, how a finished run is loaded back and trained, and the ``kind`` its checkpoints carry.
The experiment runner, the probe and the loaders ask here instead of guessing from file names or task
names (a run directory says its kind by its ``config.yaml``: a translation config names its languages).

Args of :class:`RunKind` (all imports are lazy: asking a run's kind loads neither model code):
    name: ``sentence`` or ``translation``.
    command: the ``cn3`` words that train one.
    checkpoint_kind: the ``kind`` entry of its checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from cn3.config import ConfigError
from cn3.runs.layout import RunDir
from cn3.train.kinds import SENTENCE_CHECKPOINT, SENTENCE_RESUMABLE, TRANSLATION_CHECKPOINT, TRANSLATION_RESUMABLE
from cn3.util.errors import RunError

#: experiment tasks that are translation corpora (every other task is a sentence task of `cn3 tasks`)
TRANSLATION_TASKS = ("multi30k",)


@dataclass(frozen=True)
class RunKind:
    name: str
    command: tuple[str, ...]
    checkpoint_kind: str

    @property
    def translation(self) -> bool:
        return self.name == "translation"

    def config_class(self):
        if self.translation:
            from cn3.nmt.config import NMTConfig

            return NMTConfig
        from cn3.sentence.config import RunConfig

        return RunConfig

    def resumable_changes(self) -> frozenset:
        """The ``(section, key)`` pairs a resumed run may change (epochs, patience, ...)."""
        return TRANSLATION_RESUMABLE if self.translation else SENTENCE_RESUMABLE

    def resolve(self, task: str, flags: dict, overrides: list[str], saved: Path | None = None):
        """The run's config: ``saved`` (a run's own ``config.yaml``, for ``--resume``) when given, else
        the shipped one for ``task``; then ``flags`` and the ``--set`` ``overrides``."""
        if self.translation:
            from cn3.nmt.config import resolve_nmt_config
            from cn3.nmt.data import absolutize

            cfg = resolve_nmt_config(saved, flags, overrides)
            absolutize(cfg)
            return cfg
        from cn3.sentence.resolve import resolve_config

        return resolve_config(task, saved, flags, overrides)

    def resolve_run(self, task: str | None, flags: dict, overrides: list[str], run_dir: Path | None,
                    resume: bool, config: Path | None = None) -> tuple[object, Path]:
        """The config and run directory of a run to train, as ``cn3 train``, ``cn3 nmt train`` and an
        experiment cell take them: ``config`` (a ``--config`` file) or the shipped config, and
        ``run_dir`` or :meth:`default_run_dir`; under ``--resume`` without ``--config``, the run's own
        ``config.yaml`` (only the flags and ``--set`` given now change it: one ``--resume`` behaviour)."""
        cfg = self.resolve(task, flags, overrides, config)
        run_dir = Path(run_dir) if run_dir is not None else self.default_run_dir(cfg)
        saved = RunDir(run_dir).config
        if resume and config is None and saved.is_file():
            cfg = self.resolve(task, flags, overrides, saved)
        return cfg, run_dir

    def build_task(self, cfg, run: RunDir, config_dict: dict, world, resume: bool, device, command: str | None):
        """The kind's :class:`cn3.train.trainer.RunTask` for ``cfg`` (data read, model built) and the
        phrase the log names the run by."""
        if self.translation:
            from cn3.nmt.task import build_task
        else:
            from cn3.sentence.task import build_task
        return build_task(cfg, run, config_dict, world, resume, device, command)

    def default_run_dir(self, cfg) -> Path:
        """``runs/<task>-<encoder>[-fold<k>]-seed<S>`` (sentence) or ``runs/nmt-<corpus>-<encoder>-seed<S>``:
        where ``cn3 train`` / ``cn3 nmt train`` write without ``--run-dir``."""
        if self.translation:
            corpus = "multi30k" if cfg.data.corpus == "multi30k" else Path(cfg.data.train_src).name.split(".")[0]
            return Path("runs") / f"nmt-{corpus}-{cfg.model.encoder}-seed{cfg.train.seed}"
        name = f"{cfg.data.task}-{cfg.model.encoder}"
        if cfg.data.task in ("mr", "subj", "cr", "mpqa"):  # cross-validated: one fold per run
            name += f"-fold{cfg.data.fold}"
        return Path("runs") / f"{name}-seed{cfg.train.seed}"

    def load(self, run_dir: Path, device):
        """The trained model of ``run_dir`` (``best.pt``, else ``latest.pt``)."""
        if self.translation:
            from cn3.nmt.inference import load_run

            return load_run(run_dir, device)
        from cn3.sentence.inference import load_model

        return load_model(RunDir(run_dir), device)


SENTENCE = RunKind("sentence", ("train",), SENTENCE_CHECKPOINT)
TRANSLATION = RunKind("translation", ("nmt", "train"), TRANSLATION_CHECKPOINT)


def kind_of_task(task: str) -> RunKind:
    """The kind of run that trains ``task`` (an experiment spec's task name)."""
    return TRANSLATION if task in TRANSLATION_TASKS else SENTENCE


def kind_of_settings(cfg) -> RunKind:
    """The kind of run a resolved config object trains (:class:`~cn3.nmt.config.NMTConfig`: translation)."""
    from cn3.nmt.config import NMTConfig

    return TRANSLATION if isinstance(cfg, NMTConfig) else SENTENCE


def kind_of_config(config: dict) -> RunKind:
    """The kind of a resolved config, as a run's ``config.yaml`` holds it: translation configs name
    their languages (``data.src_lang``), sentence configs their task (``data.task``)."""
    data = config.get("data") if isinstance(config, dict) else None
    if isinstance(data, dict) and "src_lang" in data:
        return TRANSLATION
    if isinstance(data, dict) and "task" in data:
        return SENTENCE
    raise ConfigError("not a cn3 run config: its data section names neither a task nor the languages")


def kind_of_run(path: str | Path) -> RunKind:
    """The kind of the run in directory ``path``, from its ``config.yaml``."""
    path = Path(path)
    config = RunDir(path).config
    if not path.is_dir():
        raise RunError(f"run directory not found: {path}")
    if not config.is_file():
        raise RunError(f"{path} has no config.yaml: not a cn3 run directory")
    try:
        return kind_of_config(yaml.safe_load(config.read_text(encoding="utf-8")))
    except yaml.YAMLError as err:
        raise ConfigError(f"{config} is not valid YAML ({err})") from None
    except ConfigError as err:
        raise ConfigError(f"{config}: {err}") from None
