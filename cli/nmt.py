"""``cn3 nmt ...``: Transformer NMT with hybrid local/global attention and ON-LSTM encoders."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path

import typer

from cli.errors import user_errors
from cli.train import Device, warn_ignored_options
from cn3.util.console import console
from cn3.util.encoder_names import encoders_serving

nmt_app = typer.Typer(
    name="nmt",
    help="Neural machine translation: Transformer encoders with hybrid local/global attention (Xu et al., 2019) "
         "or ON-LSTM layers (Hao et al., 2019).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


#: every encoder of the zoo that serves translation (`cn3 encoders`), in registry order, read from the
#: encoders' source so that the help renders without importing torch (:mod:`cn3.util.encoder_names`)
TRANSLATION_ENCODERS = encoders_serving("translation")
Encoder = Enum("Encoder", {name: name for name in TRANSLATION_ENCODERS}, type=str)


@nmt_app.command("train")
def train_command(
    encoder: Encoder = typer.Option(None, "--encoder", "-e", help="Source encoder, any of `cn3 encoders` "
                                    "that serves translation (default: the config's, transformer)."),
    config: Path = typer.Option(None, "--config", "-c", exists=True, dir_okay=False,
                                help="YAML run config (default: cn3/configs/nmt/small.yaml, shipped with cn3)."),
    overrides: list[str] = typer.Option(None, "--set", "-s", help="Override a config value, e.g. "
                                        "--set model.hybrid.window=2 --set train.max_steps=500 (repeatable)."),
    run_dir: Path = typer.Option(None, "--run-dir", "-r", help="Run directory (default: "
                                 "runs/nmt-<corpus>-<encoder>-seed<S>)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --run-dir from latest.pt (with the "
                                "run's saved config; --set may change e.g. train.epochs or train.max_steps)."),
    device: Device = typer.Option(Device.auto, "--device", help="auto = CUDA when available, else CPU."),
    data: Path = typer.Option(None, "--data", help="Data root holding multi30k/ (default: $CN3_DATA or "
                              "../shared/data)."),
    src: Path = typer.Option(None, "--src", help="Your own training source file (one sentence per line; "
                             "with --tgt)."),
    tgt: Path = typer.Option(None, "--tgt", help="Its line-aligned translations (with --src)."),
    seed: int = typer.Option(None, "--seed", help="Random seed (train.seed)."),
) -> None:
    """Train a translation model; the run directory keeps config, subword model, log, metrics, checkpoints.

    Examples:

        cn3 nmt train --encoder hybrid                                 # Multi30k en->de, small config

        cn3 nmt train --encoder cn3                                    # CN3 as the source encoder

        cn3 nmt train --encoder onlstm_san --config cn3/configs/nmt/base.yaml  # the papers' Transformer-base

        cn3 nmt train --encoder local --set model.hybrid.window=2      # local-only ablation, m = 2

        cn3 nmt train --src train.en --tgt train.de --set data.valid_size=1000

        cn3 nmt train --encoder hybrid --run-dir runs/h --resume       # after Ctrl-C

        torchrun --standalone --nproc_per_node 4 -m cli nmt train --encoder hybrid   # 4 processes (README: Scaling up)
    """
    from cn3.kinds import TRANSLATION, train

    with user_errors():
        if (src is None) != (tgt is None):
            raise typer.BadParameter("give --src and --tgt together")
        flags = {"model.encoder": encoder.value if encoder else None, "data.data": data, "train.seed": seed}
        if src is not None:
            flags.update({"data.corpus": "files", "data.train_src": src, "data.train_tgt": tgt})
        cfg, run_dir = TRANSLATION.resolve_run(None, flags, overrides or [], run_dir, resume, config)
        warn_ignored_options(cfg.model, overrides or [])
        try:
            train(cfg, run_dir, resume=resume, device_name=device.value)
        except KeyboardInterrupt:
            raise typer.Exit(130) from None


def _read_inputs(texts: list[str] | None, file: Path | None) -> tuple[list[str], str]:
    from data_prep.textio import read_lines

    if file is not None:
        return [line for _, line in read_lines(file)], str(file)
    if texts:
        return list(texts), "arguments"
    if sys.stdin is None or sys.stdin.isatty():
        raise typer.BadParameter("give sentences as arguments, --file FILE, or pipe lines on stdin")
    return sys.stdin.read().splitlines(), "stdin"


@nmt_app.command("translate")
def translate_command(
    run: Path = typer.Argument(..., help="A run directory from `cn3 nmt train`."),
    texts: list[str] = typer.Argument(None, help="Sentences to translate (else --file, else stdin)."),
    file: Path = typer.Option(None, "--file", "-f", exists=True, dir_okay=False, help="One sentence per line."),
    beam: int = typer.Option(5, "--beam", "-b", min=1, help="Beam size (1 = greedy)."),
    alpha: float = typer.Option(0.6, "--alpha", help="Length penalty exponent ((5+|y|)/6)^alpha."),
    batch_size: int = typer.Option(128, "--batch-size", min=1, help="Sentences per batch (divided by the beam)."),
    device: Device = typer.Option(Device.auto, "--device"),
) -> None:
    """Translate sentences: one output line per input line, in order, on stdout.

    Examples:

        echo "A dog runs on the beach." | cn3 nmt translate runs/nmt-multi30k-hybrid-seed1

        cn3 nmt translate RUN --file sentences.en --beam 5 > sentences.de
    """
    from cn3.nmt.inference import load_run, sentence_progress
    from cn3.nmt.search import translate_lines
    from cn3.train.runtime import resolve_device

    with user_errors():
        dev = resolve_device(device.value)
        loaded = load_run(run, dev)
        lines, _ = _read_inputs(texts, file)
        with sentence_progress("translating", len(lines)) as on_batch:
            out = translate_lines(loaded.model, loaded.tokenizer, lines, beam, alpha, batch_size, dev, on_batch)
    sys.stdout.write("".join(line + "\n" for line in out))


@nmt_app.command("evaluate")
def evaluate_command(
    run: Path = typer.Argument(..., help="A run directory from `cn3 nmt train`."),
    split: str = typer.Option("test2016", "--split", help="Multi30k: train, val, test2016, test2017, mscoco2017; "
                              "own data: val, test."),
    src: Path = typer.Option(None, "--src", help="Score this source file instead (with --tgt)."),
    tgt: Path = typer.Option(None, "--tgt", help="The references of --src."),
    beam: int = typer.Option(5, "--beam", "-b", min=1, help="Beam size (1 = greedy)."),
    alpha: float = typer.Option(0.6, "--alpha", help="Length penalty exponent."),
    batch_size: int = typer.Option(128, "--batch-size", min=1),
    output: Path = typer.Option(None, "--output", "-o", help="Also write the translations here."),
    data: Path = typer.Option(None, "--data", help="Data root (default: the run's, $CN3_DATA or ../shared/data)."),
    device: Device = typer.Option(Device.auto, "--device"),
) -> None:
    """Translate a split (or --src/--tgt files) and score it with sacreBLEU (detokenized, 13a).

    Prints the BLEU line and the sacreBLEU signature; one JSON record goes to stdout.
    """
    from cn3.nmt.data import canonical_split, load_split, read_parallel
    from cn3.nmt.inference import load_run, score_pairs
    from cn3.train.runtime import resolve_device
    from cn3.util.atomic import atomic_write_text

    with user_errors():
        if (src is None) != (tgt is None):
            raise typer.BadParameter("give --src and --tgt together")
        dev = resolve_device(device.value)
        loaded = load_run(run, dev)
        cfg = loaded.config
        if src is not None:
            pairs, what = read_parallel(src, tgt), f"{src} -> {tgt}"
        else:
            name = canonical_split(split, cfg.data.corpus)
            pairs, what = load_split(cfg.data, name, cfg.train.seed, data_root=data), name
        bleu, signature, hyps = score_pairs(loaded.model, loaded.tokenizer, pairs, beam, alpha, batch_size, dev,
                                            label=f"{what} BLEU")
        if output is not None:
            atomic_write_text(output, "".join(h + "\n" for h in hyps))
    console.print(f"{what}: BLEU [bold]{bleu:.2f}[/] ({len(pairs):,} sentences, beam {beam})")
    console.print(f"sacreBLEU signature: {signature}")
    print(json.dumps({"run": str(run), "data": what, "bleu": round(bleu, 2), "beam": beam, "alpha": alpha,
                      "sentences": len(pairs), "signature": signature}))


@nmt_app.command("gates")
def gates_command(
    run: Path = typer.Argument(..., help="A run of `cn3 nmt train --encoder hybrid`."),
    split: str = typer.Option("val", "--split", help="Split whose source sentences are analysed."),
    file: Path = typer.Option(None, "--file", "-f", exists=True, dir_okay=False,
                              help="Analyse these source sentences instead (one per line)."),
    limit: int = typer.Option(0, "--limit", min=0, help="Only the first N sentences (0 = all)."),
    pos: bool = typer.Option(True, "--pos/--no-pos", help="Tag source words with spaCy and average per UPOS."),
    out: Path = typer.Option(None, "--out", help="Directory for gates.json and gates.png (default: the run)."),
    data: Path = typer.Option(None, "--data", help="Data root (default: the run's, $CN3_DATA or ../shared/data)."),
    device: Device = typer.Option(Device.auto, "--device"),
) -> None:
    """Average local weight g of the hybrid layers per encoder layer and per source-word UPOS tag.

    Xu et al. (2019), Fig. 3 and 4. Writes gates.json and a bar chart gates.png.
    """
    from rich.table import Table

    from cn3.config import ConfigError
    from cn3.nmt.analysis import collect_gates, has_gates, plot_gates, tag_words
    from cn3.nmt.data import canonical_split, load_split
    from cn3.nmt.inference import load_run
    from cn3.train.runtime import resolve_device
    from cn3.util.atomic import atomic_write, atomic_write_json

    with user_errors():
        dev = resolve_device(device.value)
        loaded = load_run(run, dev)
        m = loaded.config.model
        if not has_gates(m):
            what = f"encoder '{m.encoder}'" + (" with model.hybrid.combine=concat" if m.encoder == "hybrid" else "")
            raise ConfigError(f"{run} uses {what}, which has no gates; `cn3 nmt gates` needs a run trained with "
                              "--encoder hybrid (model.hybrid.combine=gate)")
        if file is not None:
            from data_prep.textio import read_lines

            sentences, what = [line for _, line in read_lines(file)], str(file)
        else:
            name = canonical_split(split, loaded.config.data.corpus)
            pairs = load_split(loaded.config.data, name, loaded.config.train.seed, data_root=data)
            sentences, what = [s for s, _ in pairs], name
        if limit:
            sentences = sentences[:limit]
        stats = collect_gates(loaded.model, loaded.tokenizer, sentences, device=dev)
        if not any(stats.words):
            raise ConfigError(f"{what}: no source words to analyse")
        if pos:
            with console.status("tagging source words with spaCy"):
                tag_words(stats)
        target = out or run
        title = f"{run.name}: hybrid gates on {what} (window m={m.hybrid.window})"
        layers, per_pos = stats.per_layer(), stats.per_pos()
        atomic_write_json(target / "gates.json", {"run": str(run), "data": what, "sentences": len(stats.words),
                                                  "window": m.hybrid.window, "per_layer": layers,
                                                  "per_upos": per_pos})
        png = plot_gates(stats, title)
        atomic_write(target / "gates.png", lambda handle: handle.write(png))
    table = Table(title="mean local weight g per encoder layer (Xu et al. Fig. 3)")
    for col in ("layer", "mean g", "std", "words"):
        table.add_column(col, justify="right")
    for r in layers:
        table.add_row(str(r["layer"]), f"{r['mean']:.3f}", f"{r['std']:.3f}", f"{r['words']:,}")
    console.print(table)
    if per_pos:
        table = Table(title="mean local weight g per source-word UPOS (Xu et al. Fig. 4)")
        for col in ("UPOS", "words", "mean g", *[f"layer {i + 1}" for i in range(len(layers))]):
            table.add_column(col, justify="right")
        for r in per_pos:
            table.add_row(r["upos"], f"{r['words']:,}", f"{r['mean']:.3f}", *[f"{x:.3f}" for x in r["per_layer"]])
        console.print(table)
    console.print(f"wrote {target / 'gates.json'} and {target / 'gates.png'}")
