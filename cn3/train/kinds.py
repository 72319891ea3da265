"""What identifies a kind of run in its files, with no imports: the ``kind`` of its checkpoints and
the config keys a resumed run of it may change. Trainers, loaders and the kinds (:mod:`cn3.kinds`) all read
these names here, so that none of them imports another for a string."""

from __future__ import annotations

#: ``kind`` of a sentence-task checkpoint (``cn3 train``)
SENTENCE_CHECKPOINT = "cn3-sentence"
#: ``kind`` of a translation checkpoint (``cn3 nmt train``)
TRANSLATION_CHECKPOINT = "cn3-nmt"

#: ``(section, key)`` pairs every resumed run may change: how long to go on, how often to
#: checkpoint or log, CPU threads, loader workers, TensorBoard. None changes what is computed.
LOOP_RESUMABLE = frozenset({("train", "epochs"), ("train", "max_steps"), ("train", "patience"),
                            ("train", "num_threads"), ("train", "checkpoint_every"), ("train", "log_every"),
                            ("train", "tensorboard"), ("train", "loader_workers"), ("train", "device_batches")})
#: what a resumed sentence run may change
SENTENCE_RESUMABLE = LOOP_RESUMABLE
#: what a resumed translation run may change: also how its final scores are searched and where its
#: data lives
TRANSLATION_RESUMABLE = LOOP_RESUMABLE | {("train", k) for k in ("eval_batch_size", "final_beam", "final_splits",
                                                                 "alpha")} | {("data", "data")}
