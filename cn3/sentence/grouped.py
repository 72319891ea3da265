"""Scores per group of items (``cn3 evaluate --by FIELD``): where in the data a model is right or wrong.

E.g. does a model trained on logic formulas with at most 6 operators still infer the relation of
formulas with 7-12 (Bowman et al., 2015; Shen et al., ICLR 2019)? Items are grouped by a field of
their record (:meth:`data_prep.store.GraphDataset.record`, or :func:`example_record`):

* a key of the item's ``meta`` (``n_ops`` for logic, ``fold`` ...); items without it form ``(none)``;
* ``length``: tokens of the first sentence, in bins of :data:`LENGTH_BIN` (``1-10``, ``11-20``, ...);
* ``source``: the file the item was read from.

Each group is scored with the task's metric (:func:`cn3.metrics.score`); given the training values,
groups that no training item has are marked "unseen in training".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cn3.config import ConfigError
from cn3.metrics import score
from cn3.util.atomic import atomic_write
from data_prep.example import Example

BUILTIN_FIELDS = ("length", "source")
LENGTH_BIN = 10  # tokens per length group
MISSING = "(none)"  # the group of items whose meta lacks the field
UNSEEN = "unseen in training"
PLOT_FORMATS = (".png", ".svg", ".pdf")  # what matplotlib writes without extra packages


@dataclass
class Group:
    """One group: its key (``value``), its printed name (``label``), how many items it has, their
    score, and whether no training item has the value (``None``: the training values are unknown)."""

    value: object
    label: str
    items: int
    score: float
    unseen: bool | None = None

    def as_dict(self) -> dict:
        out = {"group": self.label, "items": self.items, "score": round(self.score, 2)}
        if self.unseen is not None:
            out["unseen_in_training"] = self.unseen
        return out


def example_record(example: Example) -> dict:
    """The record of an example read from a file, shaped as a prepared split's sidecar record
    (:func:`data_prep.store.write_sidecar`), so that both group alike."""
    return {"tokens": [s.tokens for s in example.sentences], "label": example.label,
            "source": example.source, "line": example.line, "meta": example.meta}


def available_fields(records: list[dict]) -> list[str]:
    """The fields items can be grouped by: every meta key some item has (sorted), then the built-in ones."""
    return sorted({key for r in records for key in r.get("meta", {})}) + list(BUILTIN_FIELDS)


def _hashable(value):
    """A meta value usable as a group key: lists and dicts (JSON) become their JSON text."""
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value


def group_keys(records: list[dict], field: str) -> list:
    """The group key of every record for ``field`` (see the module docstring): the meta value, the
    first token of the length bin (an int, so that groups sort by length), or the source file.

    A field that no record has is a ``ConfigError`` naming the fields they have.
    """
    if field == "length":
        return [(len(r["tokens"][0]) - 1) // LENGTH_BIN * LENGTH_BIN + 1 for r in records]
    if field == "source":
        return [r.get("source") for r in records]
    if not any(field in r.get("meta", {}) for r in records):
        raise ConfigError(f"--by {field}: no item has this field; the items have: "
                          f"{', '.join(available_fields(records))}")
    return [_hashable(r.get("meta", {}).get(field, MISSING)) for r in records]


def seen_keys(train_records: list[dict], field: str) -> set:
    """The group keys of ``field`` that training items have (empty when none has the field): what
    :func:`grouped_scores` marks the other groups against."""
    if field not in BUILTIN_FIELDS and not any(field in r.get("meta", {}) for r in train_records):
        return set()
    return set(group_keys(train_records, field))


def group_label(value, field: str) -> str:
    """How a group key is printed: ``1-10`` for a length bin, else the value itself."""
    if field == "length":
        return f"{value}-{value + LENGTH_BIN - 1}"
    return str(value)


def group_order(value) -> tuple:
    """The sort key of a group key: numbers first, in numeric order (``2`` before ``10``), then the
    rest as text, ``(none)`` last."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value, "")
    return (2 if value == MISSING else 1, 0, str(value))


def grouped_scores(keys: list, gold: list, pred: list, level: str, tag_scheme: str | None, field: str,
                   seen: set | None = None) -> list[Group]:
    """Score every group of items with the task's metric, groups sorted by key.

    ``keys`` (:func:`group_keys`), ``gold`` and ``pred`` are per item, in one order (``gold`` and
    ``pred`` as :func:`cn3.sentence.inference.gold_and_predictions` returns them). ``seen``: the keys of the
    training items, to mark the groups outside them; ``None`` marks nothing.
    """
    members: dict = {}
    for i, key in enumerate(keys):
        members.setdefault(key, []).append(i)
    groups = []
    for key in sorted(members, key=group_order):
        idx = members[key]
        result = score(level, tag_scheme, [gold[i] for i in idx], [pred[i] for i in idx])
        groups.append(Group(key, group_label(key, field), len(idx), result["score"],
                            None if seen is None else key not in seen))
    return groups


def plot_groups(groups: list[Group], out: str | Path, field: str, metric: str, title: str) -> Path:
    """Draw every group's score (in table order), unseen groups with their own marker and colour, and
    write the figure to ``out`` (format from the extension) atomically. Returns ``out``.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out = Path(out)
    if out.suffix.lower() not in PLOT_FORMATS:
        raise ConfigError(f"--plot {out}: unsupported extension {out.suffix or '(none)'!r}; "
                          f"use one of {', '.join(PLOT_FORMATS)}")
    # a Figure on its own Agg canvas: no pyplot, so no global backend or figure state to disturb
    fig = Figure(figsize=(max(5.0, 0.45 * len(groups) + 2.0), 4.0), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    x = list(range(len(groups)))
    ax.plot(x, [g.score for g in groups], "-", color="0.75", zorder=1)
    for unseen, marker, colour, text in ((False, "o", "C0", "seen in training"), (True, "^", "C3", UNSEEN),
                                         (None, "o", "C0", None)):
        points = [(i, g.score) for i, g in zip(x, groups) if g.unseen is unseen]
        if points:
            ax.scatter(*zip(*points), marker=marker, color=colour, zorder=2, label=text)
    ax.set_xticks(x, [g.label for g in groups], rotation=45 if sum(len(g.label) for g in groups) > 60 else 0)
    ax.set_xlabel(field)
    ax.set_ylabel(metric)
    ax.set_title(title, fontsize="medium")
    ax.grid(alpha=0.3)
    if any(g.unseen is not None for g in groups):
        ax.legend(fontsize="small")
    atomic_write(out, lambda handle: fig.savefig(handle, format=out.suffix[1:].lower(), dpi=120))
    return out
