"""The ``tune`` block of an experiment spec: one search, the same for every variant, chosen on dev.

WHY: a comparison is fair only when every encoder gets the same tuning budget. ::

    tune:
      seed: 1                  # the seed the options train with (default: the grid's first seed)
      options:                 # name -> overrides, applied after the variant's
        adadelta: {train.optimizer: adadelta, train.lr: 1.0}
        adam: {train.optimizer: adam, train.lr: 0.001}

For each task and variant every option trains once (``<task>/<variant>/tune-<option>``); the one
with the best dev score (``val`` BLEU for translation; ties: the first listed) is the config for
every seed, and its tuning run is that seed's cell. Seed cells wait until every option of their
task and variant has finished. Test scores never enter the choice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cn3.config import ConfigError
from cn3.runs.layout import RunDir
from cn3.runs.records import finished, read_results, split_scores

TUNE_KEYS = {"options", "seed", "description"}
#: the split a tuning choice reads, in order of preference (translation runs have ``val``)
DEV_SPLITS = ("dev", "val")


@dataclass(frozen=True)
class Tuning:
    """A parsed ``tune`` block: option name -> overrides, and the seed they train with (``None``:
    the grid's first seed)."""

    options: dict[str, dict]
    seed: int | None = None
    description: str = ""


@dataclass
class Choice:
    """One task and variant's tuning: each option's dev score (``None`` while unfinished) and the
    chosen option (``None`` until every option has finished)."""

    scores: dict[str, float | None] = field(default_factory=dict)
    option: str | None = None


def parse_tuning(value, where: str) -> Tuning | None:
    """A ``tune`` mapping as :class:`Tuning` (``None`` or an empty mapping: no tuning).

    Raises:
        ConfigError: naming ``where`` and the key, for an unknown key, fewer than two options (nothing
            to choose from), an option name that cannot be a directory name, or a non-integer seed.
    """
    import difflib

    if value is None or value == {}:
        return None
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping with 'options' (and 'seed'), got {value!r}")
    for key in value:
        if key not in TUNE_KEYS:
            close = difflib.get_close_matches(str(key), TUNE_KEYS, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f" (known: {', '.join(sorted(TUNE_KEYS))})"
            raise ConfigError(f"{where}: unknown key '{key}'{hint}")
    options = value.get("options")
    if not isinstance(options, dict) or len(options) < 2:
        raise ConfigError(f"{where}.options: expected a mapping of at least two named options "
                          f"(name -> overrides), got {options!r}")
    parsed = {}
    for name, overrides in options.items():
        name = str(name)
        if not name or "/" in name or name.startswith("."):
            raise ConfigError(f"{where}.options: '{name}' cannot name a run directory (tune-<option>)")
        if overrides is None:
            overrides = {}
        if not isinstance(overrides, dict):
            raise ConfigError(f"{where}.options.{name}: expected a mapping of overrides, got {overrides!r}")
        parsed[name] = overrides
    seed = value.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ConfigError(f"{where}.seed: expected an integer, got {seed!r}")
    return Tuning(parsed, seed, str(value.get("description", "")))


def dev_score(run_dir: Path) -> float | None:
    """A finished run's dev score (``val`` BLEU for translation), ``None`` if it has not finished."""
    if not finished(run_dir):
        return None
    scores = split_scores(read_results(run_dir))
    for split in DEV_SPLITS:
        if split in scores:
            return scores[split]["score"]
    raise ConfigError(f"{RunDir(run_dir).results}: no dev score ({' or '.join(DEV_SPLITS)}) to tune on")


def choose(runs: dict[str, Path]) -> Choice:
    """The best option by dev score once every option's run (option -> run dir, in the spec's order)
    has finished; the first listed wins a tie, so the choice is deterministic."""
    choice = Choice({option: dev_score(run) for option, run in runs.items()})
    if runs and all(score is not None for score in choice.scores.values()):
        choice.option = max(choice.scores, key=choice.scores.get)  # max keeps the first of equal scores
    return choice
