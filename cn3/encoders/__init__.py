"""The encoder zoo: every sentence encoder of the three papers behind one interface and one registry.

Importing this package registers them all (see :mod:`cn3.encoders.registry` for the interface).
"""

from cn3.encoders import (  # noqa: F401  (imported for their registrations)
    bag,
    cnn,
    cn3_encoder,
    lstmn,
    pdgraph,
    recurrent,
    self_attentive,
    san,
    treelstm,
)
from cn3.encoders.registry import (  # noqa: F401
    ENCODERS,
    EncoderArgs,
    EncoderSpec,
    build_encoder,
    check_serves,
    get_spec,
)

#: display order (``cn3 encoders``): the CN3 paper's Table 3 rows, then Xu et al.'s and Hao et al.'s encoders
TABLE_ORDER = ("nbow", "cnn", "rnn", "lstm", "treelstm", "pdgraph", "selfatt1", "selfatt2", "transformer", "cn3",
               "hybrid", "local", "onlstm", "onlstm_san", "lstm_san")
for _name in TABLE_ORDER:  # re-insert in that order (the registry is a dict, filled at import)
    ENCODERS[_name] = ENCODERS.pop(_name)
