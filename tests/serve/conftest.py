"""Session fixtures for ``cn3 serve``: tiny runs trained once on the staged data, and a live server.

Shared with the browser tests: ``serve_runs`` (name -> run directory), ``serve_app`` (the loaded
:class:`cn3.serve.api.ServeApp` over them) and ``live_server`` (its base URL, the server on a free
port of 127.0.0.1 in a thread, stopped after the session).

The runs: ``trec`` (CN3, 2 graph layers, 2 energy heads), ``trec_transformer`` (self-attention, 2
heads), ``sick`` (CN3, a pair task), ``conll2003`` (CN3 tagging, CRF), ``multi30k`` (the hybrid
translation encoder on a few hundred Multi30k pairs) and ``trec_lstm`` (a BiLSTM: no graph). Each
trains for a few seconds on one thread.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

#: ``--set`` overrides that make a sentence run train in seconds
TINY = ["model.hidden=16", "model.energy_dim=8", "model.mlp_hidden=16", "model.char=none", "model.pos_dim=0",
        "model.spell_dim=0", "data.limit=200", "train.epochs=1", "train.max_steps=15", "data.embeddings=null",
        "train.evals_per_epoch=1"]
#: the translation run's overrides (as tests/nmt use)
TINY_NMT = ["model.encoder=hybrid", "model.d_model=32", "model.ff=64", "model.heads=2", "model.encoder_layers=2",
            "model.decoder_layers=1", "model.hybrid.layers=1", "data.vocab_size=120", "data.valid_size=20",
            "train.max_tokens=600", "train.epochs=1", "train.warmup=5", "train.lr=0.003", "train.final_beam=1",
            "train.final_splits=[val]", "train.eval_batch_size=32"]
#: pairs of Multi30k's test_2016_flickr the translation run trains on
NMT_PAIRS = 300


def _sentence_run(prepared: Path, task: str, run: Path, *extra: str) -> Path:
    from cn3.kinds import train
    from cn3.sentence.resolve import resolve_config

    cfg = resolve_config(task, None, {"data.prepared": prepared}, [*TINY, *extra])
    train(cfg, run, device_name="cpu")
    return run


def _translation_run(staged, base: Path) -> Path:
    from cn3.kinds import train
    from cn3.nmt.config import resolve_nmt_config

    files = {}
    for lang in ("en", "de"):
        with gzip.open(staged(f"multi30k/raw/test_2016_flickr.{lang}.gz"), "rt", encoding="utf-8") as handle:
            lines = [next(handle) for _ in range(NMT_PAIRS)]
        files[lang] = base / f"m30k.{lang}"
        files[lang].write_text("".join(lines), encoding="utf-8")
    flags = {"data.corpus": "files", "data.train_src": files["en"], "data.train_tgt": files["de"]}
    cfg = resolve_nmt_config(None, flags, TINY_NMT)
    train(cfg, base / "multi30k-hybrid", device_name="cpu")
    return base / "multi30k-hybrid"


@pytest.fixture(scope="session")
def serve_runs(tmp_path_factory, data_root, staged) -> dict[str, Path]:
    """name -> run directory of the tiny runs (module docstring), trained once per session."""
    import torch

    from data_prep.prepare import PrepareSettings, prepare

    base = tmp_path_factory.mktemp("serve-runs")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: extra threads only fight over the shared cores
    try:
        prepared = {task: prepare(PrepareSettings(task=task, data=data_root, out=base / f"prepared-{task}",
                                                  annotator="none")).out
                    for task in ("trec", "sick", "conll2003")}
        runs = {
            "trec": _sentence_run(prepared["trec"], "trec", base / "trec-cn3", "model.graph_layers=2",
                                  "model.energy_heads=2"),
            "trec_transformer": _sentence_run(prepared["trec"], "trec", base / "trec-transformer",
                                              "model.encoder=transformer", "model.heads=2", "model.graph_layers=2"),
            "sick": _sentence_run(prepared["sick"], "sick", base / "sick-cn3"),
            "conll2003": _sentence_run(prepared["conll2003"], "conll2003", base / "conll2003-cn3"),
            "multi30k": _translation_run(staged, base),
            "trec_lstm": _sentence_run(prepared["trec"], "trec", base / "trec-lstm", "model.encoder=lstm"),
        }
    finally:
        torch.set_num_threads(threads)
    return runs


#: the order of the served runs: ids r0, r1, ... (``serve_ids`` maps the names to them)
SERVED = ("trec", "trec_transformer", "sick", "conll2003", "multi30k", "trec_lstm")


@pytest.fixture(scope="session")
def serve_ids() -> dict[str, str]:
    """name of :data:`SERVED` -> its run id in ``serve_app`` and ``live_server`` (``r0``, ``r1``, ...)."""
    return {name: f"r{i}" for i, name in enumerate(SERVED)}


@pytest.fixture(scope="session")
def serve_app(serve_runs):
    """The API over every run of ``serve_runs`` (:data:`SERVED` order), on the CPU, 120 words at most."""
    import torch

    from cn3.serve.api import ServeApp
    from cn3.serve.runs import load_served

    served = [load_served(serve_runs[name], f"r{i}", torch.device("cpu")) for i, name in enumerate(SERVED)]
    return ServeApp(served, max_words=120)


@pytest.fixture(scope="session")
def live_server(serve_app):
    """The base URL (``http://127.0.0.1:<port>/``) of ``serve_app`` served on a free port in a thread,
    shut down after the session."""
    from cn3.serve.server import serving

    with serving(serve_app) as url:
        yield url
