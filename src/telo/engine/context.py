"""How the run handle, the durable path and the open zones travel (spec §3).

They ride one ``contextvars.ContextVar``, so asyncio tasks and threads spawned from a dispatch inherit them,
and a nested body continues its parent's path without any composer knowing about durability. Every rebuild
goes through :func:`derive` — spec §3: a fresh object at a rebuild site would drop what it does not restate.
A detached dispatch and a workflow body start from :func:`root`, which carries no handle, no path and no
zones (spec §7.3: a body starts outside every enclosing zone).
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, fields
from types import TracebackType
from typing import TYPE_CHECKING, Any

from telo.engine.zones import Zone

if TYPE_CHECKING:
    from telo.engine.handle import RunHandle


class CancelScope:
    """A cooperative cancellation flag a run's body checks at each journaling point."""

    __slots__ = ("_parent", "cancelled", "reason")

    def __init__(self, parent: CancelScope | None = None) -> None:
        self.cancelled = False
        self.reason: str | None = None
        self._parent = parent

    def cancel(self, reason: str = "cancelled") -> None:
        self.cancelled, self.reason = True, reason

    def is_cancelled(self) -> bool:
        return self.cancelled or (self._parent is not None and self._parent.is_cancelled())


@dataclass(frozen=True, slots=True)
class InvokeContext:
    handle: RunHandle | None = None
    path: str | None = None  # the durable path of the step that dispatched the current body
    zones: tuple[Zone, ...] = ()
    cancel: CancelScope | None = None
    run_id: str | None = None
    attempt: int = 1  # the retry attempt of the enclosing invoke (1-based), for step contexts
    extras: tuple[tuple[str, Any], ...] = ()  # kind-private ambient values (e.g. an open SQL transaction)

    def extra(self, key: str, default: Any = None) -> Any:
        for k, v in reversed(self.extras):
            if k == key:
                return v
        return default


# Extras the durable backend hands the engine around one step's effect (event-log spec §2):
RESUME_ATTEMPT = "effect.resume"  # (attempt index to start at, epoch ms before which it must not start)
ON_UNCONFIRMED = "effect.onUnconfirmed"  # the step's own `onUnconfirmed` policy, read by the handle
# Set while a step with a retry policy runs its target: the steps inside may run again in its next attempt, so
# their failures are not receipts (the retried step's final outcome is; telo.durable.failures).
RETRIED = "effect.retried"

_ROOT = InvokeContext()
_CURRENT: contextvars.ContextVar[InvokeContext] = contextvars.ContextVar("telo_invoke_context", default=_ROOT)


def current() -> InvokeContext:
    return _CURRENT.get()


def root() -> InvokeContext:
    return _ROOT


def derive(base: InvokeContext | None = None, *, zone: Zone | None = None, extra: tuple[str, Any] | None = None,
           **changes: Any) -> InvokeContext:
    """The one way to build a context from another: unchanged members carry over."""
    ctx = base if base is not None else current()
    if zone is not None:
        changes["zones"] = (*ctx.zones, zone)
    if extra is not None:
        changes["extras"] = (*ctx.extras, extra)
    if not changes:
        return ctx
    # Spelled out rather than ``dataclasses.replace``, which introspects the fields on every call: a step
    # derives several contexts, so this is on the hot path. ``_FIELDS`` keeps the refusal of an unknown member.
    if not _FIELDS.issuperset(changes):
        raise TypeError(f"InvokeContext has no member(s) {sorted(set(changes) - _FIELDS)}")
    get = changes.get
    return InvokeContext(
        get("handle", ctx.handle), get("path", ctx.path), get("zones", ctx.zones), get("cancel", ctx.cancel),
        get("run_id", ctx.run_id), get("attempt", ctx.attempt), get("extras", ctx.extras),
    )


_FIELDS = frozenset(f.name for f in fields(InvokeContext))  # derive() restates each: a test holds them equal


class entered:
    """Make ``ctx`` current for the ``with`` block (a class, not ``@contextmanager``: entered once per dispatch,
    the generator machinery was a measurable share of a step)."""

    __slots__ = ("_ctx", "_token")

    def __init__(self, ctx: InvokeContext) -> None:
        self._ctx = ctx

    def __enter__(self) -> InvokeContext:
        self._token = _CURRENT.set(self._ctx)
        return self._ctx

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        _CURRENT.reset(self._token)
