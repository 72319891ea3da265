"""The encoder zoo: every sentence encoder of the three papers behind one interface and one registry.

Importing this package registers them all (see :mod:`cn3.encoders.registry` for the interface).
"""

from cn3.encoders import (  # noqa: F401  (imported for their registrations)
    bag,
    cn3_encoder,
    cnn,
    lstmn,
    pdgraph,
    recurrent,
    san,
    self_attentive,
    treelstm,
)
from cn3.encoders.registry import (  # noqa: F401
    ENCODERS,
    EncoderArgs,
    EncoderSpec,
    build_encoder,
    check_options,
    check_serves,
    get_spec,
    ignored_options,
    ignored_overrides,
)
