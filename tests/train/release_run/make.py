"""Writes this folder's run: a sentence run of cn3 0.3 (commit f6425fa) trained for four updates,
with a checkpoint every two, kept so that later releases are tested against checkpoints the
release really wrote (``tests/train/test_release_checkpoint.py``); ``run/dev_logits.json`` holds what the release's
model computed on the dev split from each checkpoint.

Run from the repository root with that release's code first on the path, e.g.::

    git archive f6425fa | tar -x -C /tmp/cn3-release
    PYTHONPATH=/tmp/cn3-release .venv/bin/python tests/train/release_run/make.py

Its data are made-up questions (:func:`write_data`), prepared into ``prepared/`` relative to the
working directory, so the run's config names no absolute path.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: what the run was trained with (the test resumes and retrains with the same)
OVERRIDES = ["model.word_dim=8", "model.hidden=8", "model.energy_dim=4", "model.mlp_hidden=8", "model.char=none",
             "model.pos_dim=0", "model.spell_dim=0", "train.num_threads=1", "train.batch_size=8", "train.epochs=1",
             "train.ema=0.9", "train.checkpoint_every=2", "train.evals_per_epoch=2"]
#: updates in the kept run (its latest.pt), and in the straight run a resumed one is compared with
STEPS_BEFORE, STEPS = 2, 4

SUBJECTS = ["the river", "a king", "this city", "the moon", "your dog", "the first car", "a small bird", "the war"]
TEMPLATES = {"LOC": "where is {} ?", "HUM": "who named {} ?", "NUM": "how old is {} ?", "DESC": "what is {} ?"}


def write_data(folder: Path) -> dict[str, Path]:
    """``train.tsv`` (32 questions) and ``dev.tsv`` (8) in ``folder``: a label and its template
    around a subject; the same files every time."""
    rng = random.Random(7)
    rows = [(TEMPLATES[label].format(subject), label) for label in TEMPLATES for subject in SUBJECTS]
    rng.shuffle(rows)
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, part in (("train", rows[:24]), ("dev", rows[24:])):
        files[split] = folder / f"{split}.tsv"
        files[split].write_text("text\tlabel\n" + "".join(f"{t}\t{lab}\n" for t, lab in part), encoding="utf-8")
    return files


def prepare_data(root: Path) -> Path:
    """The run's prepared dataset, built under ``root`` as ``prepared/questions``."""
    from data_prep.prepare import PrepareSettings, prepare
    from data_prep.taskspec import TaskOptions

    files = write_data(root / "questions")
    prepare(PrepareSettings(task="custom", out=root / "prepared" / "questions", annotator="none",
                            options=TaskOptions(files=files, format="tsv")))
    return Path("prepared") / "questions"


def config(prepared: Path, *extra: str):
    from cn3.sentence.resolve import resolve_config

    return resolve_config("custom", None, {"data.prepared": prepared}, [*OVERRIDES, *extra])


def dev_logits(run: Path, prepared: Path, which: str) -> list[list[float]]:
    """The logits of the run's ``which`` checkpoint (``best``, ``latest``) on the dev split, in dataset order."""
    import torch

    from cn3.runs.layout import RunDir
    from cn3.sentence.inference import load_model, scored_batches
    from data_prep.dataset import load_prepared

    model = load_model(RunDir(run), torch.device("cpu"), which=which).model
    logits = {}
    for _, out, rows in scored_batches(model, load_prepared(prepared).splits["dev"], torch.device("cpu")):
        logits.update({i: out.logits[row].tolist() for row, i, _ in rows})
    return [logits[i] for i in sorted(logits)]


def main() -> None:
    import cn3
    from cn3.kinds import train

    print(f"cn3 {cn3.__version__} from {Path(cn3.__file__).parent}", file=sys.stderr)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "cn3-release-run"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    os.chdir(work)
    prepared = prepare_data(work)
    train(config(prepared, f"train.max_steps={STEPS_BEFORE}"), Path("run"), device_name="cpu")
    logits = {which: dev_logits(Path("run"), prepared, which) for which in ("best", "latest")}
    (work / "run" / "dev_logits.json").write_text(json.dumps(logits, indent=1) + "\n", encoding="utf-8")
    out = HERE / "run"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(work / "run", out, ignore=shutil.ignore_patterns("curves.png", "*.lock"))


if __name__ == "__main__":
    main()
