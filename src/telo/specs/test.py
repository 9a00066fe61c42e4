"""Module ``test`` (library ``Test``): ``Test.Suite`` (reference §14)."""

from __future__ import annotations

from .common import config
from .model import KindSpec, ModuleSpec, module

M = "Test"
_GLOBS = {"type": "array", "items": {"type": "string"}}

SUITE = KindSpec(
    M, "Suite",
    config(
        {
            "include": _GLOBS,
            "exclude": _GLOBS,
            "concurrency": {"type": "integer", "minimum": 1, "default": 3},
            "filter": {"type": "string"},  # substring of a test's path
        },
        ("include",),
    ),
    "runnable",
)

TEST: ModuleSpec = module("test", M, SUITE)
