"""Shared fixtures: the staged data root and a cache of real-data loads."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _data_root() -> Path:
    env = os.environ.get("CN3_DATA")
    return Path(env) if env else (REPO.parent / "shared" / "data").resolve()


@pytest.fixture(scope="session")
def data_root() -> Path:
    """``$CN3_DATA``, else ``<repo>/../shared/data``; tests needing it are skipped when it is absent."""
    root = _data_root()
    if not root.is_dir():
        pytest.skip(f"staged data not found at {root} (set CN3_DATA)")
    return root


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
    """Tiny tensors: one torch thread avoids OpenMP overhead (and contention on shared CI machines)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
