"""The ``sql`` module's kinds: ``Sql.Connection``, ``Sql.Transaction``, ``Sql.Query``, ``Sql.Exec`` (spec §8;
reference §4 "Collapse", §5 "Suspension guard", §7 "Transactions", §9).

``Sql.Transaction`` runs its body inside ONE database transaction, in a zone declaring ``atomic`` and
``noSuspend``. How a durable run journals that body is decided here, by which transaction is opened:

* the connection names the database the run's journal writes to (the same SQLite file, the same PostgreSQL
  database) → the transaction is opened through the JOURNAL STORE (:meth:`telo.journal.store.Store.
  transaction`), so the body's journal appends join it, and that store transaction rides on the zone. The
  engine then asks ``writes_inside`` and gets yes: the region is journaled per step, exactly once — a
  rollback discards the effects and their entries together, and the outer step's entry is written after
  COMMIT (spec §8.2);
* otherwise (another database, a file journal, no durable run) → a plain driver transaction, which no
  journal writes into: the region collapses, at least once (spec §8.1).

Either way the run handle reports the resolution (``durable.zone.mode``, and ``collapsedRegions`` for a
collapse: spec §8.3). The statements (:mod:`telo.kinds.sql_statements`) inside the body find the open
transaction of their connection on the invocation context (``sql.tx``) and run on it; outside one, each
statement commits on its own. Membership is ambient and per connection: whatever the body reaches — its own
steps, or a ``Run.Sequence`` it names with ``steps: !ref`` — joins.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from telo.engine.context import current, derive, entered
from telo.engine.interpreter import run_steps
from telo.engine.steps import compile_steps
from telo.engine.zones import ATOMIC, NO_SUSPEND, Zone
from telo.errors import Code, TeloError
from telo.kinds import sql_drivers as drivers
from telo.manifest import Cel, Ref, Template
from telo.runtime.resource import Resource
from telo.specs.sql import ATOMIC_REASON, NO_SUSPEND_REASON

if TYPE_CHECKING:
    from telo.runtime.resource import Host

T = TypeVar("T")
R = TypeVar("R")

#: The invocation-context key under which an open transaction travels to the statements of its body.
TX_KEY = "sql.tx"
#: The step a body given as ``!ref executable`` runs as (its journal path: ``<transaction step>/body``).
BODY_STEP = "body"


@dataclass(frozen=True, slots=True, eq=False)
class OpenTransaction:
    """An open transaction as the body's statements see it: whose connection it is, the driver connection
    holding it, and the lock serialising statements on that connection (the journal's own, when joined)."""

    owner: Any  # the Sql.Connection resource (compared by identity: two resources are two databases' pools)
    connection: Any
    lock: Any  # threading.RLock; for a joined SQLite journal transaction, the store's lock for it
    journaled: bool


def open_transaction(owner: Any) -> OpenTransaction | None:
    """The innermost transaction open on the ``Sql.Connection`` ``owner`` in the current invocation context."""
    for key, value in reversed(current().extras):
        if key == TX_KEY and isinstance(value, OpenTransaction) and value.owner is owner:
            return value
    return None


class Connection(Resource):
    """``Sql.Connection {url}``: a database, opened lazily; connections are pooled per resource."""

    kind = "Sql.Connection"

    def __init__(self, app: Host, name: str, config: Mapping[str, Any], module: str | None) -> None:
        super().__init__(app, name, config, module)
        self._url: str | None = None
        self._target: drivers.SqlTarget | None = None
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._closed = False

    @property
    def url(self) -> str:
        """The configured URL, evaluated once (``compile``: against variables and secrets — not the resources'
        snapshots, which include this one's)."""
        if self._url is None:
            raw = self.config.get("url")
            if isinstance(raw, Cel | Template):
                app = self.app.manifest.application
                scope = {"variables": dict(app.variables), "secrets": dict(app.secrets), "resources": {}}
                raw = self.app.compiler.value(raw, where=f"{self.kind} {self.name!r}.url").evaluate(scope)
            self._url = raw if isinstance(raw, str) else ""
        return self._url

    @property
    def target(self) -> drivers.SqlTarget:
        if self._target is None:
            self._target = drivers.parse_url(self.url, self.app.base_dir, f"{self.kind} {self.name!r}")
        return self._target

    async def init(self) -> None:
        _ = self.target  # a malformed URL fails at boot; the database itself is opened on first use

    def snapshot(self) -> Any:
        return {"url": self.url}

    def take(self) -> Any:
        """A pooled autocommit connection (opened on demand). Blocking: call it from a worker thread."""
        with self._lock:
            if self._closed:
                raise TeloError(Code.SQL_FAILED, f"{self.kind} {self.name!r} is closed")
            if self._idle:
                return self._idle.pop()
        return drivers.connect(self.target)

    async def acquire(self) -> Any:
        """:meth:`take` for the kinds, on the event loop: a connection for one statement or one transaction, given
        back with :meth:`release`. Call this, not ``take`` on a worker thread: a bounded connection
        (``Postgres.Connection``'s pool, an in-memory ``SQLite.Connection``) makes it wait, and its subclass waits
        apart from the loop's few default worker threads — which the holders need to finish and give theirs back
        — and gives back a connection handed out after its caller was cancelled (telo.kinds.sql_connections)."""
        return await asyncio.to_thread(self.take)

    async def release(self, conn: Any) -> None:
        await asyncio.to_thread(self.give, conn)

    def give(self, conn: Any) -> None:
        if not drivers.healthy(conn) or drivers.in_transaction(conn):
            drivers.close(conn)  # a connection left mid-transaction must not leak it into the next user
            return
        with self._lock:
            if not self._closed:
                self._idle.append(conn)
                return
        drivers.close(conn)

    async def teardown(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            drivers.close(conn)


class OnConnection(Resource):
    """Shared by the kinds that name a ``connection:`` (the transaction here, the statements in
    :mod:`telo.kinds.sql_statements`)."""

    @property
    def where(self) -> str:
        return f"{self.kind} {self.name!r}"

    @property
    def connection(self) -> Connection:
        resource = self.app.resource_for(self.config["connection"], where=f"{self.where}.connection")
        if not isinstance(resource, Connection):
            raise TeloError(Code.RESOURCE_NOT_FOUND, f"{self.where}: `connection` must name a Sql.Connection, not "
                            f"{resource.kind}")
        return resource


class Transaction(OnConnection):
    """``Sql.Transaction {connection, steps, inputs?}``: the body in one database transaction (module docstring).

    The body's ``inputs`` are the evaluated ``inputs:`` mapping, or the call's inputs when there is none. A body
    given as a list of steps returns ``{steps}``, like ``Durable.Idempotent``; one given as ``!ref executable``
    (upstream's form) runs as the single step ``body`` invoking it with the body's inputs — dispatched, journaled
    and zoned like any step — and its result is the transaction's.
    """

    kind = "Sql.Transaction"

    async def init(self) -> None:
        body = self.config.get("steps", [])
        self.body_ref = isinstance(body, Ref)
        if isinstance(body, Ref):
            body = [{"name": BODY_STEP, "invoke": body, "inputs": Cel("inputs", body.pos)}]
        self.steps = compile_steps(body, self.app.compiler, where=f"{self.where}.steps")
        self.inputs = self.field("inputs")

    async def invoke(self, inputs: Any) -> Any:
        body_inputs = self.inputs.evaluate(self.call_scope(inputs)) if self.inputs is not None else (
            inputs if inputs is not None else {})
        scope: dict[str, Any] = {**self.app.module_scope(), "inputs": body_inputs, "steps": {}}
        await in_transaction(self.kind, self.name, self.connection,
                             lambda: run_steps(self.steps, scope, self.app.services))
        if self.body_ref:
            return scope["steps"].get(BODY_STEP, {}).get("result")
        return {"steps": scope["steps"]}


async def in_transaction(kind: str, resource: str, conn: Connection, body: Callable[[], Awaitable[Any]]) -> None:
    """Run ``body`` in one database transaction on ``conn`` (module docstring), inside an atomic, no-suspend
    zone of ``kind``/``resource``: ``Sql.Transaction``'s body, and a ``Durable.Consume`` batch's steps with its
    cursor (telo.kinds.consume)."""
    ctx = current()
    store = _journal_store(ctx.handle)
    enclosing = open_transaction(conn)
    opened: Any = None  # a pooled connection this transaction took, to give back at the end
    if store is not None and drivers.same_database(conn.target, store):
        # The journal writes into this database: open the transaction THROUGH the store, so the body's
        # journal appends join it and `writes_inside` attests the zone (spec §8.2). Nested, the store
        # makes it a SAVEPOINT of the enclosing one.
        flush = getattr(ctx.handle, "flush", None)
        if flush is not None:
            # The run's deferred entries commit through the store's writer, which would wait for this
            # transaction's write lock while the body waited for them: they go first.
            await flush()
        manager: AbstractContextManager[Any] = store.transaction()
        journaled = True
    elif enclosing is not None:
        manager = drivers.plain_transaction(conn.target, enclosing.connection, enclosing.lock, nested=True)
        journaled = False
    else:
        opened = await conn.acquire()
        manager = drivers.plain_transaction(conn.target, opened, threading.RLock(), nested=False)
        journaled = False

    async def run(tx: Any) -> None:
        lock = getattr(tx, "lock", None) or threading.RLock()
        visible = OpenTransaction(conn, tx.connection, lock, journaled)
        zone = Zone(kind, {ATOMIC: ATOMIC_REASON, NO_SUSPEND: NO_SUSPEND_REASON}, resource=resource,
                    transaction=tx)
        with entered(derive(zone=zone, extra=(TX_KEY, visible))):
            await body()

    mark = _entries_mark(ctx.handle) if journaled else None
    try:
        await _within(manager, run)
    except BaseException:
        if mark is not None:
            _forget_rolled_back(ctx.handle, mark, ctx.path)
        raise
    finally:
        if opened is not None:
            await conn.release(opened)


async def _within(manager: AbstractContextManager[T], body: Callable[[T], Awaitable[R]]) -> R:
    """Run async ``body`` inside a synchronous context manager whose enter and exit block (BEGIN may wait on
    another writer's lock, COMMIT on the disk) — on worker threads, so the event loop never stalls.

    The manager makes its transaction ambient through context variables (the journal stores do), so enter,
    body and exit all run in ONE copied context: the enter's variables are what the body's appends see.
    """
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    value = await loop.run_in_executor(None, ctx.run, manager.__enter__)
    try:
        result = await asyncio.create_task(_call(body, value), context=ctx)
    except BaseException as exc:
        suppressed = await loop.run_in_executor(None, ctx.run, manager.__exit__, type(exc), exc, exc.__traceback__)
        if not suppressed:
            raise
        raise TeloError(Code.SQL_FAILED, "the transaction swallowed its body's failure") from exc
    await loop.run_in_executor(None, ctx.run, manager.__exit__, None, None, None)
    return result


async def _call(body: Callable[[T], Awaitable[R]], value: T) -> R:
    return await body(value)


def _journal_store(handle: Any) -> Any:
    """The journal store a durable run writes to, or ``None`` (no run, or a handle without a local store).

    The run-handle protocol has no store (a remote backend's handle may journal anywhere); the local
    backend's handle exposes its :class:`~telo.durable.aio.AsyncStore`, whose ``sync`` is the store.
    """
    if handle is None:
        return None
    return getattr(getattr(handle, "store", None), "sync", None)


def _entries_mark(handle: Any) -> int | None:
    mark = getattr(handle, "entries_mark", None)
    return mark() if callable(mark) else None


def _forget_rolled_back(handle: Any, mark: int, path: str | None) -> None:
    """The rollback took the body's entries with it; the handle must stop replaying them, or a retry of this
    step would "replay" inner steps whose effects no longer exist (exactly-once inverted)."""
    forget = getattr(handle, "forget_since", None)
    if callable(forget):
        forget(mark, path)
