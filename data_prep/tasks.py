"""The task registry: :data:`TASKS` (name -> :class:`TaskSpec`), :func:`get_task`, :func:`custom_spec`.

Label names (documented choice): sentiment tasks use ``negative``/``positive`` (MR, CR, MPQA, SST-2, IMDB),
SST-5 ``very_negative`` .. ``very_positive``, SUBJ ``objective``/``subjective``, NLI lower-case
``entailment``/``neutral``/``contradiction``, TREC the coarse class (``ABBR`` ...) or ``COARSE:fine``,
logic the seven relation symbols. Tagging tasks keep their tags (UPOS, PTB, BIOES/IOB2 chunk and NER tags).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from data_prep import readers, tagging
from data_prep.readers import (
    read_conll2000, read_conll2003, read_conllu, read_imdb, read_logic, read_sick, read_snli, read_sst2,
    read_sst5, read_trec,
)
from data_prep.errors import DataError
from data_prep.example import Example
from data_prep.readers.columns import CHUNK_TYPES, NER_TYPES
from data_prep.readers.common import unbracket
from data_prep.readers.custom import TOKENIZE as CUSTOM_TOKENIZE
from data_prep.readers.custom import custom_files, custom_format, custom_level, parse_columns
from data_prep.readers.imdb import IMDB_LABELS
from data_prep.readers.labelled_files import LABELLED_FILES, POLARITY, SUBJECTIVITY
from data_prep.readers.logic import LOGIC_LABELS, TEST_MAX_OPS, TRAIN_MAX_OPS
from data_prep.readers.nli import NLI_LABELS, SNLI_FILES
from data_prep.readers.splits import check_fold
from data_prep.readers.sst import SST2_LABELS, SST5_LABELS
from data_prep.readers.treebanks import PTB_TAGS, UD_FILES, UPOS_TAGS
from data_prep.readers.trec import TREC_COARSE
from data_prep.taskspec import TaskOptions, TaskSpec
from data_prep.tokenize import tokenize_attached_clitics

POS = frozenset({"pos"})
POS_DEPS = frozenset({"pos", "deps"})
CV_NOTE = (
    "no official split: seeded 10-fold cross-validation (options.seed); test = fold options.fold, "
    "dev = a seeded 10% of the other folds, train = the rest"
)


def _cv_files(task: str) -> tuple[str, ...]:
    folder, _, files = LABELLED_FILES[task]
    return tuple(f"{folder}/{name}" for name, _ in files)


def _read_sick_all(path: Path, options: TaskOptions) -> list[Example]:
    return [ex for split in read_sick(path).values() for ex in split]


def _read_snli(path: Path, options: TaskOptions) -> list[Example]:
    return read_snli(path)


#: One file in each task's format, for ``cn3 evaluate --file`` (held-out test sets). Tasks whose
#: labels come from file names (MR, SUBJ, CR, MPQA) or that need two files (PTB sample) have none.
FILE_READERS = {
    "snli": _read_snli,
    "sick": _read_sick_all,
    "trec": lambda path, options: read_trec(path, fine=options.fine),
    "sst2": lambda path, options: read_sst2(path),
    "sst5": lambda path, options: read_sst5(path),
    "imdb": lambda path, options: read_imdb(path),
    "conll2003": lambda path, options: read_conll2003(path, options.tag_scheme),
    "conll2000": lambda path, options: read_conll2000(path, options.tag_scheme),
    "ud_pos": lambda path, options: read_conllu(path),
    "logic": lambda path, options: read_logic(path),
}


_TASK_LIST = [
    TaskSpec(
        name="snli",
        level="pair",
        description="SNLI natural language inference (1% train sample, official dev)",
        files=tuple(f"snli/{name}" for name in SNLI_FILES.values()),
        load=readers.load_snli,
        labels=NLI_LABELS,
        notes=(
            "train is a 1% sample of the official train split (5,502 pairs); no test (held out): evaluate on dev; "
            "pairs with gold_label '-' are dropped (4 of 5,502 train, 158 of 10,000 dev); "
            "tokens from the binary parses, brackets removed"
        ),
    ),
    TaskSpec(
        name="sick",
        level="pair",
        description="SICK entailment (SemEval-2014 TRAIN/TRIAL/TEST split)",
        files=("sick/SICK.txt",),
        load=readers.load_sick,
        labels=NLI_LABELS,
        notes="split from the SemEval_set column (TRIAL = dev); meta['relatedness'] keeps the 1-5 score",
        tokenize_text=tokenize_attached_clitics,  # "it's", "doesn't" are one token in the files
    ),
    TaskSpec(
        name="trec",
        level="graph",
        description="TREC question classification (6 coarse classes; 50 fine with --fine)",
        files=("trec/train_5500.label", "trec/TREC_10.label"),
        load=readers.load_trec,
        labels=TREC_COARSE,
        notes="dev = a seeded 10% of train_5500.label; test = TREC_10.label",
    ),
    TaskSpec(
        name="mr",
        level="graph",
        description="MR movie-review sentence polarity (original rt-polaritydata)",
        files=_cv_files("mr"),
        load=readers.load_mr,
        labels=POLARITY,
        cv=True,
        notes=CV_NOTE + "; original rt-polaritydata files, decoded as Windows-1252",
        tokenize_text=tokenize_attached_clitics,  # "it's", "doesn't" are one token in the files
    ),
    TaskSpec(
        name="subj",
        level="graph",
        description="SUBJ subjectivity (quote = subjective, plot = objective)",
        files=_cv_files("subj"),
        load=readers.load_subj,
        labels=SUBJECTIVITY,
        cv=True,
        notes=CV_NOTE,
        tokenize_text=tokenize_attached_clitics,
    ),
    TaskSpec(
        name="cr",
        level="graph",
        description="CR customer-review polarity (SentEval copy)",
        files=_cv_files("cr"),
        load=readers.load_cr,
        labels=POLARITY,
        cv=True,
        notes=CV_NOTE + "; empty lines skipped",
    ),
    TaskSpec(
        name="mpqa",
        level="graph",
        description="MPQA opinion polarity (SentEval copy)",
        files=_cv_files("mpqa"),
        load=readers.load_mpqa,
        labels=POLARITY,
        cv=True,
        notes=CV_NOTE + "; empty lines skipped",
    ),
    TaskSpec(
        name="sst2",
        level="graph",
        description="SST-2 binary sentiment (phrase-level train, sentence dev)",
        files=("sst/binary/sentiment-train", "sst/binary/sentiment-dev"),
        load=readers.load_sst2,
        labels=SST2_LABELS,
        notes="train has all labelled phrases (67,349); no test (held out): evaluate on dev",
    ),
    TaskSpec(
        name="sst5",
        level="graph",
        description="SST-5 fine-grained sentiment",
        files=("sst/fine/sentiment-train", "sst/fine/sentiment-dev"),
        load=readers.load_sst5,
        labels=SST5_LABELS,
        notes="no test (held out): evaluate on dev",
    ),
    TaskSpec(
        name="imdb",
        level="graph",
        description="IMDB long movie-review sentiment",
        files=("imdb/train.jsonl.gz", "imdb/test.jsonl.gz"),
        load=readers.load_imdb,
        labels=IMDB_LABELS,
        max_len=400,
        notes="dev = a seeded 10% of train; <br /> removed, regex tokenizer; truncated to 400 tokens by default",
    ),
    TaskSpec(
        name="conll2003",
        level="node",
        description="CoNLL-2003 English NER (PER, LOC, ORG, MISC)",
        files=("conll2003/eng.train", "conll2003/eng.testa"),
        load=readers.load_conll2003,
        gold=POS,
        tag_scheme="BIOES",
        notes=(
            "IOB1 tags converted to the tag scheme; dev = eng.testa, no test (eng.testb held out); "
            "POS are automatic PTB tags; 2 B-MISC after O in eng.train (an IOB1 slip) are read as span starts"
        ),
    ),
    TaskSpec(
        name="conll2000",
        level="node",
        description="CoNLL-2000 chunking (WSJ)",
        files=("conll2000/train.txt.gz", "conll2000/test.txt.gz"),
        load=readers.load_conll2000,
        gold=POS,
        tag_scheme="BIOES",
        notes="IOB2 tags converted to the tag scheme; dev = last 1,000 train sentences; test POS are Brill-tagger output",
    ),
    TaskSpec(
        name="ud_pos",
        level="node",
        description="UD English EWT v2.16 UPOS tagging (gold trees)",
        files=tuple(f"ud_english_ewt/{name}" for name in UD_FILES.values()),
        load=readers.load_ud_pos,
        labels=UPOS_TAGS,
        gold=POS_DEPS,
        label_is_pos=True,
        notes="multiword-token ranges and empty nodes skipped; deprels kept with subtypes",
    ),
    TaskSpec(
        name="ptb_pos",
        level="node",
        description="PTB WSJ sample (NLTK, ~4% of WSJ) POS tagging",
        files=tuple(
            f"ptb_wsj_sample/wsj_sample_{kind}.{split}.{ext}"
            for split in ("train", "dev", "test")
            for kind, ext in (("pos", "tsv"), ("dep", "conllx"))
        ),
        load=readers.load_ptb_pos,
        labels=PTB_TAGS,
        gold=POS_DEPS,
        label_is_pos=True,
        notes="split by WSJ file number (made for the sample); unlabeled heads only (deprels None); not comparable to full-PTB results",
    ),
    TaskSpec(
        name="logic",
        level="pair",
        description="Propositional-logic inference (Bowman et al., 2015), length generalisation",
        files=tuple(f"logic_inference/train{n}.gz" for n in range(TRAIN_MAX_OPS + 1))
        + tuple(f"logic_inference/test{n}.gz" for n in range(TEST_MAX_OPS + 1)),
        load=readers.load_logic,
        labels=LOGIC_LABELS,
        annotator="none",
        tokenize_text=unbracket,  # a formula: its brackets are not tokens
        notes=(
            "follows Shen et al. (ICLR 2019): train = train0-6 (<= 6 operators) minus a seeded 10% dev; "
            "test = all of test0-12 so short (<= 6) and long (7-12) pairs can both be reported: "
            "split results by meta['n_ops'] (= file index: operators of the larger side; 12 = 12 or more)"
        ),
    ),
]

TASKS: dict[str, TaskSpec] = {spec.name: replace(spec, read_file=FILE_READERS.get(spec.name)) for spec in _TASK_LIST}
TAGGING_TASKS = frozenset({"conll2003", "conll2000"})
SPAN_TYPES = {"conll2003": NER_TYPES, "conll2000": CHUNK_TYPES}


def custom_spec(options: TaskOptions) -> TaskSpec:
    """The spec of the ``custom`` task; its level is inferred from the train file (see readers.custom)."""
    files = custom_files(options)
    fmt = custom_format(options)
    level = custom_level(options)
    gold: set[str] = set()
    if fmt == "conll":
        columns = parse_columns(options.columns)
        if {"upos", "xpos"} & set(columns):
            gold.add("pos")
        if "head" in columns:
            gold.add("deps")
    return TaskSpec(
        name="custom",
        level=level,  # type: ignore[arg-type]
        description=f"custom {fmt} data ({level} level)",
        files=tuple(str(files[split]) for split in ("train", "dev", "test") if split in files),
        load=readers.load_custom,
        gold=frozenset(gold),
        notes="user files; labels from train" + ("; tags kept as they are" if fmt == "conll" else ""),
        tokenize_text=CUSTOM_TOKENIZE,
    )


def text_tokenizer(task: str) -> Callable[[str], list[str]]:
    """``TaskSpec.tokenize_text`` of ``task``, without the data files (a run's ``custom`` train
    file need not exist when it labels new text)."""
    return CUSTOM_TOKENIZE if task == "custom" else get_task(task).tokenize_text


def get_task(name: str, options: TaskOptions | None = None) -> TaskSpec:
    """The spec of ``name`` adjusted to ``options`` (TREC fine labels, tag scheme); validates the options."""
    options = options or TaskOptions()
    if name == "custom":
        return custom_spec(options)
    if name not in TASKS:
        raise DataError(f"unknown task {name!r}; known: {', '.join([*TASKS, 'custom'])}")
    spec = TASKS[name]
    if spec.cv:
        check_fold(options)
    if name == "trec" and options.fine:
        spec = replace(
            spec,
            labels=None,
            description="TREC question classification (50 fine classes)",
            notes=spec.notes + "; fine labels COARSE:fine, inventory from train",
        )
    if name in TAGGING_TASKS:
        # The tag inventory is fixed by the task's span types, not by what train happens to hold:
        # CoNLL-2000's test split has B-LST, which its train split never uses.
        scheme = tagging.check_scheme(options.tag_scheme, tagging.OUTPUT_SCHEMES)
        spec = replace(spec, tag_scheme=scheme, labels=tagging.tag_inventory(SPAN_TYPES[name], scheme))
    return spec


def load_task(name: str, data_root: str | Path | None, options: TaskOptions | None = None) -> dict[str, list[Example]]:
    """``get_task(name, options).load(data_root, options)``."""
    options = options or TaskOptions()
    spec = get_task(name, options)
    return spec.load(Path(data_root) if data_root is not None else None, options)  # type: ignore[arg-type]
