"""The CEL value domain, the typed-frame codec and the plain encoding (spec §6)."""

from telo.values.types import CelMap, Duration, Timestamp, Uint

__all__ = ["CelMap", "Duration", "Timestamp", "Uint"]
