"""A run's training state: where it is, and the best evaluation so far."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass


@dataclass
class TrainState:
    """Everything besides weights, optimizer and RNG streams that resuming needs; ``latest.pt`` and
    ``best.pt`` carry it as the plain dict of :meth:`state_dict`.

    Args:
        epoch: completed epochs.
        batch_in_epoch: batches of the current epoch done.
        step: optimizer updates done.
        best_score, best_step, best_epoch: the best dev evaluation so far and when it was made.
        bad_evals: evaluations since the last improvement (early stopping counts them).
        eval_due: an evaluation was due when the state was saved (an interrupted evaluation is redone).
        eval_train_loss: the train loss that evaluation reports.
        seconds: training time so far, across resumes.
        best_written: ``best.pt`` exists (kept here so that every torchrun rank knows it without a
            shared file system).
        world_size: the processes that train the run; a resumed run must have as many.
    """

    epoch: int = 0
    batch_in_epoch: int = 0
    step: int = 0
    best_score: float = -math.inf
    best_step: int = 0
    best_epoch: int = 0
    bad_evals: int = 0
    eval_due: bool = False
    eval_train_loss: float = 0.0
    seconds: float = 0.0
    best_written: bool = False
    world_size: int = 1

    def state_dict(self) -> dict:
        """The state as a plain dict (what a checkpoint's ``state`` entry holds), fields in order."""
        return dataclasses.asdict(self)

    def load_state_dict(self, saved: dict) -> None:
        """Take the fields ``saved`` has (a checkpoint's ``state``); the others keep their values, so
        a checkpoint written before a field existed loads with its default. Unknown keys are ignored."""
        for field in dataclasses.fields(self):
            if field.name in saved:
                setattr(self, field.name, saved[field.name])
