"""Is run A better than run B? Paired significance tests on per-example predictions, and friends.

Thin wrappers around maintained libraries (scipy, sacreBLEU, deepsig), each naming its method:

* :func:`paired_test` — two systems' predictions on the same items, scored with accuracy, token
  accuracy or span F1 exactly as :mod:`cn3.metrics` scores them: **paired approximate randomization**
  (Noreen, 1989; Riezler & Maxwell, 2005) for p, exact when all swaps fit in ``resamples``, and a 95%
  **paired bootstrap** percentile interval of the difference (Koehn, 2004), both through scipy.
* :func:`bleu_paired_test` — translations: sacreBLEU's own ``PairedTest`` (approximate randomization
  by default, or paired bootstrap resampling, Koehn 2004), so the scores and p equal
  ``sacrebleu --paired-ar``/``--paired-bs``; the interval as in :func:`paired_test`, on sacreBLEU's
  per-sentence BLEU statistics.
* :func:`compare` — two runs' :class:`cn3.run_dir.Predictions` on the same items: :func:`paired_test`, or
  :func:`bleu_paired_test` for BLEU.
* :func:`welch` — scores across seeds: Welch's unequal-variance t-test (Welch, 1947),
  ``scipy.stats.ttest_ind(equal_var=False)``.
* :func:`mean_std` — scores across seeds: mean and sample standard deviation (None for one seed).
* :func:`holm`, :func:`bonferroni` — adjusted p-values for a family of comparisons (Holm, 1979).
* :func:`detectable_welch`, :func:`detectable_paired` — what a comparison that found nothing could
  have found: the smallest difference detected with power 0.8 at level 0.05, across seeds from the
  pooled per-seed spread (the exact power of Welch's test, :func:`welch_power`; the textbook pooled
  t-test's through the noncentral t, :func:`t_test_power`), and on items from the per-item paired
  differences (:func:`paired_differences`; normal approximation).
* :func:`aso` — scores across seeds: Almost Stochastic Order (del Barrio et al., 2018; Dror et al.,
  2019) from deepsig (Ulmer et al., 2022), which needs numpy, scipy, pandas and joblib but not torch.

Runs' predictions are read by :func:`cn3.run_dir.load_predictions`; this package only tests them.

**Reproducible.** Every test takes a seed (default 0; sacreBLEU's default 12345 for BLEU): the same
inputs and seed give the same figures.

Layout: one module per question a caller asks, so the machinery of one test never sits between the
lines of another. Two systems on the same items: :mod:`.paired` (the randomization test and bootstrap
interval through scipy, on the per-item counts of :mod:`.counts`), :mod:`.bleu` (sacreBLEU's test),
both returning a :class:`.result.PairedResult`, and :mod:`.runs` (two runs' predictions to the test
their metric takes). Scores across seeds: :mod:`.across_seeds` (mean and spread, Welch, ASO). A family
of tests: :mod:`.corrections` (Bonferroni, Holm). What a test could have found: :mod:`.power`. The
names below are the documented interface (``cn3.stats.<name>``), and what the rest of cn3 imports.
"""

from cn3.stats.across_seeds import WelchResult, aso, mean_std, welch
from cn3.stats.bleu import bleu_paired_test
from cn3.stats.corrections import bonferroni, holm
from cn3.stats.paired import paired_test
from cn3.stats.power import (POWER, detectable_across_seeds, detectable_paired, detectable_welch, item_differences,
                             paired_differences, pooled_std, t_test_power, welch_power)
from cn3.stats.result import ALPHA, METRIC_WORDS, PairedResult, format_p
from cn3.stats.runs import check_paired, compare

__all__ = ["ALPHA", "METRIC_WORDS", "POWER", "PairedResult", "WelchResult", "aso", "bleu_paired_test", "bonferroni",
           "check_paired", "compare", "detectable_across_seeds", "detectable_paired", "detectable_welch", "format_p",
           "holm", "item_differences", "mean_std", "paired_differences", "paired_test", "pooled_std", "t_test_power",
           "welch", "welch_power"]
