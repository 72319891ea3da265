"""Where data comes from and where prepared datasets go."""

from __future__ import annotations

import os
from pathlib import Path

from cn3.util.errors import DataError

REPO_ROOT = Path(__file__).resolve().parents[1]


def data_root(value: str | Path | None = None) -> Path:
    """The data root: ``--data`` if given, else ``$CN3_DATA``, else ``../shared/data``.

    ``../shared/data`` is tried relative to the working directory first, then relative to the
    source checkout (so tests and scripts work from any directory).
    """
    if value is not None:
        root = Path(value).expanduser()
    elif os.environ.get("CN3_DATA"):
        root = Path(os.environ["CN3_DATA"]).expanduser()
    else:
        candidates = [Path("../shared/data"), REPO_ROOT.parent / "shared" / "data"]
        root = next((c for c in candidates if c.is_dir()), candidates[0])
    if not root.is_dir():
        raise DataError("data root not found; pass --data DIR or set the CN3_DATA environment variable", root)
    return root.resolve()


def default_prepared_dir(name: str) -> Path:
    """``$CN3_PREPARED/<name>`` if set, else ``prepared/<name>`` in the working directory."""
    base = Path(os.environ.get("CN3_PREPARED", "prepared"))
    return base / name
