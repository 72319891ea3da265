"""Translations: sacreBLEU's own paired test of corpus BLEU, with a paired bootstrap interval."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from cn3.stats.paired import bootstrap_interval, check_lengths, scored_differently
from cn3.stats.result import PairedResult


@contextmanager
def _sacrebleu_seed(seed: int) -> Iterator[None]:
    # PairedTest takes its seed from $SACREBLEU_SEED only (as the sacrebleu command line does); set it
    # for the call and put back what was there.
    saved = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["SACREBLEU_SEED"]
        else:
            os.environ["SACREBLEU_SEED"] = saved


def bleu_paired_test(references: Sequence[str], hyps_a: Sequence[str], hyps_b: Sequence[str], *, test: str = "ar",
                     resamples: int | None = None, seed: int = 12345) -> PairedResult:
    """sacreBLEU's paired test of A's against B's corpus BLEU, with a bootstrap interval of the difference.

    ``sacrebleu.significance.PairedTest`` with B as the baseline, so scores and p are sacreBLEU's own
    (default BLEU: 13a tokenization, exponential smoothing). The 95% interval is a paired bootstrap
    percentile interval as in :func:`cn3.stats.paired_test`, on sacreBLEU's per-sentence statistics.

    p: sacreBLEU counts only trials whose difference *exceeds* the observed one, so two systems with
    the same statistics on every sentence would get its smallest p; p is reported as 1 then.

    Args:
        references: the reference translation of each sentence.
        hyps_a, hyps_b: A's and B's translation of each sentence, in the same order.
        test: ``"ar"`` (approximate randomization) or ``"bs"`` (paired bootstrap resampling).
        resamples: trials (``ar``) or resamples (``bs``); default sacreBLEU's (10,000 or 1,000). The
            interval uses as many bootstrap resamples.
        seed: a positive seed (sacreBLEU reads 0 as "no seed"); 12345 gives the ``sacrebleu`` command
            line's figures.

    Raises:
        ValueError: unknown test, seed < 1, fewer than 2 sentences, or inputs of different lengths.
    """
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    if test not in ("ar", "bs"):
        raise ValueError(f'test is "ar" (approximate randomization) or "bs" (paired bootstrap), not {test!r}')
    if seed < 1:
        raise ValueError(f"sacreBLEU reads seed {seed} as unseeded: give a positive seed")
    resamples = resamples or {"ar": 10_000, "bs": 1_000}[test]  # sacreBLEU's defaults
    check_lengths(references, hyps_a, hyps_b, resamples)
    refs = [list(references)]
    bleu = BLEU()
    with _sacrebleu_seed(seed):
        _, scores = PairedTest([("B", list(hyps_b)), ("A", list(hyps_a))], {"BLEU": bleu}, refs, test_type=test,
                               n_samples=resamples)()
    baseline, system = scores["BLEU"]
    # The per-sentence statistics PairedTest itself resamples; the metric's private hooks are the ones
    # sacrebleu.significance calls.
    counts_a = np.array(bleu._extract_corpus_statistics(list(hyps_a), refs), dtype=float)
    counts_b = np.array(bleu._extract_corpus_statistics(list(hyps_b), refs), dtype=float)

    def score(sums: np.ndarray) -> np.ndarray:
        flat = sums.reshape(-1, sums.shape[-1])
        return np.array([bleu._compute_score_from_stats(row).score for row in flat]).reshape(sums.shape[:-1])

    low, high = bootstrap_interval(counts_a, counts_b, score, resamples, np.random.default_rng(seed))
    differ = int(scored_differently(counts_a, counts_b).sum())
    return PairedResult(metric="bleu", n_items=len(references), items_differ=differ, score_a=float(system.score),
                        score_b=float(baseline.score), difference=float(system.score - baseline.score),
                        ci_low=low, ci_high=high, p_value=float(system.p_value) if differ else 1.0,
                        method="approximate randomization" if test == "ar" else "bootstrap resampling",
                        resamples=resamples)
