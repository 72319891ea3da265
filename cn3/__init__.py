"""cn3: learning task-specific sentence graphs (CN3, hybrid local/global attention, ON-LSTM+SAN)."""

from cn3.util.version import __version__

__all__ = ["__version__"]
