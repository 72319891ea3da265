"""Readers of every staged data set: ``load_<task>(data_root, options) -> {split: [Example, ...]}``.

One module per format family; file-level ``read_*`` functions return ``list[Example]``.
Every malformed input raises :class:`cn3.util.errors.DataError` naming the file and line.
"""

from data_prep.readers.columns import load_conll2000, load_conll2003, read_conll2000, read_conll2003
from data_prep.readers.custom import load_custom
from data_prep.readers.imdb import load_imdb, read_imdb
from data_prep.readers.labelled_files import load_cr, load_mpqa, load_mr, load_subj, read_labelled_lines
from data_prep.readers.logic import load_logic, read_logic
from data_prep.readers.nli import load_sick, load_snli, read_sick, read_snli
from data_prep.readers.sst import load_sst2, load_sst5, read_sst2, read_sst5
from data_prep.readers.trec import load_trec, read_trec
from data_prep.readers.treebanks import load_ptb_pos, load_ud_pos, read_conllu, read_ptb_sample

__all__ = [
    "load_conll2000", "load_conll2003", "load_cr", "load_custom", "load_imdb", "load_logic", "load_mpqa",
    "load_mr", "load_ptb_pos", "load_sick", "load_snli", "load_sst2", "load_sst5", "load_subj", "load_trec",
    "load_ud_pos", "read_conll2000", "read_conll2003", "read_conllu", "read_imdb", "read_labelled_lines",
    "read_logic", "read_ptb_sample", "read_sick", "read_snli", "read_sst2", "read_sst5", "read_trec",
]  # fmt: skip
