"""What a kind of run is: the contract every kind fulfils, with no kind of its own.

cn3 trains two kinds of run with one trainer (:mod:`cn3.train.trainer`): **sentence** runs (``cn3 train``,
:mod:`cn3.sentence.kind`) and **translation** runs (``cn3 nmt train``, :mod:`cn3.nmt.kind`). Each kind owns
its config class, how a config is resolved, which keys a resumed run may change, how a finished run is
loaded back and trained, and the ``kind`` its checkpoints carry. The kinds are collected in one mapping
above them, :data:`cn3.kinds.KINDS`, which decides which kind a run, a config or a cell is; this module
sits below both (it imports neither), so the trainer can be handed a kind without knowing any.

A third kind is one subclass in its own package and one entry of :data:`cn3.kinds.KINDS`.
"""

from __future__ import annotations

from pathlib import Path

from cn3.runs.layout import RunDir


class RunKind:
    """One kind of run. Subclasses set the class attributes and implement the methods that raise
    :class:`NotImplementedError`; a subclass keeps its heavy imports (model code, torch) inside its
    methods, so that asking a run's kind loads no model.

    Attributes:
        name: ``sentence``, ``translation``: the kind's key in :data:`cn3.kinds.KINDS`.
        command: the ``cn3`` words that train one (``("train",)``, ``("nmt", "train")``).
        checkpoint_kind: the ``kind`` entry of its checkpoints.
        resumable: the ``(section, key)`` pairs a resumed run may change.
        tasks: the experiment task names this kind trains (empty: the default kind, which trains the
            names no other kind claims).
        task_flag: whether its command names the task (``cn3 train --task trec``).
    """

    name: str = ""
    command: tuple[str, ...] = ()
    checkpoint_kind: str = ""
    resumable: frozenset = frozenset()
    tasks: tuple[str, ...] = ()
    task_flag: bool = False

    def __repr__(self) -> str:
        return f"<run kind {self.name}>"

    @property
    def translation(self) -> bool:
        """Whether this is the translation kind (callers that only need to tell the two apart)."""
        return self.name == "translation"

    def resumable_changes(self) -> frozenset:
        """The ``(section, key)`` pairs a resumed run may change (epochs, patience, ...)."""
        return self.resumable

    def cell_command(self, task: str) -> list[str]:
        """The ``cn3`` words that train an experiment cell of ``task`` (before its ``--set`` pairs)."""
        return [*self.command] + (["--task", task] if self.task_flag else [])

    def owns_config(self, data: dict) -> bool:
        """Whether a run's ``config.yaml`` whose data section is ``data`` is of this kind."""
        raise NotImplementedError

    def config_class(self) -> type:
        """The kind's config dataclass."""
        raise NotImplementedError

    def resolve(self, task: str | None, flags: dict, overrides: list[str], saved: Path | None = None):
        """The run's config: ``saved`` (a run's own ``config.yaml``, for ``--resume``, or a ``--config``
        file) when given, else the shipped one for ``task``; then ``flags`` and the ``--set`` ``overrides``.

        Raises:
            ConfigError: an unknown task, key or value.
        """
        raise NotImplementedError

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
        raise NotImplementedError

    def default_run_dir(self, cfg) -> Path:
        """Where ``cn3 train`` / ``cn3 nmt train`` write without ``--run-dir``."""
        raise NotImplementedError

    def load(self, run_dir: Path, device):
        """The trained model of ``run_dir`` (``best.pt``, else ``latest.pt``)."""
        raise NotImplementedError
