"""The version of the cn3 distribution (the ``cn3``, ``cli`` and ``data_prep`` packages ship together).

It lives here, in the bottom layer, so that ``data_prep`` can record it in manifests and fingerprints
without importing ``cn3``; ``cn3.__version__`` re-exports it and pyproject.toml reads it statically.
"""

__version__ = "0.3.0"
