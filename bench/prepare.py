"""Prepare throughput: the gold and spaCy annotators on real tasks, and the spaCy annotator's cost
relative to raw ``nlp.pipe`` on the same pretokenized docs, measured in this one process.

    .venv/bin/python bench/prepare.py [--data ROOT] [--spacy-sentences 3000] [--repeats 3]

Targets: gold pipeline >= 5,000 sentences/s; spaCy annotator
within 1.2x of raw nlp.pipe.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
from pathlib import Path

from data_prep.annotators import make_annotator
from data_prep.paths import data_root
from data_prep.prepare import PrepareSettings, prepare
from data_prep.tasks import load_task


def pipeline_rate(task: str, root: Path, annotator: str) -> tuple[float, int, float]:
    """Whole ``prepare`` (read, annotate, vocab, graphs, atomic write) in sentences/s."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = prepare(PrepareSettings(task=task, data=root, out=Path(tmp) / task, annotator=annotator))
        seconds = time.perf_counter() - start
    n = result.manifest["statistics"]["annotation"]["sentences"]
    return n / seconds, n, seconds


def spacy_ratio(root: Path, n_sentences: int, repeats: int) -> tuple[float, float, float]:
    """Median seconds of the annotator and of raw ``nlp.pipe`` over the same docs; their ratio."""
    splits = load_task("conll2003", root)
    sentences = [ex.sentences[0] for ex in splits["train"][:n_sentences]]
    annotator = make_annotator("spacy")
    nlp = annotator.nlp
    list(nlp.pipe([annotator.make_doc(s.tokens) for s in sentences[:200]]))  # warm-up
    ours, raw = [], []
    for _ in range(repeats):
        copies = copy.deepcopy(sentences)
        start = time.perf_counter()
        annotator.annotate(copies)
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        for _doc in nlp.pipe((annotator.make_doc(s.tokens) for s in sentences), batch_size=annotator.batch_size):
            pass
        raw.append(time.perf_counter() - start)
    a, r = statistics.median(ours), statistics.median(raw)
    return a, r, a / r


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--spacy-sentences", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    root = data_root(args.data)

    print("pipeline (read + annotate + vocab + graphs + write), sentences/s:")
    for task, annotator in (("ud_pos", "gold"), ("conll2003", "gold"), ("trec", "spacy")):
        rate, n, seconds = pipeline_rate(task, root, annotator)
        print(f"  {task:10s} {annotator:6s} {rate:9,.0f} sent/s  ({n:,} sentences in {seconds:.1f} s)")
    ours, raw, ratio = spacy_ratio(root, args.spacy_sentences, args.repeats)
    n = args.spacy_sentences
    print(f"spaCy annotator vs raw nlp.pipe on the same {n:,} CoNLL-2003 docs (median of {args.repeats}):")
    print(f"  annotator {n / ours:,.0f} sent/s, raw nlp.pipe {n / raw:,.0f} sent/s, "
          f"ratio {ratio:.3f}x (target <= 1.2x)")


if __name__ == "__main__":
    main()
