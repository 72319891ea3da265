"""cn3: learning task-specific sentence graphs (CN3, hybrid local/global attention, ON-LSTM+SAN)."""

__version__ = "0.1.0"
