"""Checkpoint files read with ``torch.load(weights_only=True)`` (a shared run directory cannot run
code when it is opened), written in the plain forms that reads, and those of earlier releases that
pickled NumPy's random state converted (``cn3 checkpoint upgrade``); a resumed run's config checked
against the one it started with. What a checkpoint holds: :class:`cn3.train.checkpoint.Checkpoint`."""

from __future__ import annotations

import io
import pickle
from pathlib import Path, PurePath

import numpy as np
import torch
import yaml

from cn3.config import ConfigError, from_dict, to_dict
from cn3.train.runtime import plain_rng_state
from cn3.util.atomic import atomic_write
from cn3.util.errors import RunError

#: What the older checkpoints pickled besides tensors and plain data: NumPy's RNG
#: key array (under NumPy 2's and NumPy 1's module names). Reading those few globals runs no code
#: of the file's choosing, so :func:`upgrade_checkpoint` converts such checkpoints without trust.
LEGACY_GLOBALS = {"numpy._core.multiarray._reconstruct": np._core.multiarray._reconstruct,
                  "numpy.core.multiarray._reconstruct": np._core.multiarray._reconstruct,
                  "numpy.ndarray": np.ndarray, "numpy.dtype": np.dtype,
                  "numpy.dtypes.UInt32DType": np.dtypes.UInt32DType}


def upgrade_command(path: Path) -> str:
    """The command that converts the run holding checkpoint ``path``."""
    return f"cn3 checkpoint upgrade {Path(path).parent}"


def load_checkpoint(path: str | Path) -> dict:
    """A checkpoint (``best.pt``, ``latest.pt``) read with ``torch.load(weights_only=True)``, on the host,
    as the dict the file holds (:meth:`cn3.train.checkpoint.Checkpoint.load` reads it as a checkpoint).

    Only tensors, numbers, strings and plain containers are read, so opening a run someone shared
    runs no code from it. Everything comes back on the CPU: the RNG states must (``set_rng_state``
    takes CPU byte tensors only), and weights and optimizer states go to the model's device when
    loaded into it.

    Raises:
        RunError: on a file that is not a checkpoint; on an older one that pickled NumPy's RNG state,
            naming the command that converts it; on one that carries pickled objects, refused.
    """
    path = Path(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        unsafe = unsafe_globals(path)
    except (RuntimeError, ValueError, EOFError, OSError) as err:
        raise unreadable(path, err) from None
    if unsafe <= LEGACY_GLOBALS.keys():
        raise RunError(f"{path} was written by an earlier cn3, whose checkpoints pickled NumPy's random "
                          f"state; convert the run once with `{upgrade_command(path)}`")
    raise RunError(refusal(path, unsafe))


def unreadable(path: Path, err: Exception) -> RunError:
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return RunError(f"{path} is not a readable checkpoint ({first})")


def unsafe_globals(path: Path) -> set[str]:
    """The globals (classes, functions) that the checkpoint ``path`` pickles beyond what
    ``weights_only=True`` reads, found without unpickling it."""
    try:
        return set(torch.serialization.get_unsafe_globals_in_checkpoint(path))
    except (RuntimeError, ValueError, EOFError, OSError) as err:  # not torch.save's zip format
        raise unreadable(path, err) from None


def refusal(path: Path, unsafe: set[str]) -> str:
    """Why a checkpoint carrying pickled objects (``unsafe``: their globals) is not opened."""
    return (f"refusing to open {path}: it carries pickled Python objects ({', '.join(sorted(unsafe))}), and "
            "loading them could run any code; cn3 checkpoints hold only tensors, numbers and strings. Retrain the "
            f"run, or, only if you trust where it came from, convert it with `{upgrade_command(path)} --trust`")


def upgrade_checkpoint(path: str | Path, trust: bool = False) -> bool:
    """Rewrite the checkpoint ``path`` in the plain forms :func:`load_checkpoint` reads, atomically;
    ``False`` when it is plain already.

    An older checkpoint (NumPy's RNG state pickled) is read without running code from it.
    One carrying other pickled objects is read with ``weights_only=False``, which runs whatever the
    file's pickle calls, only with ``trust``; without it, a RunError.

    Raises:
        RunError: untrusted pickled objects, or an entry with no plain form.
    """
    path = Path(path)
    unsafe = unsafe_globals(path)
    if not unsafe:
        return False
    if unsafe <= LEGACY_GLOBALS.keys():
        allowed = [(obj, name) for name, obj in LEGACY_GLOBALS.items()]
        with torch.serialization.safe_globals(allowed):
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    elif trust:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
    else:
        raise RunError(refusal(path, unsafe))
    if isinstance(ckpt, dict) and isinstance(ckpt.get("rng"), dict):
        ckpt["rng"] = plain_rng_state(ckpt["rng"])
    data = io.BytesIO()
    torch.save(plain_checkpoint(ckpt, str(path)), data)
    atomic_write(path, lambda handle: handle.write(data.getvalue()))
    return True


def plain_checkpoint(value, where: str):
    """``value`` with NumPy arrays as tensors, NumPy scalars as numbers and paths as strings, so that
    ``torch.load(weights_only=True)`` reads it back: every checkpoint passes here before it is
    written, and ``cn3 checkpoint upgrade`` converts old ones with it. A RunError naming ``where``
    (the entry) for anything else that is not plain. Dicts and lists are converted in place, so a
    state dict keeps its type and ``_metadata``."""
    if isinstance(value, dict):
        for k, v in value.items():
            value[k] = plain_checkpoint(v, f"{where}[{k!r}]")
        return value
    if isinstance(value, list):
        value[:] = [plain_checkpoint(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return value
    if isinstance(value, tuple):
        return tuple(plain_checkpoint(v, f"{where}[{i}]") for i, v in enumerate(value))
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, PurePath):
        return str(value)
    if value is None or isinstance(value, (torch.Tensor, bool, int, float, str, bytes)):
        return value
    raise RunError(f"{where} is a {type(value).__module__}.{type(value).__qualname__}, which a checkpoint "
                      "cannot hold (tensors, numbers, strings and containers of them only)")


def check_resume_config(saved: dict, new: dict, resumable: set[tuple[str, str]]) -> None:
    """A resumed run must have the config it was started with, except the ``(section, key)``
    pairs in ``resumable`` (how long to go on, threads, ...); else a ConfigError naming the key."""

    def flat(d: dict, prefix=()) -> dict:
        out = {}
        for k, v in d.items():
            if isinstance(v, dict):
                out.update(flat(v, prefix + (k,)))
            else:
                out[prefix + (k,)] = v
        return out

    old_flat, new_flat = flat(saved), flat(new)
    for key in sorted(set(old_flat) | set(new_flat)):
        if old_flat.get(key) != new_flat.get(key) and key[:2] not in resumable:
            allowed = ", ".join(sorted(".".join(k) for k in resumable))
            raise ConfigError(f"cannot resume: {'.'.join(key)} is {new_flat.get(key)!r} but the run was started "
                              f"with {old_flat.get(key)!r} (only {allowed} may change)")


def read_saved_config(config_class, path: Path) -> dict:
    """A run's ``config.yaml`` read back through the dataclasses, as a dict: a key added to the config
    since the run started takes its default (which keeps the old behaviour) instead of counting as a
    change when the run is resumed or its grid cell checked.

    Raises:
        ConfigError: naming the file, when it does not fit this cn3 (a key a later release removed).
    """
    try:
        return to_dict(from_dict(config_class, yaml.safe_load(Path(path).read_text(encoding="utf-8"))))
    except ConfigError as err:  # the run is another release's
        raise ConfigError(f"{path} does not fit this cn3 ({err}); it was probably written by another release; "
                          "evaluate the run as it is, or start a new one") from None
