"""Run directories: their layout (:mod:`.layout`), the prediction records a finished run keeps
(:mod:`.records`), grid compaction (:mod:`.compaction`), the kinds of run (:mod:`.kinds`) and
the upgrading of what earlier releases wrote (:mod:`.compat`)."""
