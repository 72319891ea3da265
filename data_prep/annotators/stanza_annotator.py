"""The ``stanza`` annotator: Stanford's UD parser, fully offline.

* Models come from ``stanza_dir``, else ``$STANZA_RESOURCES_DIR``, else stanza's defaults
  (``~/.cache/stanza/<version>/resources``, then ``~/stanza_resources``). Nothing is downloaded.
* The directory is checked for ``resources.json`` and ``en/{pos,lemma,depparse}/*.pt`` before
  stanza or torch is imported; a :class:`DataError` says where it looked and how to get the models.
* One ``stanza.Pipeline(processors="tokenize,pos,lemma,depparse", tokenize_pretokenized=True,
  download_method=None)`` per process, fed ``batch_size`` sentences per call: token lists are taken
  as given (never re-split, no MWT expansion).
* Stanza's UD output (``upos``, ``head`` 1-based with 0 = root, ``deprel`` with subtype) is copied as is.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import os
import re
from pathlib import Path

from cn3.util.errors import DataError
from data_prep.annotators.base import ProgressFn, alternatives
from data_prep.example import Sentence

STANZA_PROCESSORS = "tokenize,pos,lemma,depparse"
#: model folders that must hold a ``*.pt`` under ``<dir>/en/`` (tokenize is not needed: pretokenized).
REQUIRED_MODELS = ("pos", "lemma", "depparse")
DEFAULT_BATCH_SIZE = 256


def _stanza_resources_version() -> str | None:
    """stanza's ``__resources_version__``, read from its ``_version.py`` without importing stanza."""
    spec = importlib.util.find_spec("stanza")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        try:
            text = (Path(loc) / "_version.py").read_text(encoding="utf-8")
        except OSError:
            continue
        m = re.search(r"__resources_version__\s*=\s*['\"]([^'\"]+)['\"]", text)
        if m:
            return m.group(1)
    try:
        return importlib.metadata.version("stanza")
    except importlib.metadata.PackageNotFoundError:
        return None


def candidate_dirs(stanza_dir: str | Path | None = None) -> list[tuple[Path, str]]:
    """Where to look for models, in order, each with where it came from (for messages)."""
    if stanza_dir is not None:
        return [(Path(stanza_dir).expanduser(), "--stanza-dir")]
    env = os.environ.get("STANZA_RESOURCES_DIR")
    if env:
        return [(Path(env).expanduser(), "$STANZA_RESOURCES_DIR")]
    out: list[tuple[Path, str]] = []
    version = _stanza_resources_version()
    if version is not None:
        try:
            from platformdirs import user_cache_dir

            cache = Path(user_cache_dir("stanza", "StanfordNLP", version))
            out.append((cache / "resources", "stanza's default"))
        except ImportError:
            pass
    out.append((Path.home() / "stanza_resources", "stanza's former default"))
    return out


def model_problems(directory: Path) -> list[str]:
    """What is missing in ``directory`` for the English pipeline (empty = usable)."""
    if not directory.is_dir():
        return ["the directory does not exist"]
    problems = []
    resources = directory / "resources.json"
    if not resources.is_file():
        problems.append("no resources.json")
    else:
        try:
            data = json.loads(resources.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or "en" not in data:
                problems.append("resources.json has no 'en' entry")
        except (OSError, ValueError) as err:
            problems.append(f"resources.json is unreadable ({err})")
    en = directory / "en"
    if not en.is_dir():
        problems.append("no en/ folder")
    else:
        for proc in REQUIRED_MODELS:
            if not any((en / proc).glob("*.pt")):
                problems.append(f"no en/{proc}/*.pt model")
    return problems


def find_models(stanza_dir: str | Path | None = None) -> Path | None:
    """The first candidate directory with usable English models, or ``None``."""
    for directory, _ in candidate_dirs(stanza_dir):
        if not model_problems(directory):
            return directory
    return None


def require_models(stanza_dir: str | Path | None = None) -> Path:
    """The model directory, or a :class:`DataError` saying where it looked and how to get models."""
    candidates = candidate_dirs(stanza_dir)
    looked = []
    for directory, origin in candidates:
        problems = model_problems(directory)
        if not problems:
            return directory
        looked.append(f"{directory} ({origin}): {'; '.join(problems)}")
    target = str(candidates[0][0])
    raise DataError(
        "no usable stanza English models (tokenize,pos,lemma,depparse); looked in: "
        + " | ".join(looked)
        + ". Models are never downloaded here. On a machine with internet run: "
        f"python -c \"import stanza; stanza.download('en', model_dir='{target}', "
        f"processors='{STANZA_PROCESSORS}')\" then copy that directory to this machine and pass "
        f"--stanza-dir DIR (or set STANZA_RESOURCES_DIR=DIR); {alternatives('stanza')}"
    )


def _packages(directory: Path) -> str:
    """``pos=combined_charlm depparse=combined_charlm``: which models, for the version string."""
    default: dict = {}
    try:
        data = json.loads((directory / "resources.json").read_text(encoding="utf-8"))
        default = data.get("en", {}).get("packages", {}).get("default", {}) or {}
    except (OSError, ValueError, AttributeError):
        pass
    parts = []
    for proc in ("pos", "depparse"):
        pkg = default.get(proc) if isinstance(default, dict) else None
        if not isinstance(pkg, str):
            pkg = "+".join(sorted(p.stem for p in (directory / "en" / proc).glob("*.pt")))
        parts.append(f"{proc}={pkg}")
    return " ".join(parts)


@functools.cache
def load_pipeline(model_dir: str):
    """The stanza pipeline for ``model_dir``, built once per process, never downloading."""
    try:
        import stanza
        import torch
    except ImportError as err:
        raise DataError(f"the 'stanza' annotator needs stanza and torch ({err}): pip install stanza") from err
    try:
        return stanza.Pipeline(
            lang="en",
            dir=model_dir,
            processors=STANZA_PROCESSORS,
            tokenize_pretokenized=True,
            download_method=None,
            use_gpu=torch.cuda.is_available(),
            logging_level="WARN",
        )
    except Exception as err:  # stanza raises FileNotFoundError, ValueError, its own errors ...
        raise DataError(
            f"stanza could not load its English models ({type(err).__name__}: {err}); re-download them "
            f"(python -c \"import stanza; stanza.download('en', model_dir='{model_dir}', "
            f"processors='{STANZA_PROCESSORS}')\" on a machine with internet) or {alternatives('stanza')}",
            model_dir,
        ) from err


class StanzaAnnotator:
    """Stanza UD POS tags and trees (see the module docstring).

    Args:
        stanza_dir: the model directory (``--stanza-dir``); ``None``: env, then stanza's defaults.
        batch_size: sentences per pipeline call; progress is reported once per call.
    """

    name = "stanza"
    provides: frozenset[str] = frozenset({"pos", "deps"})

    def __init__(self, stanza_dir: str | Path | None = None, batch_size: int = DEFAULT_BATCH_SIZE):
        self.model_dir = require_models(stanza_dir)
        self.batch_size = max(1, int(batch_size))
        try:
            stanza_version = importlib.metadata.version("stanza")
        except importlib.metadata.PackageNotFoundError:
            raise DataError("the 'stanza' annotator needs the stanza package: pip install stanza") from None
        self.version = f"stanza {stanza_version} / en {_packages(self.model_dir)}"

    @property
    def pipeline(self):
        return load_pipeline(str(self.model_dir))

    def annotate(self, sentences: list[Sentence], on_progress: ProgressFn | None = None) -> None:
        nlp = self.pipeline
        todo = []
        for k, s in enumerate(sentences):
            if len(s.tokens):
                todo.append(k)
            else:
                s.upos, s.heads, s.deprels = [], [], []
        n_empty = len(sentences) - len(todo)
        step = self.batch_size
        for start in range(0, len(todo), step):
            idx = todo[start : start + step]
            batch = [[t if t.strip() else "_" for t in sentences[k].tokens] for k in idx]
            doc = nlp(batch)
            if len(doc.sentences) != len(idx):
                raise DataError(f"stanza returned {len(doc.sentences)} sentences for a batch of {len(idx)}")
            for k, sent in zip(idx, doc.sentences):
                s = sentences[k]
                words = sent.words
                if len(words) != len(s.tokens):
                    raise DataError(
                        f"stanza returned {len(words)} words for sentence {k + 1} of {len(s.tokens)} "
                        f"tokens: {' '.join(s.tokens)!r}"
                    )
                s.upos = [w.upos for w in words]
                s.heads = [int(w.head) for w in words]
                s.deprels = [w.deprel for w in words]
            if on_progress is not None:
                on_progress(n_empty + start + len(idx))
        if on_progress is not None and not todo:
            on_progress(len(sentences))
