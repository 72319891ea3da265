"""Probing tasks (Conneau et al., ACL 2018, "What you can cram into a single $&!#* vector") rebuilt from
the staged treebanks.

SentEval's probing data cannot be downloaded here, so each task is rebuilt from gold treebanks: UD
English EWT (dependency trees: 8 tasks) and the NLTK Penn Treebank sample (constituency trees:
TreeDepth, TopConst). Every task classifies raw tokens; the gold annotation decides the label (or
the modification) and is then dropped.

Shared by all tasks:

* sentences of 5-28 tokens, each distinct token sequence once (:func:`.selection.eligible`);
* classes balanced by seeded downsampling (:func:`.splitting.balance`);
* seeded train/dev/test of about 80/10/10 (:data:`.splitting.SPLIT_FRACTIONS`), stratified by class
  (:func:`.splitting.stratified_split`); Tense, SubjNum and ObjNum split by target word form
  (:func:`.splitting.lexical_split`), and SOMO's replacement words belong to one split each;
* ``Example.meta`` keeps what each label was made from, for ``cn3 evaluate --by``.

Deviations common to all (each task's own are in its builder's docstring): a far smaller corpus,
other genres (web text, WSJ), gold trees where Conneau et al. parsed automatically, and splits made
here from the pooled EWT files.

Builders are pure functions (treebank examples or bracketed trees and a seed in, labelled examples
per split out), grouped as Conneau et al. group the tasks: :mod:`.surface`, :mod:`.syntactic`,
:mod:`.semantic`; shared steps in :mod:`.selection` and :mod:`.splitting`; PTB input in
:mod:`.brackets` and :mod:`.treebank_zip`. This module names what :mod:`data_prep.tasks` registers.
"""

from data_prep.probing.semantic import probe_coordinv, probe_objnum, probe_somo, probe_subjnum, probe_tense
from data_prep.probing.surface import SENTLEN_BINS, probe_sentlen, probe_wc
from data_prep.probing.syntactic import DEPTHS, probe_bshift, probe_topconst, probe_treedepth
from data_prep.probing.treebank_zip import ParsedSentence, read_treebank_zip

__all__ = ["DEPTHS", "SENTLEN_BINS", "ParsedSentence", "probe_bshift", "probe_coordinv", "probe_objnum",
           "probe_sentlen", "probe_somo", "probe_subjnum", "probe_tense", "probe_topconst", "probe_treedepth",
           "probe_wc", "read_treebank_zip"]
