"""Every read of the time, of a random source or of a fresh UUID in telo goes through ``telo.clock`` (its
docstring says which clock a caller wants): a direct read elsewhere bypasses the clock tests inject, and a
replay could see a value its first execution did not. This scans telo's source and fails on a new one."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import telo

SRC = Path(telo.__file__).resolve().parent

# Modules whose every use draws randomness.
RANDOM_MODULES = frozenset({"random", "secrets"})
# module -> the functions of it that read the time or draw randomness
READS = {
    "time": frozenset({"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns",
                       "process_time", "process_time_ns", "thread_time", "thread_time_ns", "clock_gettime",
                       "clock_gettime_ns"}),
    "uuid": frozenset({"uuid1", "uuid4", "uuid6", "uuid7", "uuid8"}),
    "os": frozenset({"urandom", "getrandom"}),
}
# Reading "now" through the datetime classes: datetime.now(), datetime.datetime.utcnow(), date.today(), ...
NOW_METHODS = frozenset({"now", "utcnow", "today"})
DATETIME_NAMES = frozenset({"datetime", "date"})

# file (relative to src/telo) -> why it may read directly. Keep each entry's reason true.
ALLOWED = {
    "clock.py": "the one source of time, ids and randomness: everything else calls it",
}


def direct_reads(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, what) for each direct time/random read in ``tree``."""
    aliases: dict[str, str] = {}  # local name -> the module it is (import time as t)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root in RANDOM_MODULES:
                    yield node.lineno, f"import {alias.name}"
                if alias.name in READS:
                    aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            root = node.module.split(".")[0]
            if root in RANDOM_MODULES:
                yield node.lineno, f"from {node.module} import ..."
            for alias in node.names:
                if alias.name in READS.get(node.module, ()):
                    yield node.lineno, f"from {node.module} import {alias.name}"
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        base = node.value
        if isinstance(base, ast.Name) and node.attr in READS.get(aliases.get(base.id, ""), ()):
            yield node.lineno, f"{base.id}.{node.attr}"
        elif node.attr in NOW_METHODS and (
            (isinstance(base, ast.Name) and base.id in DATETIME_NAMES)
            or (isinstance(base, ast.Attribute) and base.attr in DATETIME_NAMES)
        ):
            yield node.lineno, f"{ast.unparse(base)}.{node.attr}"


def test_the_scan_sees_each_kind_of_read() -> None:
    sample = "\n".join([
        "import time as t", "import uuid", "import datetime", "from datetime import date", "import random",
        "from secrets import token_hex", "from time import monotonic",
        "t.monotonic()", "uuid.uuid4()", "datetime.datetime.now()", "date.today()", "uuid.uuid5(ns, 'x')",
        "t.sleep(1)",
    ])
    found = [what for _, what in direct_reads(ast.parse(sample))]
    assert sorted(found) == sorted([
        "import random", "from secrets import ...", "from time import monotonic", "t.monotonic",
        "uuid.uuid4", "datetime.datetime.now", "date.today",
    ])


def test_no_direct_time_or_random_reads_outside_the_clock() -> None:
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 100, f"scanned only {len(files)} files under {SRC}"
    found = []
    for path in files:
        name = path.relative_to(SRC).as_posix()
        if name in ALLOWED:
            continue
        for line, what in direct_reads(ast.parse(path.read_text(), str(path))):
            found.append(f"src/telo/{name}:{line}: {what}")
    assert not found, ("read the time, randomness and fresh ids through telo.clock (an injected Clock, or "
                       "SYSTEM_CLOCK for real time) instead of directly:\n" + "\n".join(found))


def test_every_allowed_file_exists() -> None:
    assert all((SRC / name).is_file() for name in ALLOWED)
