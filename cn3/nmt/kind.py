"""The translation kind of run (``cn3 nmt train``): a Transformer decoder over a zoo encoder. Its config
is :class:`cn3.nmt.config.NMTConfig` (:func:`cn3.nmt.config.resolve_nmt_config`); its trainer task is
:mod:`cn3.nmt.task`."""

from __future__ import annotations

from pathlib import Path

from cn3.runs.kinds import RunKind
from cn3.runs.layout import RunDir
from cn3.train.kinds import TRANSLATION_CHECKPOINT, TRANSLATION_RESUMABLE

#: experiment tasks that are translation corpora (every other task is a sentence task of ``cn3 tasks``)
TRANSLATION_TASKS = ("multi30k",)


class TranslationKind(RunKind):
    """Translation runs: experiment task ``multi30k``; the command takes no ``--task``."""

    name = "translation"
    command = ("nmt", "train")
    checkpoint_kind = TRANSLATION_CHECKPOINT
    resumable = TRANSLATION_RESUMABLE
    tasks = TRANSLATION_TASKS
    task_flag = False

    def owns_config(self, data: dict) -> bool:
        """A translation config names its languages (``data.src_lang``)."""
        return "src_lang" in data

    def config_class(self) -> type:
        from cn3.nmt.config import NMTConfig

        return NMTConfig

    def resolve(self, task: str | None, flags: dict, overrides: list[str], saved: Path | None = None):
        """As :meth:`RunKind.resolve`; ``task`` is not read (one corpus per config), and the data paths
        are made absolute."""
        from cn3.nmt.config import resolve_nmt_config
        from cn3.nmt.data import absolutize

        cfg = resolve_nmt_config(saved, flags, overrides)
        absolutize(cfg)
        return cfg

    def build_task(self, cfg, run: RunDir, config_dict: dict, world, resume: bool, device, command: str | None):
        from cn3.nmt.task import build_task

        return build_task(cfg, run, config_dict, world, resume, device, command)

    def default_run_dir(self, cfg) -> Path:
        """``runs/nmt-<corpus>-<encoder>-seed<S>`` (``<corpus>``: ``multi30k`` or the training file's stem)."""
        corpus = "multi30k" if cfg.data.corpus == "multi30k" else Path(cfg.data.train_src).name.split(".")[0]
        return Path("runs") / f"nmt-{corpus}-{cfg.model.encoder}-seed{cfg.train.seed}"

    def load(self, run_dir: Path, device):
        from cn3.nmt.inference import load_run

        return load_run(run_dir, device)


TRANSLATION = TranslationKind()
