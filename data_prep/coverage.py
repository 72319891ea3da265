"""How much of a dataset a run knows: out-of-vocabulary words (with and without a pretrained vector)
and symbols outside the character, POS and relation inventories, all of which the model sees as
``<unk>``. ``cn3 evaluate`` prints it so that a user sees when new text is far from the training data.
"""

from __future__ import annotations

import torch

from data_prep.store import GraphDataset
from data_prep.vocab import UNK_ID, Vocab


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def coverage(dataset: GraphDataset, vocabs: dict[str, Vocab]) -> dict:
    """Counts over every token of ``dataset`` (both sides of pairs) against the run's ``vocabs``.

    Words are counted as tokens and as distinct lower-cased types, each in three classes: in the
    vocabulary; outside it with a pretrained vector (``open``: embedded with that vector); outside
    it without one (``unk``). ``unknown_chars``: tokens with at least one character outside the
    character vocabulary; ``unknown_pos``/``unknown_relations``: tokens whose POS tag / incoming
    relation the run never saw (``None`` when the run reads no POS / no trees).
    """
    t = dataset.t
    n_vocab = len(vocabs["lower"])
    types = torch.cat([t[f"{side}.type"].long() for side in dataset.sides])  # (tokens,) type of each token
    lower = t["types.lower"].long()
    token_ids = lower[types]
    n_tokens = types.numel()
    classes = {"open": token_ids >= n_vocab, "unk": token_ids == UNK_ID}
    report: dict = {"tokens": n_tokens}
    for name, mask in classes.items():
        report[f"{name}_tokens"] = int(mask.sum())
    by_word: dict[str, str] = {}  # lower-cased type -> class
    texts = t["types.text"]
    for ti in torch.unique(types).tolist():
        i = int(lower[ti])
        by_word[texts[ti].lower()] = "open" if i >= n_vocab else "unk" if i == UNK_ID else "known"
    report["types"] = len(by_word)
    for name in classes:
        report[f"{name}_types"] = sum(c == name for c in by_word.values())
    report["oov_tokens"] = report["open_tokens"] + report["unk_tokens"]
    report["oov_types"] = report["open_types"] + report["unk_types"]
    report["unknown_chars"] = int((t["types.chars"].long()[types] == UNK_ID).any(-1).sum())
    for key, name in (("upos", "unknown_pos"), ("deprel", "unknown_relations")):
        cols = [t[f"{side}.{key}"].long() for side in dataset.sides if f"{side}.{key}" in t]
        report[name] = int((torch.cat(cols) == UNK_ID).sum()) if cols else None
    return report


def describe(report: dict) -> list[str]:
    """The report as sentences for the terminal."""
    n, k = report["tokens"], report["types"]

    def pct(key: str) -> str:
        what, whole = ("tokens", n) if key.endswith("tokens") else ("types", k)
        return f"{100 * _share(report[key], whole):.1f}% of {what}"

    lines = [f"outside the run's vocabulary: {pct('oov_tokens')} ({report['oov_tokens']:,} of {n:,}), "
             f"{pct('oov_types')} ({report['oov_types']:,} of {k:,}); with a pretrained vector (used): "
             f"{pct('open_tokens')}, {pct('open_types')}; no vector (<unk>): {pct('unk_tokens')}, "
             f"{pct('unk_types')}"]
    symbols = [f"characters in {report['unknown_chars']:,} tokens"]
    for key, name in (("unknown_pos", "POS tags"), ("unknown_relations", "relations")):
        if report[key] is not None:
            symbols.append(f"{name} of {report[key]:,} tokens")
    lines.append("symbols the run never saw (read as <unk>): " + ", ".join(symbols))
    return lines
