"""An experiment spec: the cells of a comparison table, from one YAML file.

::

    name: liu-table3
    description: Liu et al. (2019), Table 3 ...
    tasks: [trec, sick]            # or a mapping task -> {key: value} overrides for that task only
    variants:                      # name -> overrides (the `--set` keys of `cn3 train`/`cn3 nmt train`)
      lstm: {model.encoder: lstm}
      cn3: {}
    baseline: lstm                 # every other variant is tested against it
    seeds: [1, 2, 3]
    set: {train.num_threads: 1}    # overrides for every cell (optional)
    budgets:                       # optional: --budget NAME applies these on top
      smoke: {set: {data.limit: 100, train.max_steps: 5}, tasks: [trec], seeds: [1, 2]}
      cpu: {set: {train.epochs: 10}, tasks: {trec: {}, sst2: {train.epochs: 3}}, variants: [lstm]}
    references:                    # optional: the paper's numbers, task -> variant -> number (null = none)
      trec: {lstm: 93.2}
    paper: Liu et al. (2019), Table 3   # optional: where the references come from (printed under the table)
    differs:                       # optional: how the grid differs from the paper, one line each (a
      - GloVe 6B 50-d, not 840B 300-d   #   budget's own `differs` lines are added to these)
    tune:                          # optional: the same search for every variant, chosen on dev
      options: {adadelta: {train.optimizer: adadelta, train.lr: 1.0}, adam: {train.optimizer: adam, train.lr: 0.001}}
    folds: {mr: 10}                # optional (a budget's own replaces it): cross-validate these tasks
                                   #   over folds 0..9 (or a list of folds), each seed trained once a fold

A task is a name of `cn3 tasks` (a cell runs `cn3 train --task T`) or ``multi30k`` (`cn3 nmt
train`); both kinds mix in one spec. Cell ``(task, variant, seed)`` trains into
``OUT/<name>[-<budget>]/<task>/<variant>/seed<S>``, so a re-run finds what is done. Overrides apply
in this order: the task's tuned config, ``set``, the task's overrides, the variant's, the budget's
``set``, the budget's overrides for the cell's task.

``tune`` (:mod:`cn3.experiment.tuning`; a budget's own replaces it, ``tune: null`` turns it off):
every option first trains into ``<task>/<variant>/tune-<option>`` (its overrides right after the
variant's); the seed cells take the option with the best dev score.

``folds`` (tasks whose test split is ``data.fold``): each seed cell becomes one cell a fold,
``<task>/<variant>/seed<S>-fold<F>`` with ``data.fold=F`` applied last; the report scores a seed by
the mean over its folds once all have finished, and tests on the folds' items pooled. A fold cell
may be adopted from an earlier grid's (:mod:`cn3.experiment.reuse`).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from cn3.config import ConfigError, load_yaml
from cn3.experiment.tuning import Tuning, choose, parse_tuning
from cn3.kinds import TRANSLATION_TASKS, RunKind, kind_of_task

#: shipped specs, found by name (``cn3 experiment run liu-table3``)
SPEC_DIR = Path(__file__).resolve().parents[1] / "configs" / "experiments"
#: the task name of translation cells (`cn3 nmt train` on Multi30k)
SPEC_KEYS = {"name", "description", "tasks", "variants", "baseline", "seeds", "set", "budgets", "references", "tune",
             "paper", "differs", "folds"}
BUDGET_KEYS = {"set", "tasks", "variants", "seeds", "description", "tune", "differs", "folds"}


def seed_dir(seed: int, fold: int | None = None) -> str:
    """A seed cell's directory name (and the last part of its name): ``seed<S>``, ``seed<S>-fold<F>``."""
    return f"seed{seed}" + ("" if fold is None else f"-fold{fold}")


@dataclass(frozen=True)
class Cell:
    """One training of the grid.

    Attributes:
        task, variant, seed: the coordinates.
        overrides: ``key=value`` strings for ``--set``, in application order.
        run_dir: where it trains.
        tune: a tuning cell's option (it trains that option to be compared on dev).
        option: in a tuned grid, the option chosen for the cell's task and variant.
        waiting: in a tuned grid, the cell's task and variant are not tuned yet, so its config (and
            run directory) are not known: it cannot train, and ``overrides`` lack the option.
        budget: the budget the grid was expanded under (None: none), for the report's notes.
        fold: in a cross-validated task (``folds``), the test fold the cell trains for (``data.fold``).
    """

    task: str
    variant: str
    seed: int
    overrides: tuple[str, ...]
    run_dir: Path
    tune: str | None = None
    option: str | None = None
    waiting: bool = False
    budget: str | None = None
    fold: int | None = None

    @property
    def name(self) -> str:
        return f"{self.task}/{self.variant}/" + (f"tune-{self.tune}" if self.tune else seed_dir(self.seed, self.fold))

    @property
    def kind(self) -> RunKind:
        """Sentence or translation (:func:`cn3.kinds.kind_of_task`)."""
        return kind_of_task(self.task)

    def command(self, threads: int, resume: bool) -> list[str]:
        """The ``cn3`` arguments that train this cell (``--resume`` continues an interrupted one)."""
        head = [*self.kind.command] + ([] if self.kind.translation else ["--task", self.task])
        args = [*head, "--seed", str(self.seed), "--run-dir", str(self.run_dir)]
        for text in (*self.overrides, f"train.num_threads={threads}"):
            args += ["--set", text]
        return args + (["--resume"] if resume else [])


@dataclass
class ExperimentSpec:
    """A parsed spec (see the module docstring); :meth:`cells` expands it."""

    name: str
    path: Path
    tasks: dict[str, dict]
    variants: dict[str, dict]
    baseline: str
    seeds: list[int]
    set: dict = field(default_factory=dict)
    budgets: dict[str, Budget] = field(default_factory=dict)
    references: dict[str, dict] = field(default_factory=dict)
    description: str = ""
    tune: Tuning | None = None
    paper: str = ""
    differs: list[str] = field(default_factory=list)
    folds: dict[str, list[int]] = field(default_factory=dict)

    def directory(self, out: Path, budget: str | None) -> Path:
        """Where the grid's cells (and its report) live."""
        return Path(out) / (f"{self.name}-{budget}" if budget else self.name)

    def differences(self, budget: str | None = None) -> list[str]:
        """How the grid (under ``budget``) differs from the paper: the spec's lines, then the budget's."""
        return [*self.differs, *self.budgets[budget].differs] if budget in self.budgets else list(self.differs)

    def tuning(self, budget: str | None = None) -> Tuning | None:
        """The search the grid runs under ``budget`` (the budget's own ``tune`` if it has one)."""
        if budget in self.budgets and self.budgets[budget].has_tune:
            return self.budgets[budget].tune
        return self.tune

    def task_folds(self, budget: str | None = None) -> dict[str, list[int]]:
        """The cross-validated tasks under ``budget`` and their folds (the budget's own ``folds`` if it has one)."""
        if budget in self.budgets and self.budgets[budget].folds is not None:
            return self.budgets[budget].folds
        return self.folds

    def cells(self, out: Path, budget: str | None = None, only: dict[str, set[str]] | None = None) -> list[Cell]:
        """Every cell, tasks outermost then variants then seeds (the order they run in); in a tuned
        grid each task and variant's tuning cells come before its seed cells.

        ``budget``: a name of ``budgets`` (its ``tasks``/``variants``/``seeds`` narrow the grid, its
        ``set`` and per-task overrides add overrides). ``only``: ``{"task": {...}, "variant": {...}, "seed": {...}}``
        filters (``--only``; ``fold`` keeps only the fold cells of those folds); a selected seed cell
        needs its task and variant's tuning, so ``seed`` does not filter tuning cells.
        """
        extra, tasks, seeds, task_extra, variants = {}, list(self.tasks), list(self.seeds), {}, self.variants
        if budget is not None:
            if budget not in self.budgets:
                raise ConfigError(f"{self.path}: no budget {budget!r} (it has: {', '.join(self.budgets) or 'none'})")
            b = self.budgets[budget]
            extra, seeds = b.set, seeds if b.seeds is None else b.seeds
            task_extra = {task: {} for task in tasks} if b.tasks is None else b.tasks
            tasks = list(task_extra)
            variants = {v: o for v, o in self.variants.items() if b.variants is None or v in b.variants}
        tuning, folds = self.tuning(budget), self.task_folds(budget)
        only = only or {}
        base = self.directory(out, budget)

        def texts(variant_overrides: dict, option: dict, task: str, fold: int | None = None) -> tuple[str, ...]:
            merged = {**self.set, **self.tasks[task], **variant_overrides, **option, **extra,
                      **task_extra.get(task, {})}
            if fold is not None:  # the cell's coordinate: it wins over every override
                merged = {**{k: v for k, v in merged.items() if k != "data.fold"}, "data.fold": fold}
            return tuple(f"{k}={_yaml_value(v)}" for k, v in merged.items())

        cells = []
        for task in tasks:
            for variant, overrides in variants.items():
                if any(k in only and value not in only[k] for k, value in (("task", task), ("variant", variant))):
                    continue
                home = base / task / variant
                chosen, tune_dirs = None, {}
                if tuning is not None:
                    tune_seed = tuning.seed if tuning.seed is not None else int(seeds[0])
                    for name, option in tuning.options.items():
                        tune_dirs[name] = home / f"tune-{name}"
                        cells.append(Cell(task, variant, tune_seed, texts(overrides, option, task), tune_dirs[name],
                                          tune=name, budget=budget))
                    chosen = choose(tune_dirs).option
                for seed in seeds:
                    if "seed" in only and str(seed) not in only["seed"]:
                        continue
                    for fold in folds.get(task, [None]):
                        if "fold" in only and (fold is None or str(fold) not in only["fold"]):
                            continue
                        run_dir = home / seed_dir(int(seed), fold)
                        waiting = tuning is not None and chosen is None  # its option (and config) not known yet
                        option = tuning.options[chosen] if chosen is not None else {}  # (no tuning: none chosen)
                        if chosen is not None and int(seed) == tune_seed and fold is None:
                            run_dir = tune_dirs[chosen]  # the tuning seed's cell is the chosen option's run
                        cells.append(Cell(task, variant, int(seed), texts(overrides, option, task, fold), run_dir,
                                          option=chosen, waiting=waiting, budget=budget, fold=fold))
        return cells


def _yaml_value(value) -> str:
    """A value as ``--set`` parses it back (YAML): lists and mappings in flow style."""
    import yaml

    if isinstance(value, str):
        return value
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def find_spec(name_or_path: str | Path) -> Path:
    """A spec file: a path, or a shipped spec by name (``liu-table3``) or by its path inside the package
    (``configs/experiments/liu-table3.yaml``).

    Raises:
        ConfigError: not found (with the closest shipped name).
    """
    path = Path(name_or_path)
    if path.is_file():
        return path
    for shipped in (SPEC_DIR / f"{name_or_path}.yaml", SPEC_DIR.parents[1] / path):
        if not path.is_absolute() and shipped.is_file():
            return shipped
    known = sorted(p.stem for p in SPEC_DIR.glob("*.yaml"))
    close = difflib.get_close_matches(path.stem if path.suffix else str(name_or_path), known, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise ConfigError(f"experiment spec not found: {name_or_path}{hint} (shipped: {', '.join(known)})")


def _check_keys(data: dict, allowed: set[str], where: str) -> None:
    for key in data:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f" (known: {', '.join(sorted(allowed))})"
            raise ConfigError(f"{where}: unknown key '{key}'{hint}")


def _mapping(value, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping, got {value!r}")
    return value


def _lines(value, where: str) -> list[str]:
    """A list of lines of text (``differs``); None is none."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(line, str) and line.strip() for line in value):
        raise ConfigError(f"{where}: expected a list of lines of text, got {value!r}")
    return [line.strip() for line in value]


def _folds(value, tasks: dict, where: str) -> dict[str, list[int]]:
    """``folds``: task -> its folds, a number n (folds 0..n-1) or a list of distinct folds."""
    from data_prep.tasks import TASKS
    from data_prep.taskspec import TaskOptions

    out, n_folds = {}, TaskOptions().n_folds
    for task, folds in _mapping(value, where).items():
        if task not in tasks:
            raise ConfigError(f"{where}.{task}: not a task of the spec (tasks: {', '.join(tasks)})")
        if isinstance(folds, int) and not isinstance(folds, bool) and folds >= 1:
            folds = list(range(folds))
        if not isinstance(folds, list) or not folds or len(set(folds)) != len(folds) or \
                not all(isinstance(f, int) and not isinstance(f, bool) and f >= 0 for f in folds):
            raise ConfigError(f"{where}.{task}: expected a number of folds or a list of distinct folds (0 or more), "
                              f"got {folds!r}")
        if kind_of_task(task).translation or not TASKS[task].cv:
            raise ConfigError(f"{where}.{task}: the task has an official test split, not folds")
        if max(folds) >= n_folds:
            raise ConfigError(f"{where}.{task}: the task has folds 0-{n_folds - 1}, got {max(folds)}")
        out[str(task)] = folds
    return out


def _tasks(value, where: str) -> dict[str, dict]:
    """``tasks``: a list of names, or a mapping task -> its overrides."""
    if isinstance(value, list):
        value = {t: {} for t in value}
    return {str(t): _mapping(o, f"{where}.{t}") for t, o in _mapping(value, where).items()}


def _known_task(task: str, where: str) -> None:
    from data_prep.tasks import TASKS

    if task not in TASKS and task not in TRANSLATION_TASKS:
        close = difflib.get_close_matches(task, [*TASKS, *TRANSLATION_TASKS], n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ConfigError(f"{where}: unknown task '{task}'{hint} "
                          f"(`cn3 tasks`, or {' or '.join(TRANSLATION_TASKS)} for translation)")


@dataclass
class Budget:
    """One entry of ``budgets`` (``--budget NAME``): what it narrows and what it adds.

    ``tasks``/``variants``/``seeds``/``folds`` None: the spec's; ``has_tune``: the budget sets ``tune``
    (``tune: null`` turns the spec's search off, so None alone cannot say it).
    """

    set: dict = field(default_factory=dict)
    tasks: dict[str, dict] | None = None
    variants: list[str] | None = None
    seeds: list[int] | None = None
    description: str = ""
    has_tune: bool = False
    tune: Tuning | None = None
    differs: list[str] = field(default_factory=list)
    folds: dict[str, list[int]] | None = None

    @classmethod
    def from_dict(cls, data, where: str, tasks: dict, variants: dict, baseline: str) -> Budget:
        """Read and check one budget against the spec's ``tasks``, ``variants`` and ``baseline``.

        Raises:
            ConfigError: an unknown key, or a task or variant the spec lacks, naming ``where`` and the key.
        """
        data = _mapping(data, where)
        _check_keys(data, BUDGET_KEYS, where)
        budget = cls(set=_mapping(data.get("set"), f"{where}.set"), seeds=data.get("seeds"),
                     description=data.get("description", ""))
        if "tasks" in data:
            budget.tasks = _tasks(data["tasks"], f"{where}.tasks")
            for task in budget.tasks:
                if task not in tasks:
                    raise ConfigError(f"{where}.tasks: '{task}' is not a task of the spec")
        if "variants" in data:
            budget.variants = data["variants"]
            if not isinstance(budget.variants, list):
                raise ConfigError(f"{where}.variants must be a list of variants, got {budget.variants!r}")
            for variant in budget.variants:
                if variant not in variants:
                    raise ConfigError(f"{where}.variants: '{variant}' is not a variant of the spec")
            if baseline not in budget.variants:
                raise ConfigError(f"{where}.variants leaves out the baseline '{baseline}', "
                                  "which every other variant is tested against")
        return budget

    def read_later_keys(self, data: dict, where: str, tasks: dict) -> None:
        """``tune`` and ``folds`` (read once every budget's tasks and variants are checked)."""
        if "tune" in data:
            self.has_tune, self.tune = True, parse_tuning(data["tune"], f"{where}.tune")
        if "folds" in data:
            self.folds = _folds(data["folds"], tasks, f"{where}.folds")


def _references(value, where: str, tasks: dict, variants: dict) -> dict[str, dict]:
    """``references``: task -> variant -> the paper's number or null."""
    references = _mapping(value, where)
    for task, row in references.items():
        if task not in tasks:
            raise ConfigError(f"{where}.{task}: not a task of the spec (tasks: {', '.join(tasks)})")
        for variant, number in _mapping(row, f"{where}.{task}").items():
            if variant not in variants:
                raise ConfigError(f"{where}.{task}.{variant}: not a variant")
            if number is not None and (isinstance(number, bool) or not isinstance(number, (int, float))):
                raise ConfigError(f"{where}.{task}.{variant}: expected a number or null, got {number!r}")
    return references


def spec_from_dict(data: dict, path: Path) -> ExperimentSpec:
    """An :class:`ExperimentSpec` from a spec file's mapping; every error names ``path`` and the key."""
    _check_keys(data, SPEC_KEYS, str(path))
    for key in ("name", "tasks", "variants", "baseline", "seeds"):
        if key not in data:
            raise ConfigError(f"{path}: missing '{key}'")
    tasks = _tasks(data["tasks"], f"{path}: tasks")
    for task in tasks:
        _known_task(task, str(path))
    variants = {str(v): _mapping(o, f"{path}: variants.{v}")
                for v, o in _mapping(data["variants"], f"{path}: variants").items()}
    if not variants:
        raise ConfigError(f"{path}: no variants")
    if data["baseline"] not in variants:
        raise ConfigError(f"{path}: baseline '{data['baseline']}' is not a variant (variants: {', '.join(variants)})")
    seeds = data["seeds"]
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds):
        raise ConfigError(f"{path}: seeds must be a list of integers, got {seeds!r}")
    raw_budgets = {str(b): v for b, v in _mapping(data.get("budgets"), f"{path}: budgets").items()}
    budgets = {name: Budget.from_dict(raw, f"{path}: budgets.{name}", tasks, variants, data["baseline"])
               for name, raw in raw_budgets.items()}
    for name, budget in budgets.items():
        budget.read_later_keys(raw_budgets[name], f"{path}: budgets.{name}", tasks)
    references = _references(data.get("references"), f"{path}: references", tasks, variants)
    for name, budget in budgets.items():
        budget.differs = _lines(raw_budgets[name].get("differs"), f"{path}: budgets.{name}.differs")
    paper = data.get("paper") or ""
    if not isinstance(paper, str):
        raise ConfigError(f"{path}: paper: expected a line of text, got {paper!r}")
    return ExperimentSpec(name=str(data["name"]), path=path, tasks=tasks, variants=variants,
                          baseline=str(data["baseline"]), seeds=list(seeds),
                          set=_mapping(data.get("set"), f"{path}: set"),
                          budgets=budgets, references=references, description=str(data.get("description", "")),
                          tune=parse_tuning(data.get("tune"), f"{path}: tune"), paper=paper,
                          differs=_lines(data.get("differs"), f"{path}: differs"),
                          folds=_folds(data.get("folds"), tasks, f"{path}: folds"))


def load_spec(name_or_path: str | Path) -> ExperimentSpec:
    """Read and check a spec (:func:`spec_from_dict`); every error names the file and the key (the cells'
    configs: :func:`cn3.experiment.runner.check_cells`)."""
    path = find_spec(name_or_path)
    return spec_from_dict(load_yaml(path), path)


def check_variant_options(spec: ExperimentSpec) -> None:
    """Refuse a variant whose own family options its encoder does not read (``cn3 encoders``): its
    cells would train as without them, an ablation in name only.

    Only a variant's own keys count (the spec's and a budget's ``set`` may set family options for
    every variant). Called by `cn3 experiment run` before anything trains, not by :func:`load_spec`,
    which reports and status call without importing the encoders.

    Raises:
        ConfigError: naming the variant and the keys.
    """
    from dataclasses import replace

    from cn3.encoders import ignored_overrides

    for task, task_set in spec.tasks.items():
        kind, default = kind_of_task(task), None
        for variant, own in spec.variants.items():
            encoder = {**spec.set, **task_set, **own}.get("model.encoder")
            try:
                if encoder is None:  # the task's config decides (resolved once: a spec has many variants)
                    default = default or kind.resolve(task, {}, []).model.encoder
                model = replace(kind.config_class()().model, encoder=encoder or default)
                ignored = ignored_overrides(model, [f"{key}={_yaml_value(value)}" for key, value in own.items()])
            except ConfigError:
                continue  # a bad config or encoder name: check_cells names it with its cell
            if ignored:
                raise ConfigError(f"{spec.path}: variants.{variant} sets {', '.join(ignored)}, which its encoder "
                                  f"({model.encoder}) does not read, so its cells would train as without it "
                                  "(`cn3 encoders` lists the family options each encoder reads)")


def resolve_cell(cell: Cell, threads: int):
    """The config ``cell`` trains with (as its ``cn3 train``/``cn3 nmt train`` would build it), as a dict.

    Raises:
        ConfigError: naming the cell, for a bad key or value, or an encoder that cannot serve the task.
    """
    from cn3.config import to_dict

    overrides = [*cell.overrides, f"train.num_threads={threads}"]
    try:
        cfg = cell.kind.resolve(cell.task, {"train.seed": cell.seed}, overrides)
    except ConfigError as err:
        raise ConfigError(f"cell {cell.name}: {err}") from None
    return to_dict(cfg)


def read_cell_config(cell: Cell, path: Path) -> dict:
    """A run's saved ``config.yaml`` read back as the kind of config ``cell`` trains with (the NMT
    config for translation cells), as :func:`resolve_cell` gives it, so the two compare key for key.

    Raises:
        ConfigError: the file does not fit that kind of config in this cn3.
    """
    from cn3.train.checkpoints import read_saved_config

    return read_saved_config(cell.kind.config_class(), path)
