"""The lean tree: every clone, and every copy of the tree sent to a GPU machine (at most 64 MiB with the
data and wheels it needs), carries the tracked files; run records must not crowd them out."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUDGET = 15_000_000  # bytes, summed over the tracked files as a checkout holds them (docs/runs/README.md)


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked tree is a git notion")
    return [ROOT / name for name in out.decode().split("\0") if name]


def test_the_tracked_tree_stays_within_its_budget():
    sizes = {path: path.stat().st_size for path in tracked_files() if path.is_file()}
    total = sum(sizes.values())
    largest = sorted(sizes, key=sizes.get, reverse=True)[:5]
    assert total <= BUDGET, (f"the tracked tree holds {total / 1e6:.1f} MB, over its {BUDGET / 1e6:.0f} MB; largest: "
                             + ", ".join(f"{p.relative_to(ROOT)} ({sizes[p] / 1e3:.0f} KB)" for p in largest))


def test_no_run_output_that_records_do_not_keep_is_tracked():
    """Checkpoints, vocabularies, curves, subword models and JSONL predictions stay out of docs/runs."""
    unwanted = (".pt", "vocab.json", "curves.png", ".model", ".jsonl.gz", "experiment.log")
    found = [p for p in tracked_files() if "docs/runs" in p.as_posix() and p.name.endswith(unwanted)]
    found += [p for p in tracked_files() if p.parent.name == "predictions" and p.suffix == ".jsonl"]
    assert not found, found[:5]
