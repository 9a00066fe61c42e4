"""The ``telo`` command line (click + rich). Thin: it parses, calls the public API, and renders."""

from telo.cli.main import main

__all__ = ["main"]
