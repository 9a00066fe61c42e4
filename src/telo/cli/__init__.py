"""The ``telo`` command line (click + rich). Thin: it parses, calls the public API, and renders."""


def main() -> None:
    """The ``telo`` console script (pyproject: ``telo.cli:main``); :mod:`telo.cli.main` is imported only now, so
    that importing a command module does not import every other one."""
    from telo.cli.main import main as run

    run()


__all__ = ["main"]
