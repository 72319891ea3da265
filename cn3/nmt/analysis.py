"""What the hybrid gates learned: the mean local weight ``g`` per encoder layer (Xu et al., 2019,
Fig. 3) and per universal POS tag of the source words (Fig. 4), averaged over words.

A source sentence is split into words and punctuation marks with their UTF-8 byte spans
(:func:`words_with_spans`); a word's gate in a layer is the mean ``g`` over heads, then over the
sentencepiece pieces overlapping it. POS: spaCy on the words as given
(:class:`data_prep.annotators.spacy_annotator.SpacyAnnotator`), mapped to the 17 UD tags.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field

import torch

from cn3.config import ConfigError
from cn3.nmt.data import EOS, pad

_WORD = re.compile(r"\w+(?:[-'’]\w+)*|[^\w\s]")


def words_with_spans(text: str) -> list[tuple[str, int, int]]:
    """``(word, byte_begin, byte_end)`` of each word/punctuation mark of ``text`` (UTF-8 bytes)."""
    out = []
    for m in _WORD.finditer(text):
        begin = len(text[: m.start()].encode("utf-8"))
        out.append((m.group(), begin, begin + len(m.group().encode("utf-8"))))
    return out


@dataclass
class GateStats:
    layers: int
    words: list[list[str]] = field(default_factory=list)
    #: per sentence, per word: the gate of each gated layer
    gates: list[list[list[float]]] = field(default_factory=list)
    upos: list[list[str]] | None = None

    def per_layer(self) -> list[dict]:
        vals = torch.tensor([g for sent in self.gates for g in sent]).view(-1, self.layers)
        return [{"layer": i + 1, "mean": float(vals[:, i].mean()), "std": float(vals[:, i].std()),
                 "words": int(vals.shape[0])} for i in range(self.layers)]

    def per_pos(self) -> list[dict]:
        if self.upos is None:
            return []
        groups: dict[str, list[list[float]]] = {}
        for tags, sent in zip(self.upos, self.gates):
            for tag, g in zip(tags, sent):
                groups.setdefault(tag, []).append(g)
        rows = []
        for tag, values in groups.items():
            v = torch.tensor(values)
            rows.append({"upos": tag, "words": len(values), "mean": float(v.mean()),
                         "per_layer": [round(float(x), 4) for x in v.mean(0)]})
        return sorted(rows, key=lambda r: -r["mean"])


def has_gates(cfg) -> bool:
    """Whether a translation model's encoder has hybrid gates to analyse (``cn3 nmt gates``)."""
    return cfg.encoder == "hybrid" and cfg.hybrid.combine == "gate" and cfg.hybrid.layers > 0


@torch.no_grad()
def collect_gates(model, tok, sentences: list[str], batch_size: int = 64, device=None) -> GateStats:
    """Run the encoder over ``sentences`` and collect each word's gate per gated layer."""
    if not has_gates(model.cfg):
        raise ConfigError(f"encoder '{model.cfg.encoder}' has no gates (only encoder 'hybrid' with "
                          "model.hybrid.combine=gate has)")
    model.eval()
    n_layers = model.cfg.hybrid.layers
    stats = GateStats(n_layers)
    items = []  # (ids, piece spans, words)
    for line in sentences:
        proto = tok.src.encode(line, return_type="proto")
        pieces = [(p.id, p.begin, p.end) for p in proto.pieces]
        words = words_with_spans(line)
        if words:
            items.append((pieces, words))
    for start in range(0, len(items), batch_size):
        chunk = items[start : start + batch_size]
        src = pad([[i for i, _, _ in pieces] + [EOS] for pieces, _ in chunk]).to(device)
        _, _, info = model.encode(src)
        gates = torch.stack([info["gates"][k].mean(1) for k in range(n_layers)], -1).cpu()  # (B, N, L)
        for row, (pieces, words) in enumerate(chunk):
            sent_words, sent_gates = [], []
            for word, begin, end in words:
                idx = [j for j, (_, b, e) in enumerate(pieces) if b < end and e > begin]
                if not idx:
                    continue
                sent_words.append(word)
                sent_gates.append(gates[row, idx].mean(0).tolist())
            stats.words.append(sent_words)
            stats.gates.append(sent_gates)
    return stats


def gate_summary(model, tok, sentences: list[str], split: str, device=None) -> dict:
    """The mean local weight ``g`` per gated layer and over them all, on ``split``'s source words: what
    a run records in ``results.json`` (``gates``) for ``cn3 experiment report`` (Xu et al. Fig. 2 pairs
    each window m's BLEU with its gate)."""
    layers = collect_gates(model, tok, sentences, device=device).per_layer()
    return {"split": split, "words": layers[0]["words"], "per_layer": [round(r["mean"], 4) for r in layers],
            "mean": round(sum(r["mean"] for r in layers) / len(layers), 4)}


def tag_words(stats: GateStats, batch_size: int = 256) -> None:
    """UPOS tags of the collected words with spaCy (pretokenized)."""
    from data_prep.annotators.spacy_annotator import SpacyAnnotator
    from data_prep.example import Sentence

    sentences = [Sentence(tokens=list(words)) for words in stats.words]
    SpacyAnnotator(batch_size=batch_size).annotate(sentences)
    stats.upos = [s.upos or [] for s in sentences]


def plot_gates(stats: GateStats, title: str) -> bytes:
    """PNG bytes: mean gate per layer (left) and per UPOS tag (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers, pos = stats.per_layer(), stats.per_pos()
    fig, axes = plt.subplots(1, 2 if pos else 1, figsize=(12 if pos else 5, 4), squeeze=False,
                             gridspec_kw={"width_ratios": [1, 3] if pos else [1]})
    ax = axes[0][0]
    ax.bar([str(r["layer"]) for r in layers], [r["mean"] for r in layers], color="#4c72b0")
    ax.set_xlabel("encoder layer")
    ax.set_ylabel("mean local weight g")
    ax.set_ylim(0, 1)
    if pos:
        ax = axes[0][1]
        bars = ax.bar([r["upos"] for r in pos], [r["mean"] for r in pos], color="#dd8452")
        # the word count on each bar: a tag seen a handful of times is noise, not a finding
        ax.bar_label(bars, labels=[f"{r['words']:,}" for r in pos], fontsize=7, padding=2)
        ax.set_xlabel("source word UPOS (spaCy); number of words above each bar")
        ax.set_ylim(0, 1)
        ax.tick_params(axis="x", rotation=60)
    fig.suptitle(title)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    return buffer.getvalue()
