"""The ``telo`` command line (click + rich). Thin: it parses, calls the public API, and renders.

The console script is :func:`telo.cli.main.main` (pyproject). The package defines nothing itself: a function named
``main`` here would be shadowed by the submodule :mod:`telo.cli.main` the moment that is imported (the crash
suite's fork server imports it ahead of time, and its children then called a module)."""
