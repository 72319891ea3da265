"""A checkpoint (``latest.pt``, ``best.pt``) as one :class:`Checkpoint`: the Trainer builds it and
restores from it, a loader reads it; :meth:`Checkpoint.write` saves it as one plain dict, atomically,
and :meth:`Checkpoint.load` reads it back with ``torch.load(weights_only=True)``.

The file's keys, one per field::

    cn3_version   the release that wrote it (--resume needs the same: cn3.runs.compat.check_resumable)
    kind          cn3-sentence or cn3-nmt (cn3.train.kinds); loaders check it
    config        the resolved config            model_args   the model's constructor arguments
    model         the weights evaluation uses: the weight average under train.ema, else the model's
    state         the TrainState (cn3.train.state) as a plain dict
    optimizer, scaler, rng     latest.pt only (None in best.pt): what resuming needs besides the weights
    raw_model, ema_updates     latest.pt of a run with a weight average: the weights training goes on
                               from, and how many updates the average holds (None otherwise)
    (payload)     the kind's own keys, beside the others: vocab, manifest (sentence);
                  format, scheduler, spm, data (translation)

Older checkpoints are read here too, in :func:`older_forms`, the one place that knows how earlier
releases wrote them. Those that pickled NumPy's random state cannot be read with ``weights_only``
at all; :func:`cn3.train.checkpoints.load_checkpoint` names the command that rewrites them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from cn3.runs.layout import RunDir
from cn3.train.checkpoints import load_checkpoint, plain_checkpoint
from cn3.util.atomic import atomic_torch_save
from cn3.util.errors import RunError


@dataclass
class Checkpoint:
    """One checkpoint, its entries named (the module docstring lists them).

    Args:
        kind: which kind of run wrote it (:mod:`cn3.train.kinds`).
        cn3_version: the release that wrote it.
        config: the run's resolved config as a dict.
        model_args: the model's constructor arguments as a dict.
        model: the state dict of the weights evaluation uses.
        state: :meth:`cn3.train.state.TrainState.state_dict`.
        payload: the kind's own entries (:meth:`cn3.train.trainer.RunTask.checkpoint_payload`).
        optimizer, scaler, rng: their states, in ``latest.pt`` only.
        raw_model, ema_updates: under a weight average, in ``latest.pt`` only.
    """

    kind: str | None
    cn3_version: str | None
    config: dict
    model_args: dict
    model: dict
    state: dict
    payload: dict = field(default_factory=dict)
    optimizer: dict | None = None
    scaler: dict | None = None
    rng: dict | None = None
    raw_model: dict | None = None
    ema_updates: int | None = None

    def to_dict(self) -> dict:
        """The dict the file holds: every field but ``payload`` under its name, the payload's entries
        beside them (a loader reads ``ckpt["vocab"]``, not ``ckpt["payload"]["vocab"]``)."""
        named = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "payload"}
        clash = named.keys() & self.payload.keys()
        if clash:
            raise ValueError(f"a checkpoint's payload cannot use the names of its fields: {sorted(clash)}")
        return {**named, **self.payload}

    @classmethod
    def from_dict(cls, saved: dict, path: str | Path) -> Checkpoint:
        """The checkpoint a file at ``path`` held as ``saved`` (this release's form or an earlier one:
        :func:`older_forms`); the keys that are no field make the payload.

        Raises:
            RunError: ``saved`` is not a cn3 checkpoint (not a dict with a ``config``).
        """
        if not isinstance(saved, dict) or "config" not in saved:
            raise RunError(f"{path} is not a cn3 checkpoint (it holds no run config)")
        saved = older_forms(dict(saved), Path(path))
        names = [f.name for f in dataclasses.fields(cls) if f.name != "payload"]
        return cls(**{name: saved.get(name) for name in names},
                   payload={k: v for k, v in saved.items() if k not in names})

    def write(self, path: str | Path) -> None:
        """Save to ``path`` atomically (a reader never sees half a file), in the plain forms
        ``weights_only`` reads (:func:`cn3.train.checkpoints.plain_checkpoint`).

        Raises:
            RunError: an entry that is not plain data (tensors, numbers, strings, containers).
        """
        path = Path(path)
        atomic_torch_save(path, plain_checkpoint(self.to_dict(), path.name))

    @classmethod
    def load(cls, path: str | Path) -> Checkpoint:
        """Read ``path`` with ``torch.load(weights_only=True)``, on the host.

        Raises:
            RunError: not a readable checkpoint, one carrying pickled objects, or an earlier release's
                that must be converted first (the message names the command).
        """
        return cls.from_dict(load_checkpoint(path), path)


def older_forms(saved: dict, path: Path) -> dict:
    """``saved``, a checkpoint dict read from ``path``, in this release's form:

    * a ``state`` without ``best_written`` (before the field existed) takes whether the run's
      ``best.pt`` exists;
    * a missing ``state`` (releases before the TrainState) is empty: the TrainState keeps its defaults;
    * ``raw_model``/``ema_updates``, which releases up to 0.3 wrote only in a sentence run's
      ``latest.pt``, and ``optimizer``/``scaler``/``rng``, are ``None`` where missing
      (:meth:`Checkpoint.from_dict` reads absent fields as ``None``).
    """
    state = dict(saved.get("state") or {})
    if "best_written" not in state:
        state["best_written"] = RunDir(path.parent).best.is_file()
    saved["state"] = state
    return saved
