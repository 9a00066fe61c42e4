"""telo-python: durable execution for Telo manifests (journal + deterministic replay).

The Python API (docs/python-api.md) is reachable from here — ``telo.load``, ``telo.App``, ``telo.AsyncApp``,
``telo.kind``, the result types — and imported on first use (module ``__getattr__``), so ``import telo`` stays
cheap for the CLI and for code that needs only a submodule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module defining it
_LAZY = {
    "load": "telo.api",
    "App": "telo.api",
    "AsyncApp": "telo.api",
    "RunRef": "telo.api",
    "RunStatus": "telo.api",
    "RunResult": "telo.api",
    "RunError": "telo.api",
    "RunList": "telo.api",
    "Resolution": "telo.api",
    "Scheduled": "telo.api",
    "ScheduleView": "telo.api",
    "Delivery": "telo.api",
    "JournalEntry": "telo.api",
    "Checkpoint": "telo.api",
    "kind": "telo.api.kinds",
    "StepContext": "telo.runtime.resource",
    "TeloError": "telo.errors",
    "FakeClock": "telo.clock",
    "NOT_FOUND": "telo.durable.effects",
}

__all__ = [
    "NOT_FOUND",
    "App",
    "AsyncApp",
    "Checkpoint",
    "Delivery",
    "FakeClock",
    "JournalEntry",
    "Resolution",
    "RunError",
    "RunList",
    "RunRef",
    "RunResult",
    "RunStatus",
    "ScheduleView",
    "Scheduled",
    "StepContext",
    "TeloError",
    "__version__",
    "kind",
    "load",
]

if TYPE_CHECKING:
    from telo.api import (
        App,
        AsyncApp,
        Checkpoint,
        Delivery,
        JournalEntry,
        Resolution,
        RunError,
        RunList,
        RunRef,
        RunResult,
        RunStatus,
        Scheduled,
        ScheduleView,
        load,
    )
    from telo.api.kinds import kind
    from telo.clock import FakeClock
    from telo.durable.effects import NOT_FOUND
    from telo.errors import TeloError
    from telo.runtime.resource import StepContext


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'telo' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain attribute lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
