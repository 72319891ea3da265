"""The rich summary printed at the end of ``cn3 prepare`` (and by ``cn3 prepare --show``)."""

from __future__ import annotations

from rich.table import Table

from cn3.util.console import console


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

    with_emb = manifest.get("embeddings") is not None
    table = Table(title="splits", title_justify="left")
    columns = ["split", "items", "tokens", "len mean", "p50", "p90", "p99", "max", "OOV/vocab"]
    columns += ["of which vectors", "OOV/vectors tok", "type"] if with_emb else []
    for col in columns:
        table.add_column(col, justify="left" if col == "split" else "right")
    for name, s in stats["splits"].items():
        n = s["length"] or dict.fromkeys(("mean", "p50", "p90", "p99", "max"), "-")
        row = [name, f"{s['examples']:,}", f"{s['tokens']:,}", str(n["mean"]), str(n["p50"]), str(n["p90"]),
               str(n["p99"]), str(n["max"]), _pct(s["oov_vocab_tokens"]) if name != "train" else "-"]
        if with_emb:
            opened = _pct(s.get("oov_vectors_tokens")) if name != "train" else "-"
            row += [opened, _pct(s.get("oov_embeddings_tokens")), _pct(s.get("oov_embeddings_types"))]
        table.add_row(*row)
    console.print(table)
    kind = "tags" if manifest["level"] == "node" else "labels"
    for name, s in stats["splits"].items():
        console.print(f"{kind} ({name}): {_labels(s['labels'], sum(s['labels'].values()))}", soft_wrap=True)

    vocab = ", ".join(f"{k} {v:,}" for k, v in manifest["vocab_sizes"].items())
    console.print(f"vocabularies (from the train split): {vocab}")
    if with_emb:
        console.print("words outside the vocabulary keep their pretrained vector (\"of which vectors\": "
                      "the share of tokens that do; the rest are <unk>)")
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
