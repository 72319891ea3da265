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

from cn3.util.errors import DataError
from data_prep import probing, readers, tagging
from data_prep.example import Example
from data_prep.readers import (
    read_conll2000,
    read_conll2003,
    read_conllu,
    read_imdb,
    read_logic,
    read_sick,
    read_snli,
    read_sst2,
    read_sst5,
    read_trec,
)
from data_prep.readers.columns import CHUNK_TYPES, NER_TYPES
from data_prep.readers.common import task_dir
from data_prep.readers.custom import TOKENIZE as CUSTOM_TOKENIZE
from data_prep.readers.custom import custom_files, custom_format, custom_level, parse_columns
from data_prep.readers.imdb import IMDB_LABELS
from data_prep.readers.labelled_files import LABELLED_FILES, POLARITY, SUBJECTIVITY
from data_prep.readers.logic import LOGIC_LABELS, TEST_MAX_OPS, TRAIN_MAX_OPS, formula_tokens, operator_tree
from data_prep.readers.nli import NLI_LABELS, SNLI_FILES
from data_prep.readers.splits import check_fold
from data_prep.readers.sst import SST2_LABELS, SST5_LABELS
from data_prep.readers.trec import TREC_COARSE
from data_prep.readers.treebanks import PTB_TAGS, UD_FILES, UPOS_TAGS
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


_TASK_LIST = [
    TaskSpec(
        name="snli",
        read_file=_read_snli,
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
        read_file=_read_sick_all,
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
        read_file=lambda path, options: read_trec(path, fine=options.fine),
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
        read_file=lambda path, options: read_sst2(path),
        level="graph",
        description="SST-2 binary sentiment (phrase-level train, sentence dev)",
        files=("sst/binary/sentiment-train", "sst/binary/sentiment-dev"),
        load=readers.load_sst2,
        labels=SST2_LABELS,
        notes=("train has the labelled phrases (67,349 in the file); the staged copy has no labelled test, so test is "
               "a seeded 10% of the train sentences, their phrases dropped from train (manifest: held_out); "
               "dev = the official dev sentences, which select the checkpoint"),
        reader_version=2,  # 2: a test split held out of train's sentences (1: none, dev only)
    ),
    TaskSpec(
        name="sst5",
        read_file=lambda path, options: read_sst5(path),
        level="graph",
        description="SST-5 fine-grained sentiment",
        files=("sst/fine/sentiment-train", "sst/fine/sentiment-dev"),
        load=readers.load_sst5,
        labels=SST5_LABELS,
        notes="no test (held out): evaluate on dev",
    ),
    TaskSpec(
        name="imdb",
        read_file=lambda path, options: read_imdb(path),
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
        span_types=NER_TYPES,
        read_file=lambda path, options: read_conll2003(path, options.tag_scheme),
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
        span_types=CHUNK_TYPES,
        read_file=lambda path, options: read_conll2000(path, options.tag_scheme),
        level="node",
        description="CoNLL-2000 chunking (WSJ)",
        files=("conll2000/train.txt.gz", "conll2000/test.txt.gz"),
        load=readers.load_conll2000,
        gold=POS,
        tag_scheme="BIOES",
        notes=("IOB2 tags converted to the tag scheme; dev = last 1,000 train sentences; "
               "test POS are Brill-tagger output"),
    ),
    TaskSpec(
        name="ud_pos",
        read_file=lambda path, options: read_conllu(path),
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
        notes=("split by WSJ file number (made for the sample); unlabeled heads only (deprels None); "
               "not comparable to full-PTB results"),
    ),
    TaskSpec(
        name="logic",
        read_file=lambda path, options: read_logic(path),
        level="pair",
        description="Propositional-logic inference (Bowman et al., 2015), length generalisation",
        files=tuple(f"logic_inference/train{n}.gz" for n in range(TRAIN_MAX_OPS + 1))
        + tuple(f"logic_inference/test{n}.gz" for n in range(TEST_MAX_OPS + 1)),
        load=readers.load_logic,
        labels=LOGIC_LABELS,
        gold=frozenset({"deps"}),  # operator trees from the brackets (data_prep/readers/logic.py); no POS
        annotator="gold",
        tokenize_text=formula_tokens,  # a formula's pieces, brackets included (as the reader reads them)
        text_heads=lambda formula: operator_tree(formula)[1],  # ... and the tree they bracket
        reader_version=2,  # 2: brackets are tokens (1 dropped them)
        notes=(
            "follows Shen et al. (ICLR 2019): train = train0-6 (<= 6 operators) minus a seeded 10% dev; "
            "test = all of test0-12 so short (<= 6) and long (7-12) pairs can both be reported: "
            "split results by meta['n_ops'] (= file index: operators of the larger side; 12 = 12 or more)"
        ),
    ),
]

# --- probing tasks (Conneau et al., 2018), rebuilt from the staged treebanks: data_prep/probing/ ---

PTB_TREES = "nltk_data/corpora/treebank.zip"
UD_PROBE_NOTE = (
    "Conneau et al. (2018) probing task rebuilt from UD English EWT (train, dev and test pooled; the gold "
    "tree decides the label, the input is the raw tokens) instead of their BookCorpus data (not obtainable "
    "here): sentences of 5-28 tokens, each once; classes balanced by downsampling; seeded ~80/10/10 split"
)
PTB_PROBE_NOTE = (
    "Conneau et al. (2018) probing task rebuilt from the NLTK WSJ sample (3,914 gold trees of all 199 files, "
    "traces and function tags removed) instead of their parsed BookCorpus data (not obtainable here): "
    "sentences of 5-28 words, each once; classes balanced by downsampling; seeded ~80/10/10 split"
)
LEXICAL_NOTE = (
    "lexical split as Conneau: each target form occurs in one split only (forms placed, then each split "
    "balanced, so sizes are only about 80/10/10); target forms of corpus frequency 3-1,000 instead of "
    "100-5,000 (drops is/are/was/have/'s and one-off forms)"
)


def _ud_probe(build: Callable[[list[Example], int], dict[str, list[Example]]]):
    """``TaskSpec.load`` of a probing task built by ``build`` from the pooled EWT files."""

    def load(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
        folder = task_dir(root, "ud_english_ewt")
        return build([ex for name in UD_FILES.values() for ex in read_conllu(folder / name)], options.seed)

    return load


def _ptb_probe(build: Callable[[list[probing.ParsedSentence], int], dict[str, list[Example]]]):
    """``TaskSpec.load`` of a probing task built by ``build`` from the PTB sample's constituency trees."""

    def load(root: Path, options: TaskOptions) -> dict[str, list[Example]]:
        task_dir(root, "nltk_data")  # a missing data root or folder: the usual message
        return build(probing.read_treebank_zip(Path(root) / PTB_TREES), options.seed)

    return load


UD_FILE_PATHS = tuple(f"ud_english_ewt/{name}" for name in UD_FILES.values())
_PROBING_TASKS = [
    TaskSpec(
        name="probe_sentlen",
        level="graph",
        description="Probing: sentence length in 6 bins (Conneau et al., 2018; from UD EWT)",
        files=UD_FILE_PATHS,
        load=_ud_probe(probing.probe_sentlen),
        labels=tuple(f"{lo}-{hi}" for lo, hi in probing.SENTLEN_BINS),
        notes=UD_PROBE_NOTE + "; Conneau's bins 5-8, 9-12, 13-16, 17-20, 21-25, 26-28 unchanged (tokens = UD "
        "syntactic words: do n't is two); majority-class baseline 16.7% (6 balanced classes)",
    ),
    TaskSpec(
        name="probe_wc",
        level="graph",
        description="Probing: which of 100 mid-frequency words the sentence contains (Conneau et al., 2018; UD EWT)",
        files=UD_FILE_PATHS,
        load=_ud_probe(probing.probe_wc),
        notes=UD_PROBE_NOTE + "; 100 target words from frequency rank 201 on (alphabetic, 4+ characters, each the "
        "one target of 25+ sentences) instead of 1,000 from rank 2,001; each sentence has exactly one target, "
        "once (as Conneau); labels = the words, from train; majority-class baseline 1% (100 balanced classes)",
    ),
    TaskSpec(
        name="probe_bshift",
        level="graph",
        description="Probing: were two adjacent words swapped? O/I (Conneau et al., 2018; UD EWT)",
        files=UD_FILE_PATHS,
        load=_ud_probe(probing.probe_bshift),
        labels=("O", "I"),
        notes=UD_PROBE_NOTE + "; in half of the sentences two adjacent tokens swapped, never the first token nor "
        "punctuation, no sentences with double quotes, no sentence in both versions (as Conneau); "
        "meta['position'] = the swap; majority-class baseline 50%",
    ),
    TaskSpec(
        name="probe_tense",
        level="graph",
        description="Probing: main-clause verb past or present, PAST/PRES (Conneau et al., 2018; UD EWT)",
        files=UD_FILE_PATHS,
        load=_ud_probe(probing.probe_tense),
        labels=("PAST", "PRES"),
        annotator="none",  # the main verb's POS tag (VBD vs VBZ/VBP) is the label
        notes=UD_PROBE_NOTE + "; main-clause verb = the UD root, or its copula (cop) when it has one: VBD = PAST, "
        "VBP/VBZ = PRES, other tags (has eaten, will go) left out; " + LEXICAL_NOTE + "; meta['target'] = the "
        "verb form; annotator none: POS tags would give the label away; majority-class baseline 50%",
    ),
    TaskSpec(
        name="probe_subjnum",
        level="graph",
        description="Probing: main-clause subject singular or plural, NN/NNS (Conneau et al., 2018; UD EWT)",
        files=UD_FILE_PATHS,
        load=_ud_probe(probing.probe_subjnum),
        labels=("NN", "NNS"),
        annotator="none",  # NN vs NNS is the label
        notes=UD_PROBE_NOTE + "; subject = the root's nsubj or nsubj:pass, common nouns (NN/NNS) only; "
        + LEXICAL_NOTE + "; meta['target'] = the noun form; annotator none: POS tags would give the label "
        "away; majority-class baseline 50%",
    ),
    TaskSpec(
        name="probe_objnum",
        level="graph",
        description="Probing: main-clause direct object singular or plural, NN/NNS (Conneau et al., 2018; UD EWT)",
        files=UD_FILE_PATHS,
        load=_ud_probe(probing.probe_objnum),
        labels=("NN", "NNS"),
        annotator="none",  # NN vs NNS is the label
        notes=UD_PROBE_NOTE + "; object = the root's obj, common nouns (NN/NNS) only; " + LEXICAL_NOTE
        + "; meta['target'] = the noun form; annotator none: POS tags would give the label away; "
        "majority-class baseline 50%",
    ),
    TaskSpec(
        name="probe_somo",
        level="graph",
        description="Probing: was a noun or verb replaced? O/C, semantic odd man out (Conneau et al., 2018; UD EWT)",
        files=UD_FILE_PATHS,
        load=_ud_probe(probing.probe_somo),
        labels=("O", "C"),
        notes=UD_PROBE_NOTE + "; in half of the sentences one lower-case noun or verb (not AUX, not PROPN) of "
        "frequency 5-100 replaced by another of the same PTB tag and log2 frequency band (Conneau: frequency "
        "40-400 and matched bigram frequencies, which EWT is too small to count); each replacement word used "
        "in one split only and no sentence in both versions (as Conneau); both classes drawn from sentences "
        "with a replaceable word; meta = position, original, replacement; majority-class baseline 50%",
    ),
    TaskSpec(
        name="probe_coordinv",
        level="graph",
        description="Probing: were two coordinated clauses swapped? O/I (Conneau et al., 2018; UD EWT)",
        files=UD_FILE_PATHS,
        load=_ud_probe(probing.probe_coordinv),
        labels=("O", "I"),
        notes=UD_PROBE_NOTE + "; the root and its only conj, both with a subject, joined by the sentence's only "
        "CC (as Conneau: one CC, coordinating two main clauses); clauses swapped in half of the sentences and "
        "recased (not described by Conneau); O and I balanced by which clause is longer (meta['longer'], as "
        "Conneau); no sentence in both versions; majority-class baseline 50%",
    ),
    TaskSpec(
        name="probe_treedepth",
        level="graph",
        description="Probing: depth of the constituency tree, 5-12 (Conneau et al., 2018; PTB WSJ sample)",
        files=(PTB_TREES,),
        load=_ptb_probe(probing.probe_treedepth),
        labels=tuple(str(d) for d in probing.DEPTHS),
        annotator="none",  # a parse shows the depth
        notes=PTB_PROBE_NOTE + "; depth = nodes from the top constituent down to the deepest word, POS level "
        "included; classes 5-12 as Conneau, but not decorrelated from length (too few trees): a length-only "
        "classifier beats chance (meta['length']); annotator none: a parse would give the depth away; "
        "majority-class baseline 12.5% (8 balanced classes)",
    ),
    TaskSpec(
        name="probe_topconst",
        level="graph",
        description="Probing: the constituents below the sentence node, e.g. NP_VP_. (Conneau et al., 2018; PTB)",
        files=(PTB_TREES,),
        load=_ptb_probe(probing.probe_topconst),
        annotator="none",  # a parse shows the top constituents
        notes=PTB_PROBE_NOTE + "; the 5 commonest sequences + OTHER (Conneau: 19 + OTHER); sequences with quotes "
        "or not ending in '.' left out (as Conneau), sentence-internal commas and colons kept (Conneau drop "
        "them: 3 classes would be left); labels from train; annotator none: a parse would give the "
        "constituents away; majority-class baseline 16.7% (6 balanced classes)",
    ),
]
_TASK_LIST += [replace(spec, config="probe") for spec in _PROBING_TASKS]  # one trained baseline config

TASKS: dict[str, TaskSpec] = {spec.name: spec for spec in _TASK_LIST}


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


def text_tree(task: str) -> Callable[[str], list[int]] | None:
    """``TaskSpec.text_heads`` of ``task``: the tree raw text carries itself, if the task has one."""
    return None if task == "custom" else get_task(task).text_heads


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
    if spec.span_types:
        # The tag inventory is fixed by the task's span types, not by what train happens to hold:
        # CoNLL-2000's test split has B-LST, which its train split never uses.
        scheme = tagging.check_scheme(options.tag_scheme, tagging.OUTPUT_SCHEMES)
        spec = replace(spec, tag_scheme=scheme, labels=tagging.tag_inventory(spec.span_types, scheme))
    return spec


def load_task(name: str, data_root: str | Path | None, options: TaskOptions | None = None) -> dict[str, list[Example]]:
    """``get_task(name, options).load(data_root, options)``."""
    options = options or TaskOptions()
    spec = get_task(name, options)
    return spec.load(Path(data_root) if data_root is not None else None, options)  # type: ignore[arg-type]
