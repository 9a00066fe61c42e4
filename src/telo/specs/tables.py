"""The built-in module table and kind table: every built-in kind spec, as Python data (no YAML is read at import)."""

from __future__ import annotations

from collections.abc import Mapping

from .assert_ import ASSERT
from .console import CONSOLE
from .durable import DURABLE
from .durable_local import DURABLE_LOCAL
from .journals import JOURNAL_FILE, JOURNAL_POSTGRES, JOURNAL_SQLITE
from .model import KindSpec, ModuleSpec
from .python import PYTHON
from .run import RUN
from .scheduler import SCHEDULER
from .sql import SQL
from .sql_backends import POSTGRES, SQL_SQLITE, SQLITE
from .telo import TELO
from .test import TEST
from .timer import TIMER

BUILTIN_MODULES: Mapping[str, ModuleSpec] = {
    m.import_name: m
    for m in (RUN, CONSOLE, TIMER, DURABLE, DURABLE_LOCAL, JOURNAL_FILE, JOURNAL_SQLITE, JOURNAL_POSTGRES,
              PYTHON, ASSERT, SQL, POSTGRES, SQLITE, SQL_SQLITE, TEST, SCHEDULER)
}
# `sqlite` before `sql-sqlite`: a library named `SQLite` (upstream's copy of either) is the newer module, a superset.

# Every built-in kind by canonical name (`DurableLocal.Workflow`), the `Telo.*` kinds included.
BUILTIN_KINDS: Mapping[str, KindSpec] = {
    k.canonical: k for m in (*BUILTIN_MODULES.values(), TELO) for k in m.kinds.values()
}

__all__ = ["BUILTIN_KINDS", "BUILTIN_MODULES", "TELO"]
