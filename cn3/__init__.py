"""cn3: learning task-specific sentence graphs (CN3, hybrid local/global attention, ON-LSTM+SAN)."""

from data_prep.version import __version__

__all__ = ["__version__"]
