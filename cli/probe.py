"""``cn3 probe``: what a trained run's frozen sentence vectors encode (Conneau et al.'s probing tasks)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from cli.errors import user_errors
from cli.train import Device
from cn3.config import ConfigError
from cn3.util.console import console


class Classifier(str, Enum):
    logistic = "logistic"
    mlp = "mlp"


def probe_command(
    run: Path = typer.Argument(..., help="A run directory of `cn3 train` (sentence vectors) or `cn3 nmt train` "
                               "(the source encoder)."),
    tasks: str = typer.Option("all", "--tasks", "-t", help="Comma-separated probing tasks (probe_tense,sentlen: "
                              "the probe_ prefix may be left out) or all."),
    layer: int = typer.Option(None, "--layer", "-l", help="Probe this layer (1-based) of the encoder's "
                              "self-attention stack instead of the final output."),
    split_features: bool = typer.Option(True, "--split-features/--no-split-features", help="onlstm_san/lstm_san: "
                                        "also probe the recurrent and the self-attention stacks' outputs apart "
                                        "(H_onlstm, H_san; Hao et al. Table 3)."),
    classifier: Classifier = typer.Option(Classifier.logistic, "--classifier", help="logistic: L2 logistic "
                                          "regression, C chosen on dev from 2^-2..2^4; mlp: one hidden layer of 50, "
                                          "L2 alpha chosen on dev from 1..1e-4."),
    out: Path = typer.Option(None, "--out", "-o", file_okay=False, help="Write DIR/probe.json (default: RUN/probe)."),
    limit: int = typer.Option(None, "--limit", "-n", min=2, help="At most this many items per split, evenly "
                              "spread (quick looks; the numbers are then not comparable)."),
    seed: int = typer.Option(1, "--seed", help="Seed of the classifiers."),
    batch_size: int = typer.Option(128, "--batch-size", min=1),
    data: Path = typer.Option(None, "--data", help="Data root holding the probing tasks' treebanks "
                              "(default: $CN3_DATA, else ../shared/data)."),
    embeddings: Path = typer.Option(None, "--embeddings", exists=True, dir_okay=False, help="Sentence runs: the "
                                    "vectors file the run was trained with, when it has moved (checked by sha256)."),
    no_vectors: bool = typer.Option(False, "--no-vectors", help="Sentence runs: read words outside the run's "
                                    "vocabulary as <unk> instead of looking up their pretrained vectors."),
    device: Device = typer.Option(Device.auto, "--device"),
) -> None:
    """Probe a run's frozen encoder: test accuracy of a classifier on its sentence vectors, per task and group.

    Each probing sentence (Conneau et al. 2018, rebuilt from UD EWT and the PTB sample: `cn3 tasks
    probe_sentlen`) is encoded by the run, never trained further: a sentence run gives the vector its
    head sees, a translation run the mean of its final encoder states over the subwords of the
    detokenized sentence; onlstm_san/lstm_san also H_onlstm and H_san apart. A classifier on
    standardized features is fit on train for each regularization strength, the best on dev is
    scored on test. Groups: surface (SentLen, WC), syntactic (BShift, TreeDepth, TopConst),
    semantic (Tense, SubjNum, ObjNum, SOMO, CoordInv). The majority-class baseline is train's most
    frequent label on test.

    Examples:

        cn3 probe runs/trec-cn3-seed1

        cn3 probe runs/nmt-onlstm_san --tasks sentlen,treedepth,topconst --out probes/onlstm_san
    """
    from cn3.probe.probing import open_run, parse_tasks, run_probe
    from cn3.train.runtime import resolve_device
    from cn3.util.atomic import atomic_write_json
    from cn3.util.console import progress
    from data_prep.paths import data_root

    with user_errors():
        names = parse_tasks(tasks)
        root = data_root(data)
        dev = resolve_device(device.value)
        features = open_run(run, dev, layer, split_features, batch_size, embeddings, not no_vectors)
        with progress() as bar:
            result = run_probe(features, str(run), names, root, classifier.value, seed, limit, bar)
    record = result.record()
    console.print(f"[bold]probing[/] {run} ({features.encoder}, trained on {features.task}; "
                  f"{classifier.value} classifier)", soft_wrap=True, markup=True, highlight=False)
    for name, what in features.feature_sets.items():
        console.print(f"  {name}: {what}", soft_wrap=True, markup=False)
    for note in features.notes:
        console.print(f"note: {note}", soft_wrap=True, markup=False)
    annotation = next((t["annotation"] for t in record["tasks"] if "annotation" in t), None)
    if annotation:
        console.print(f"annotation of the probing sentences: {annotation}", soft_wrap=True, markup=False)
    console.print(probe_table(record))
    directory = out if out is not None else run / "probe"
    with user_errors():
        try:
            directory.mkdir(parents=True, exist_ok=True)
            atomic_write_json(directory / "probe.json", record, inline_lists=True)  # per-item lists: a line each
        except OSError as err:  # an unwritable --out: one line, not a traceback (the table is printed above)
            raise ConfigError(f"cannot write {directory / 'probe.json'}: {err.strerror or err}") from None
    console.print(f"wrote {directory / 'probe.json'}", markup=False)


def probe_table(record: dict):
    """Tasks (rows: sizes, majority baseline, chosen regularization, test accuracy per feature set),
    then the group means."""
    from rich.table import Table

    sets = list(record["feature_sets"])
    param = "C" if record["classifier"] == "logistic" else "alpha"
    table = Table(title=f"probing: test accuracy ({record['classifier']}, {param} chosen on dev)")
    for col in ("task", "group", "train/dev/test", "majority"):
        table.add_column(col, justify="left" if col in ("task", "group") else "right")
    for name in sets:
        table.add_column(f"{name} ({param})", justify="right")
    for t in record["tasks"]:
        n = t["n"]
        cells = [f"{f['test_accuracy']:.1%} ({f['chosen']:g})" + ("" if f["converged"] else " *")
                 for f in (t["features"][name] for name in sets)]
        table.add_row(t["task"].removeprefix("probe_"), t["group"], f"{n['train']:,}/{n['dev']:,}/{n['test']:,}",
                      f"{t['majority']['accuracy']:.1%}", *cells)
    groups = record["groups"]
    if groups:
        table.add_section()
        for group, g in groups.items():
            table.add_row(f"mean of {len(g['tasks'])}", group, "", f"{g['majority']:.1%}",
                          *(f"{g['test_accuracy'][name]:.1%}" for name in sets))
    if any(not f["converged"] for t in record["tasks"] for f in t["features"].values()):
        table.caption = "* the classifier stopped before converging for some regularization value"
    return table


def compare_probes_command(
    probes_a: list[Path] = typer.Argument(..., help="A: one or more `cn3 probe` outputs (a directory holding "
                                          "probe.json, or the file), one per run, in seed order."),
    against: list[Path] = typer.Option(..., "--against", "-b", help="B: as many probe outputs, paired in order "
                                       "with A's (repeat: -b P1 -b P2)."),
    features: str = typer.Option(None, "--features", help="A's feature set (default: its first, `sentence` or "
                                 "`encoder`); e.g. H_onlstm."),
    against_features: str = typer.Option(None, "--against-features", help="B's feature set (default: its "
                                         "first); e.g. H_san with the same probes on both sides."),
    resamples: int = typer.Option(10_000, "--resamples", min=1, help="Randomization trials, and bootstrap "
                                  "resamples for the 95% interval."),
    out: Path = typer.Option(None, "--out", "-o", dir_okay=False, help="Also write every figure to this JSON file."),
) -> None:
    """Does encoder A keep a property better than encoder B? Paired tests between probes, per task.

    For each probing task both sides scored: each side's test accuracy (mean ± std over its runs);
    A - B on the items of the matched runs pooled, with a 95% paired bootstrap interval and a paired
    approximate randomization p-value (A's i-th probe paired with B's i-th, as `cn3 experiment report`
    pools seeds); Welch's t-test across runs when each side has 2 or more; both Holm-adjusted over the
    tasks. Probes written before `cn3 probe` kept per-item predictions count for the means and Welch
    only.

    Examples:

        cn3 compare-probes p/local-seed1 p/local-seed2 -b p/transformer-seed1 -b p/transformer-seed2

        cn3 compare-probes p/onlstm_san-seed1 --features H_onlstm -b p/onlstm_san-seed1 --against-features H_san
    """
    from cn3.probe.compare import compare_probes, probe_side
    from cn3.util.atomic import atomic_write_json

    with user_errors():
        a, b = probe_side(probes_a, features), probe_side(against, against_features)
        result = compare_probes(a, b, resamples=resamples)
    console.print(compare_table(result))
    if not any("paired" in r for r in result["tasks"]):
        console.print("note: no pair of probes kept per-item predictions (probes written before this was "
                      "recorded): means and Welch's test only; re-run `cn3 probe` for the paired test.",
                      soft_wrap=True, markup=False)
    if out is not None:
        with user_errors():
            try:
                atomic_write_json(out, result)
            except OSError as err:
                raise ConfigError(f"cannot write {out}: {err.strerror or err}") from None
        console.print(f"wrote {out}", markup=False)


def compare_table(result: dict):
    """One row per task: both sides' accuracy, the paired difference with its interval and p-values."""
    from rich.table import Table

    from cn3.stats import format_p

    def spread(mean: float, std: float | None) -> str:
        return f"{mean:.1f}" if std is None else f"{mean:.1f} ± {std:.1f}"

    def p(value: float | None) -> str:
        return "–" if value is None else format_p(value)

    a, b = result["a"], result["b"]
    table = Table(title=f"probing: A = {a['features']} of {len(a['probes'])} probe(s), "
                        f"B = {b['features']} of {len(b['probes'])}; test accuracy (%)",
                  caption=f"paired: approximate randomization on the pooled items of matched probes; "
                          f"{result['correction']}")
    for col in ("task", "group", "A", "B", "A - B (95% CI)", "pairs", "p", "p Holm", "Welch p", "Welch Holm"):
        table.add_column(col, justify="left" if col in ("task", "group") else "right", no_wrap=col != "group")
    for r in result["tasks"]:
        test = r.get("paired")
        diff = "–" if test is None else (f"{test['difference'] + 0.0:+.1f} "
                                         f"({test['ci95'][0] + 0.0:+.1f}, {test['ci95'][1] + 0.0:+.1f})")
        table.add_row(r["task"].removeprefix("probe_"), r["group"], spread(r["mean_a"], r["std_a"]),
                      spread(r["mean_b"], r["std_b"]), diff, "–" if test is None else str(len(test["pairs"])),
                      p(test and test["p"]), p(test and test["p_holm"]), p(r.get("welch_p")),
                      p(r.get("welch_p_holm")))
    return table
