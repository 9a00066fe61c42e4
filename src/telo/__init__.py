"""telo-python: durable execution for Telo manifests (journal + deterministic replay)."""

__version__ = "0.1.0"
