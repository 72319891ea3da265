"""Probing a trained run's frozen encoder (Conneau et al., ACL 2018; ``cn3 probe``).

The encoder reads the sentences of a probing task (``probe_*``, :mod:`data_prep.probing`), each
becoming a fixed vector per *feature set*; a classifier fit on train's vectors predicts the label.

Feature sets:

* ``sentence`` (sentence runs): the vector the run's head sees, pooled as in training
  (:meth:`~cn3.sentence.model.SentenceGraphModel.sentence_vector`; a tagging run: ``model.pool`` of
  the node states), the words looked up as any new text is (:func:`cn3.sentence.inference.examples_dataset`).
* ``encoder`` (translation runs): the final encoder output, mean-pooled over the subwords (``</s>``
  included) of the sentence's detokenized text (:func:`detokenize`).
* ``H_onlstm``/``H_lstm`` and ``H_san`` (``onlstm_san``/``lstm_san``): the recurrent and the
  self-attention stack's outputs apart, pooled the same way (Hao et al., 2019, Table 3).
* ``layer N``: the N-th self-attention layer's output instead (the last one's before the stack's
  final LayerNorm).

The classifier (:func:`fit_probe`): features standardized on train; ``LogisticRegression`` per
``C`` of :data:`C_GRID` or ``MLPClassifier`` (one hidden layer of 50, SentEval's) per ``alpha`` of
:data:`ALPHA_GRID`; the value with the best dev accuracy is scored once on test. Seeded.

The probing data are read from the task's files each time: the run's own vocabulary encodes them,
so nothing needs preparing. Bad requests raise :class:`~cn3.config.ConfigError`.
"""

from __future__ import annotations

import re
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from cn3.config import ConfigError
from cn3.encoders import get_spec
from data_prep.example import Example

#: Conneau et al.'s groups, in their Table 2 order.
GROUPS = {
    "probe_sentlen": "surface", "probe_wc": "surface",
    "probe_bshift": "syntactic", "probe_treedepth": "syntactic", "probe_topconst": "syntactic",
    "probe_tense": "semantic", "probe_subjnum": "semantic", "probe_objnum": "semantic", "probe_somo": "semantic",
    "probe_coordinv": "semantic",
}
PROBE_TASKS = tuple(GROUPS)
#: inverse L2 strengths of the logistic regression, strongest first (SentEval's 2^-2 .. 2^4)
C_GRID = tuple(2.0 ** k for k in range(-2, 5))
#: L2 strengths of the MLP, strongest first
ALPHA_GRID = (1.0, 1e-1, 1e-2, 1e-3, 1e-4)
MLP_HIDDEN = 50  # SentEval's nhid
CLASSIFIERS = ("logistic", "mlp")


def parse_tasks(text: str | None) -> list[str]:
    """``"probe_tense,sentlen"`` (the ``probe_`` prefix may be left out) or ``"all"``/``None`` -> task names."""
    if text is None or text.strip() == "all":
        return list(PROBE_TASKS)
    names = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name = part if part.startswith("probe_") else f"probe_{part}"
        if name not in GROUPS:
            raise ConfigError(f"unknown probing task {part!r}; known: {', '.join(PROBE_TASKS)} (or all)")
        if name not in names:
            names.append(name)
    if not names:
        raise ConfigError("no probing task given; --tasks takes a comma-separated list or 'all'")
    return names


def load_probe_task(name: str, data_root: Path, limit: int | None = None) -> dict[str, list[Example]]:
    """The train/dev/test items of probing task ``name``; ``limit``: at most that many per split, evenly
    spread over it (as ``data.limit``)."""
    from data_prep.tasks import load_task

    splits = load_task(name, data_root)
    missing = [s for s in ("train", "dev", "test") if not splits.get(s)]
    if missing:
        raise ConfigError(f"probing task {name} has no {' or '.join(missing)} items")
    if limit:
        splits = {s: _spread(items, limit) for s, items in splits.items()}
    return splits


def _spread(items: list, n: int) -> list:
    if n >= len(items):
        return items
    return [items[int(i)] for i in np.linspace(0, len(items) - 1, n).round().astype(int)]


# --- detokenization (translation runs read raw text) -----------------------------------------------

_BRACKETS = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}",
             "``": '"', "''": '"'}
_ATTACH_LEFT = re.compile(r"^(?:[.,:;!?%)\]}]|\.\.\.|n't|'(?:s|re|ve|m|ll|d)|’(?:s|re|ve|m|ll|d))$", re.I)
_ATTACH_RIGHT = frozenset({"(", "[", "{", "$", "#"})


def detokenize(tokens: list[str]) -> str:
    """Treebank tokens back to running text, as the translation corpus is written: no space before
    ``. , : ; ! ? % ) n't 's``, none after ``( $``, none around a hyphen between words, PTB brackets
    and quotes restored, straight double quotes alternately opening and closing."""
    out: list[str] = []
    glue = True  # no space before the next token
    quote_open = False
    for raw in tokens:
        tok = _BRACKETS.get(raw, raw)
        if tok == '"':
            attach = quote_open
            quote_open = not quote_open
            out.append(("" if attach or glue else " ") + tok)
            glue = not attach
            continue
        attach = bool(_ATTACH_LEFT.match(tok)) or tok == "-"
        out.append(("" if attach or glue else " ") + tok)
        glue = tok in _ATTACH_RIGHT or tok == "-"
    return "".join(out).strip()


# --- features -----------------------------------------------------------------------------------

@contextmanager
def capture_layer(encoder: torch.nn.Module, layer: int | None) -> Iterator[dict]:
    """While open, ``store["h"]`` holds the output ``(B, N, d)`` of the ``layer``-th (1-based) layer of
    ``encoder``'s self-attention stack after each forward; ``layer=None``: nothing is captured."""
    if layer is None:
        yield {}
        return
    from cn3.encoders.san import SelfAttentionEncoder

    stack = next((m for m in encoder.modules() if isinstance(m, SelfAttentionEncoder)), None)
    if stack is None:
        raise ConfigError(f"--layer: this run's encoder ({type(encoder).__name__}) exposes no per-layer states; "
                          "--layer works for encoders with a self-attention stack (transformer, hybrid, local, "
                          "onlstm_san, lstm_san); leave it out to probe the final output")
    n = len(stack.layers)
    if not 1 <= layer <= n:
        raise ConfigError(f"--layer {layer} is out of range: this encoder's self-attention stack has {n} "
                          f"layer{'s' * (n != 1)} (1..{n})")
    store: dict = {}
    handle = stack.layers[layer - 1].register_forward_hook(lambda module, args, out: store.__setitem__("h", out[0]))
    try:
        yield store
    finally:
        handle.remove()


def _pooled_sets(main: torch.Tensor, h_layer: torch.Tensor | None, info: dict, mask: torch.Tensor, pool,
                 main_name: str, split_name: str | None, layer: int | None) -> dict[str, torch.Tensor]:
    sets = {f"layer {layer}": pool(h_layer, mask)} if layer is not None else {main_name: main}
    if split_name is not None:
        sets[split_name] = pool(info["h_rnn"], mask)
        sets["H_san"] = pool(info["h_san"], mask)
    return sets


class Features:
    """A run's frozen encoder as a feature extractor: :meth:`extract` maps probing items to one
    ``(n, dim)`` array per feature set. Built by :func:`open_run`."""

    kind: str  # "sentence" or "translation"
    encoder: str
    task: str  # what the run was trained on
    notes: list[str]
    feature_sets: dict[str, str]  # name -> what it is

    def extract(self, examples: list[Example], on_batch: Callable[[int], None] | None = None) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def describe(self) -> dict:
        return {"kind": self.kind, "encoder": self.encoder, "run_task": self.task,
                "feature_sets": self.feature_sets, "notes": self.notes}


class SentenceFeatures(Features):
    kind = "sentence"

    def __init__(self, loaded, device: torch.device, vectors, vectors_note: str, layer: int | None,
                 split_features: bool, batch_size: int):
        self.loaded, self.device, self.vectors, self.layer, self.batch_size = loaded, device, vectors, layer, batch_size
        cfg = loaded.config.model
        self.encoder, self.task = cfg.encoder, loaded.manifest["task"]
        self.split_name = get_spec(self.encoder).split_stack if split_features else None
        with capture_layer(loaded.model.encoder, layer):
            pass  # checks --layer before any data is read
        level = loaded.manifest["level"]
        self.main = "sentence"
        pooled = f"model.pool ({cfg.pool})"
        if level == "node":
            what = f"{pooled} of the node states (a tagging run has no sentence vector)"
        elif hasattr(loaded.model.encoder, "pool"):
            what = f"the sentence vector the head sees ({self.encoder}'s own pooling)"
        else:
            what = f"the sentence vector the head sees: {pooled} of the final encoder states"
        self.feature_sets = ({f"layer {layer}": f"{pooled} of self-attention layer {layer}'s output"}
                             if layer is not None else {self.main: what})
        if self.split_name:
            self.feature_sets[self.split_name] = f"{pooled} of the recurrent stack's output"
            self.feature_sets["H_san"] = f"{pooled} of the self-attention stack's output"
        self.notes = [f"word vectors for words outside the run's vocabulary: {vectors_note}"]
        if loaded.manifest["annotator"]["pos_input"]:
            self.notes.append("the run reads POS tags, which the probing sentences get from a parser: Tense (VBD vs "
                              "VBZ/VBP), SubjNum and ObjNum (NN vs NNS) are then partly given to the encoder as input")
        if level == "pair":
            self.notes.append("a sentence-pair run: each probing sentence is encoded alone (the premise side); "
                              "the head's [u, v, |u-v|, u*v] is not used")
        self.annotation: str | None = None

    def extract(self, examples, on_batch=None):
        from cn3.layers.pooling import POOLS
        from cn3.sentence.batching import item_lengths, make_batch
        from cn3.sentence.inference import examples_dataset
        from cn3.train.bucketing import bucketed_batches

        loaded, model = self.loaded, self.loaded.model
        copies = [Example([type(s)(list(s.tokens)) for s in ex.sentences], None, ex.line, ex.source) for ex in examples]
        manifest = {**loaded.manifest, "level": "graph"}  # one sentence each, whatever the run's level
        new = examples_dataset(copies, loaded.vocabs, manifest, with_labels=False, vectors=self.vectors)
        self.annotation = new.annotation
        dataset = new.dataset
        pool = POOLS[loaded.config.model.pool]
        node_level = loaded.manifest["level"] == "node"
        lengths = item_lengths(dataset)
        out: dict[str, np.ndarray] = {}
        model.eval()
        with torch.no_grad(), model.nodes.open_vocabulary(dataset.open_vectors), \
                capture_layer(model.encoder, self.layer) as store:
            for indices in bucketed_batches(lengths, self.batch_size, shuffle=False):
                side = make_batch(dataset, indices).to(self.device).a
                h, info = model.encode(side)
                main = pool(h, side.mask) if node_level else model.sentence_vector(h, side.mask, info)
                sets = _pooled_sets(main, store.get("h"), info, side.mask, pool, self.main, self.split_name, self.layer)
                for name, values in sets.items():
                    if name not in out:
                        out[name] = np.zeros((len(dataset), values.shape[-1]), dtype=np.float32)
                    out[name][indices] = values.float().cpu().numpy()
                if on_batch is not None:
                    on_batch(len(indices))
        return out


class TranslationFeatures(Features):
    kind = "translation"

    def __init__(self, loaded, device: torch.device, layer: int | None, split_features: bool, batch_size: int):
        self.loaded, self.device, self.layer, self.batch_size = loaded, device, layer, batch_size
        cfg = loaded.config
        self.encoder, self.task = cfg.model.encoder, f"translation ({cfg.data.src_lang}->{cfg.data.tgt_lang})"
        self.split_name = get_spec(self.encoder).split_stack if split_features else None
        with capture_layer(loaded.model.encoder, layer):
            pass
        self.main = "encoder"
        pooled = "mean over the source subwords (</s> included)"
        self.feature_sets = ({f"layer {layer}": f"{pooled} of self-attention layer {layer}'s output"}
                             if layer is not None else {self.main: f"{pooled} of the final encoder output"})
        if self.split_name:
            self.feature_sets[self.split_name] = f"{pooled} of the recurrent stack's output"
            self.feature_sets["H_san"] = f"{pooled} of the self-attention stack's output"
        self.notes = ["each probing sentence is detokenized (treebank tokens back to running text) and encoded "
                      "with the run's sentencepiece model"]
        self.annotation = None

    def extract(self, examples, on_batch=None):
        from cn3.layers.pooling import mean_pool
        from cn3.nmt.data import EOS, pad

        model, tok = self.loaded.model, self.loaded.tokenizer
        ids = [seq + [EOS] for seq in tok.encode_src([detokenize(ex.sentences[0].tokens) for ex in examples])]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out: dict[str, np.ndarray] = {}
        model.eval()
        with torch.no_grad(), capture_layer(model.encoder, self.layer) as store:
            for start in range(0, len(order), self.batch_size):
                indices = order[start : start + self.batch_size]
                memory, mask, info = model.encode(pad([ids[i] for i in indices]).to(self.device))
                sets = _pooled_sets(mean_pool(memory, mask), store.get("h"), info, mask, mean_pool, self.main,
                                    self.split_name, self.layer)
                for name, values in sets.items():
                    if name not in out:
                        out[name] = np.zeros((len(ids), values.shape[-1]), dtype=np.float32)
                    out[name][indices] = values.float().cpu().numpy()
                if on_batch is not None:
                    on_batch(len(indices))
        return out


def open_run(path: Path, device: torch.device, layer: int | None = None, split_features: bool = True,
             batch_size: int = 128, embeddings: Path | None = None, use_vectors: bool = True) -> Features:
    """The frozen encoder of the run at ``path`` (a sentence run of ``cn3 train`` or a translation run of
    ``cn3 nmt train``) as :class:`Features`. ``embeddings``/``use_vectors``: as ``cn3 evaluate``'s
    ``--embeddings``/``--no-vectors`` (:func:`cn3.sentence.inference.run_vectors`)."""
    from cn3.kinds import kind_of_run

    path = Path(path)
    kind = kind_of_run(path)
    if kind.translation:
        return TranslationFeatures(kind.load(path, device), device, layer, split_features, batch_size)
    from cn3.sentence.inference import run_vectors

    loaded = kind.load(path, device)
    vectors, note = run_vectors(loaded.manifest, embeddings, use_vectors)
    return SentenceFeatures(loaded, device, vectors, note, layer, split_features, batch_size)


# --- the classifier -----------------------------------------------------------------------------

def majority_baseline(train_y: list[str], test_y: list[str]) -> tuple[str, float]:
    """Train's most frequent label (ties: the first in sorted order) and its accuracy on test."""
    counts = Counter(train_y)
    label = min(counts, key=lambda y: (-counts[y], y))
    return label, float(np.mean([y == label for y in test_y]))


def _classifier(kind: str, value: float, seed: int):
    if kind == "logistic":
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression(C=value, max_iter=2000, random_state=seed)
    from sklearn.neural_network import MLPClassifier

    return MLPClassifier(hidden_layer_sizes=(MLP_HIDDEN,), alpha=value, max_iter=300, random_state=seed)


def fit_probe(train_x: np.ndarray, train_y: list[str], dev_x: np.ndarray, dev_y: list[str], test_x: np.ndarray,
              test_y: list[str], classifier: str = "logistic", grid: tuple[float, ...] | None = None,
              seed: int = 1) -> dict:
    """Fit one classifier per regularization value on train, choose the value by dev accuracy alone
    (ties: the earlier in ``grid``, which runs from the strongest regularization), score that
    classifier on test.

    Returns ``{"parameter": "C"|"alpha", "chosen", "dev": {value: accuracy}, "dev_accuracy",
    "test_accuracy", "test_predictions", "converged"}``; test is scored once, with the chosen value
    only; ``test_predictions`` is its label for each test item, in order (for paired tests between
    probes: ``cn3 compare-probes``).
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.preprocessing import StandardScaler

    if classifier not in CLASSIFIERS:
        raise ConfigError(f"unknown classifier {classifier!r}; known: {', '.join(CLASSIFIERS)}")
    if len(set(train_y)) < 2:
        raise ConfigError("the probing train split has a single class: nothing to classify")
    grid = grid or (C_GRID if classifier == "logistic" else ALPHA_GRID)
    scaler = StandardScaler().fit(train_x)
    xs = [scaler.transform(x).astype(np.float64) for x in (train_x, dev_x, test_x)]
    models, dev, converged = {}, {}, True
    for value in grid:
        model = _classifier(classifier, value, seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            model.fit(xs[0], train_y)
        converged &= not any(issubclass(w.category, ConvergenceWarning) for w in caught)
        models[value], dev[value] = model, float(model.score(xs[1], dev_y))
    chosen = max(grid, key=lambda v: dev[v])  # the first maximum: the strongest regularization among ties
    predictions = [str(y) for y in models[chosen].predict(xs[2])]
    return {"parameter": "C" if classifier == "logistic" else "alpha", "chosen": chosen,
            "dev": {repr(v): a for v, a in dev.items()}, "dev_accuracy": dev[chosen],
            "test_accuracy": float(np.mean([p == y for p, y in zip(predictions, test_y)])),
            "test_predictions": predictions, "converged": converged}


# --- the whole probe ----------------------------------------------------------------------------

@dataclass
class ProbeResult:
    """What ``cn3 probe`` prints and writes (``probe.json``: :meth:`record`)."""

    run: str
    features: dict
    classifier: str
    grid: list[float]
    seed: int
    layer: int | None
    limit: int | None
    tasks: list[dict] = field(default_factory=list)

    def groups(self) -> dict[str, dict]:
        """Per group (surface, syntactic, semantic) with probed tasks: the tasks, the mean majority baseline
        and the mean test accuracy per feature set."""
        out = {}
        for group in dict.fromkeys(GROUPS.values()):
            rows = [t for t in self.tasks if t["group"] == group]
            if not rows:
                continue
            out[group] = {"tasks": [t["task"] for t in rows],
                          "majority": float(np.mean([t["majority"]["accuracy"] for t in rows])),
                          "test_accuracy": {name: float(np.mean([t["features"][name]["test_accuracy"] for t in rows]))
                                            for name in self.features["feature_sets"]}}
        return out

    def record(self) -> dict:
        return {"run": self.run, **self.features, "classifier": self.classifier, "grid": self.grid,
                "seed": self.seed, "layer": self.layer, "limit": self.limit, "tasks": self.tasks,
                "groups": self.groups()}


def probe_task(features: Features, name: str, splits: dict[str, list[Example]], classifier: str = "logistic",
               seed: int = 1, on_batch: Callable[[int], None] | None = None) -> dict:
    """One task: extract every split's features, fit and score a classifier per feature set."""
    x = {s: features.extract(splits[s], on_batch) for s in ("train", "dev", "test")}
    y = {s: [ex.label for ex in splits[s]] for s in ("train", "dev", "test")}
    label, majority = majority_baseline(y["train"], y["test"])
    row = {"task": name, "group": GROUPS[name], "n": {s: len(splits[s]) for s in splits},
           "classes": len(set(y["train"])), "majority": {"label": label, "accuracy": majority},
           "test_gold": list(y["test"]), "features": {}}
    for fname in features.feature_sets:
        fit = fit_probe(x["train"][fname], y["train"], x["dev"][fname], y["dev"], x["test"][fname], y["test"],
                        classifier, seed=seed)
        row["features"][fname] = {"dim": int(x["train"][fname].shape[1]), **fit}
    if getattr(features, "annotation", None):
        row["annotation"] = features.annotation
    return row


def run_probe(features: Features, run: str, tasks: list[str], data_root: Path, classifier: str = "logistic",
              seed: int = 1, limit: int | None = None, progress=None) -> ProbeResult:
    """Probe ``features`` on ``tasks``; ``progress``: a rich Progress to advance (one bar per task)."""
    torch.manual_seed(seed)
    grid = list(C_GRID if classifier == "logistic" else ALPHA_GRID)
    result = ProbeResult(run, features.describe(), classifier, grid, seed, features.layer, limit)
    for name in tasks:
        splits = load_probe_task(name, data_root, limit)
        total = sum(len(v) for v in splits.values())
        with nullcontext() if progress is None else nullcontext(progress.add_task(name, total=total, rate="")) as bar:
            advance = (lambda n: progress.update(bar, advance=n)) if progress is not None else None
            result.tasks.append(probe_task(features, name, splits, classifier, seed, advance))
            if progress is not None:
                progress.remove_task(bar)
    return result
