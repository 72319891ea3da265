"""The sentence kind of run (``cn3 train``): classification, pairs and tagging over prepared sentence
graphs. Its config is :class:`cn3.sentence.config.RunConfig`, resolved from a task's shipped config
(:mod:`cn3.sentence.resolve`); its trainer task is :mod:`cn3.sentence.task`."""

from __future__ import annotations

from pathlib import Path

from cn3.runs.kinds import RunKind
from cn3.runs.layout import RunDir
from cn3.train.kinds import SENTENCE_CHECKPOINT, SENTENCE_RESUMABLE
from data_prep.tasks import TASKS


class SentenceKind(RunKind):
    """Sentence runs; the default kind: an experiment task no other kind claims is a sentence task."""

    name = "sentence"
    command = ("train",)
    checkpoint_kind = SENTENCE_CHECKPOINT
    resumable = SENTENCE_RESUMABLE
    tasks = ()
    task_flag = True

    def owns_config(self, data: dict) -> bool:
        """A sentence config names its task (``data.task``)."""
        return "task" in data

    def config_class(self) -> type:
        from cn3.sentence.config import RunConfig

        return RunConfig

    def resolve(self, task: str | None, flags: dict, overrides: list[str], saved: Path | None = None):
        from cn3.sentence.resolve import resolve_config

        return resolve_config(task, saved, flags, overrides)

    def build_task(self, cfg, run: RunDir, config_dict: dict, world, resume: bool, device, command: str | None):
        from cn3.sentence.task import build_task

        return build_task(cfg, run, config_dict, world, resume, device, command)

    def default_run_dir(self, cfg) -> Path:
        """``runs/<task>-<encoder>[-fold<k>]-seed<S>``: a cross-validated task names its fold."""
        name = f"{cfg.data.task}-{cfg.model.encoder}"
        spec = TASKS.get(cfg.data.task)
        if spec is not None and spec.cv:  # one fold per run
            name += f"-fold{cfg.data.fold}"
        return Path("runs") / f"{name}-seed{cfg.train.seed}"

    def load(self, run_dir: Path, device):
        from cn3.sentence.inference import load_model

        return load_model(RunDir(run_dir), device)


SENTENCE = SentenceKind()
