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
            "include": {**_GLOBS, "description": "Glob patterns of the test manifests to run, relative to this one."},
            "exclude": {**_GLOBS, "description": "Glob patterns of manifests to leave out."},
            "concurrency": {"type": "integer", "minimum": 1, "default": 3,
                            "description": "How many test manifests run at once."},
            "filter": {"type": "string",  # substring of a test's path
                       "description": "Run only the tests whose path contains this text."},
        },
        ("include",),
    ),
    "runnable",
    description="A suite of test manifests, each run in its own process.",
    example="""\
kind: Test.Suite
metadata: { name: all }
include: ["**/*.yaml"]
exclude: [fixtures/**]
""",
)

TEST: ModuleSpec = module("test", M, SUITE)
