"""Shared fixtures: the staged data root and a cache of real-data loads."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# inductor's on-disk kernel cache does not key on ATEN_CPU_CAPABILITY: a run imitating an AVX2 machine
# (ATEN_CPU_CAPABILITY=avx2) would load kernels compiled for this machine's wider ISA and fail inside
# them. One cache per capability keeps the imitation honest (and each cache warm).
if os.environ.get("ATEN_CPU_CAPABILITY") and "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(os.environ.get("TMPDIR", "/tmp"))
                                                / f"torchinductor-{os.environ['ATEN_CPU_CAPABILITY']}")


def _data_root() -> Path:
    env = os.environ.get("CN3_DATA")
    return Path(env) if env else (REPO.parent / "shared" / "data").resolve()


def missing_staged_data(path: Path) -> None:
    """Skip the calling test because ``path`` is not staged, or fail it when ``$CI`` is set.

    CI runs with the data staged beside the clone, so there a missing file is a broken setup:
    skipping would report every real-data test as passed without running it.
    """
    message = f"staged data not found at {path} (set CN3_DATA)"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"{message}; CI is set, so tests that need it fail instead of skipping", pytrace=False)
    pytest.skip(message)


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch's intra-op thread count set to ``count`` inside, the previous count restored on leaving."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    """The session's in-process work runs on one torch thread (a run's ``train.num_threads`` or a test may
    set another): the suite's models are tiny, and two OpenMP threads on a loaded machine stall each
    other at every barrier (a resume test took 108 s with two threads, 4 s with one, on a loaded 2-core
    machine). Subprocesses keep torch's default."""
    with torch_threads(1):
        yield


@pytest.fixture(scope="session", autouse=True)
def vectors_cache(tmp_path_factory):
    """Tests never write the user's cache: word vectors (``data_prep.embeddings``) are cached in a
    directory of the session, inherited by the CLI subprocesses that tests start."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CN3_CACHE", str(tmp_path_factory.mktemp("cn3-cache")))
        yield


@pytest.fixture(scope="session")
def data_root() -> Path:
    """``$CN3_DATA``, else ``<repo>/../shared/data``; when it is absent, tests needing it are skipped
    (failed under ``$CI``)."""
    root = _data_root()
    if not root.is_dir():
        missing_staged_data(root)
    return root


@pytest.fixture(scope="session")
def staged(data_root):
    """``staged(relative)``: ``data_root / relative``; a test asking for a file that is not staged is
    skipped (failed under ``$CI``)."""

    def require(relative: str) -> Path:
        path = data_root / relative
        if not path.exists():
            missing_staged_data(path)
        return path

    return require


@pytest.fixture(scope="session")
def load_real(data_root):
    """``load_real(task)``: the task's splits read once per session with default options."""
    from data_prep.tasks import load_task

    cache: dict = {}

    def load(name: str):
        if name not in cache:
            cache[name] = load_task(name, data_root)
            gc.freeze()  # the cached data is long-lived: keep later collections from rescanning it
        return cache[name]

    return load


@pytest.fixture(scope="module")
def one_thread():
    """Tiny tensors: one torch thread avoids OpenMP overhead (and contention on shared CI machines); the
    module's in-process trainings may set another (``train.num_threads``), restored after the module."""
    with torch_threads(1):
        yield
