"""The rich summary printed at the end of ``cn3 prepare`` (and by ``cn3 prepare --show``)."""

from __future__ import annotations

from rich.table import Table

from cn3.console import console


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _labels(labels: dict, total: int, top: int = 8) -> str:
    items = list(labels.items())
    text = ", ".join(f"{k} {100 * v / max(total, 1):.0f}%" for k, v in items[:top])
    return text + (f", … (+{len(items) - top})" if len(items) > top else "")


def print_summary(manifest: dict, out, up_to_date: bool) -> None:
    stats = manifest["statistics"]
    ann = manifest["annotator"]
    state = "[green]up to date[/]" if up_to_date else "[green]written[/]"
    console.print(f"\n[bold]{manifest['task']}[/] ({manifest['level']} level): {manifest['description']}")
    console.print(f"{state}: {out}")

    table = Table(title="splits", title_justify="left")
    for col in ("split", "items", "tokens", "length mean/p50/p90/p99/max", "labels", "OOV vs train"):
        table.add_column(col, justify="right" if col in ("items", "tokens") else "left")
    with_emb = manifest.get("embeddings") is not None
    if with_emb:
        table.add_column("OOV vs vectors (tok/type)")
    for name, s in stats["splits"].items():
        n = s["length"]
        length = f"{n['mean']}/{n['p50']}/{n['p90']}/{n['p99']}/{n['max']}" if n else "-"
        label_total = sum(s["labels"].values())
        row = [name, f"{s['examples']:,}", f"{s['tokens']:,}", length, _labels(s["labels"], label_total),
               _pct(s["oov_vocab_tokens"]) if name != "train" else "-"]
        if with_emb:
            row.append(f"{_pct(s.get('oov_embeddings_tokens'))} / {_pct(s.get('oov_embeddings_types'))}")
        table.add_row(*row)
    console.print(table)

    vocab = ", ".join(f"{k} {v:,}" for k, v in manifest["vocab_sizes"].items())
    console.print(f"vocabularies (train only): {vocab}")
    speed = stats["annotation"]
    provides = ", ".join(ann["provides"]) or "words only"
    extra = "" if ann.get("pos_input", True) or "pos" not in ann["provides"] else \
        " (POS not used as input: the labels are POS tags)"
    console.print(f"annotator: [bold]{ann['name']}[/] ({ann['version']}; {provides}){extra}, "
                  f"{speed['sentences']:,} sentences at {speed['sentences_per_second']:,.0f} sent/s")
    if manifest.get("tag_scheme"):
        console.print(f"tag scheme: {manifest['tag_scheme']}")
    if stats.get("truncated_sentences"):
        console.print(f"[yellow]truncated[/] {stats['truncated_sentences']:,} sentences to "
                      f"{manifest['settings']['max_len']} tokens (--max-len)")
    emb = manifest.get("embeddings")
    if emb:
        console.print(f"embeddings: {emb['path']} ({emb['dim']}d), {emb['vocab_found']:,} of "
                      f"{emb['vocab_size']:,} vocabulary entries found")
    if manifest.get("notes"):
        console.print(f"notes: {manifest['notes']}")
