"""Is run A better than run B? Significance tests on per-example predictions and across seeds.

Thin wrappers around scipy, sacreBLEU and deepsig, each naming its method:

* :func:`paired_test`: paired approximate randomization p and 95% paired bootstrap interval on the
  same items, scored as :mod:`cn3.metrics` scores them;
* :func:`bleu_paired_test`: sacreBLEU's ``PairedTest`` (p equals ``sacrebleu --paired-ar``/``--paired-bs``);
* :func:`compare`: two runs' :class:`cn3.runs.records.Predictions` on the same items, through either;
* :func:`welch`, :func:`mean_std`, :func:`aso`: scores across seeds (Welch's t-test, mean and
  sample std, Almost Stochastic Order);
* :func:`holm`, :func:`bonferroni`: adjusted p-values for a family of comparisons;
* :func:`detectable_welch`, :func:`detectable_paired` and friends: the smallest difference a test
  that found nothing would have detected (:mod:`.power`);
* :mod:`cn3.stats.verdict`: whether a paper's claim holds, from the item and seed levels (one rule).

Every test takes a seed (default 0; sacreBLEU's 12345 for BLEU): same inputs and seed, same figures.
The names below are the documented interface (``cn3.stats.<name>``).
"""

from cn3.stats.across_seeds import WelchResult, aso, mean_std, welch
from cn3.stats.bleu import bleu_paired_test
from cn3.stats.corrections import bonferroni, holm
from cn3.stats.paired import paired_test
from cn3.stats.power import (
                             POWER,
                             detectable_across_seeds,
                             detectable_paired,
                             detectable_welch,
                             item_differences,
                             paired_differences,
                             pooled_std,
                             t_test_power,
                             welch_power,
)
from cn3.stats.result import ALPHA, METRIC_WORDS, PairedResult, format_p
from cn3.stats.runs import check_paired, compare

__all__ = ["ALPHA", "METRIC_WORDS", "POWER", "PairedResult", "WelchResult", "aso", "bleu_paired_test", "bonferroni",
           "check_paired", "compare", "detectable_across_seeds", "detectable_paired", "detectable_welch", "format_p",
           "holm", "item_differences", "mean_std", "paired_differences", "paired_test", "pooled_std", "t_test_power",
           "welch", "welch_power"]
