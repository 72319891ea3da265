"""Readers, annotators and graph building: real text in, cached attributed sentence graphs out.

Use ``data_prep.prepare.prepare(PrepareSettings(...))`` to build a dataset and
``data_prep.load_prepared(dir)`` to read one.
"""

from cn3.util.errors import DataError

__all__ = ["DataError", "load_prepared"]


def __getattr__(name):
    # Lazy, so that importing data_prep (e.g. for DataError) does not pull in torch and PyG.
    if name == "load_prepared":
        from data_prep.dataset import load_prepared

        return load_prepared
    raise AttributeError(name)
