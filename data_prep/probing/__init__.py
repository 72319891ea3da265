"""Probing tasks (Conneau et al., ACL 2018, "What you can cram into a single $&!#* vector") rebuilt from
the staged treebanks.

SentEval's probing data (100k/10k/10k sentences of the Toronto BookCorpus per task) cannot be
downloaded here, so each task is rebuilt from gold treebanks: UD English EWT (dependency trees: 8
tasks) and the NLTK Penn Treebank sample (constituency trees: TreeDepth, TopConst). Every task is a
sentence classification task whose input is the raw tokens only; the gold annotation decides the
label (or the modification) and is then dropped.

What all tasks share, following Conneau et al. where the small treebanks allow it:

* sentences of 5-28 tokens (the range of Conneau et al.'s corpus, see their SentLen bins), each
  distinct token sequence once (a duplicate could land in two splits, or as both O and I):
  :func:`.selection.eligible`;
* balanced classes: every class downsampled to the smallest one (:func:`.splitting.balance`), seeded;
* seeded train/dev/test of about 80/10/10 (:data:`.splitting.SPLIT_FRACTIONS`), stratified by class so
  every split stays balanced (:func:`.splitting.stratified_split`); Tense, SubjNum and ObjNum split by
  target word form instead, as Conneau et al. do (:func:`.splitting.lexical_split`), and SOMO's
  replacement words belong to one split each;
* ``Example.meta`` keeps what each label was made from (target word, depth, position of a change ...),
  so ``cn3 evaluate --by`` can break scores down by it.

Deviations common to all (each task's own are in its builder's docstring and in the task notes): a
far smaller corpus (hundreds to thousands of items, not 120k), other genres (web text, WSJ) than
novels, gold trees where Conneau et al. parsed automatically, and splits made here. The EWT files
(train, dev, test) are pooled before splitting: the probing splits are not EWT's.

The builders are pure functions: treebank examples (or bracketed trees) and a seed in, labelled
examples per split out.

Layout. The ten builders are grouped as Conneau et al. group the tasks, by the kind of information a
sentence vector must keep to solve them, which is also how ``cn3 probe`` reports them:
:mod:`.surface` (SentLen, WC), :mod:`.syntactic` (BShift, TreeDepth, TopConst) and :mod:`.semantic`
(Tense, SubjNum, ObjNum, SOMO, CoordInv). Each module holds its tasks' constants, the functions that
read a label off a sentence or tree, and the builders, so one task reads top to bottom in one place.
What every builder shares sits below them: choosing and labelling sentences (:mod:`.selection`) and
balancing and splitting them (:mod:`.splitting`). The PTB side's input is two modules because it is two
jobs: the bracket notation (:mod:`.brackets`) and NLTK's archive of ``.mrg`` files
(:mod:`.treebank_zip`). This module names what :mod:`data_prep.tasks` registers: the builders, the
PTB reader and the fixed label sets.
"""

from data_prep.probing.semantic import probe_coordinv, probe_objnum, probe_somo, probe_subjnum, probe_tense
from data_prep.probing.surface import SENTLEN_BINS, probe_sentlen, probe_wc
from data_prep.probing.syntactic import DEPTHS, probe_bshift, probe_topconst, probe_treedepth
from data_prep.probing.treebank_zip import ParsedSentence, read_treebank_zip

__all__ = ["DEPTHS", "SENTLEN_BINS", "ParsedSentence", "probe_bshift", "probe_coordinv", "probe_objnum",
           "probe_sentlen", "probe_somo", "probe_subjnum", "probe_tense", "probe_topconst", "probe_treedepth",
           "probe_wc", "read_treebank_zip"]
