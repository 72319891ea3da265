"""The encoder zoo: every sentence encoder of the three papers behind one interface and one registry.

Importing this package registers them all (see :mod:`cn3.encoders.registry` for the interface): every
module of the package is imported, in name order, so a new encoder is one module with its ``@register``
(:mod:`cn3.util.encoder_names` reads the same modules' names and levels without importing torch).
"""

import importlib
import pkgutil

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

for _module in sorted(info.name for info in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
