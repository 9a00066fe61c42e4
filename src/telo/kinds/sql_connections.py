"""``Postgres.Connection`` and ``SQLite.Connection``: upstream's connection kinds (modules ``postgres`` and ``sqlite``,
or its older name ``sql-sqlite``), both ``Sql.Connection``s — subclasses of :class:`telo.kinds.sql.Connection`, so
every ``Sql.*`` statement and ``Sql.Transaction`` takes them, and the loader's ``ref("Sql.Connection")`` slots do
too (their specs extend it). What differs from ``Sql.Connection {url}`` is where the database is named, how
connections are held, and the snapshot:

* ``Postgres.Connection {connectionString, pool}`` — a bounded pool (:class:`telo.kinds.sql_pool.PgPool`) of
  autocommit connections, opened at the first statement rather than at boot: a connection that only the journal
  and the transactions it journals use opens no pool (those run on the journal's own connections), and a
  manifest loaded to operate on runs connects to nothing. ``init`` checks the string and the bounds. A
  ``Sql.Transaction`` holds one connection of the pool for its duration; a statement outside one, for itself.
* ``SQLite.Connection {file}`` — a file relative to the manifest's directory (its parent directory is created at
  boot), pooled like ``Sql.Connection``'s; without ``file`` (or ``file: ":memory:"``) an in-memory database,
  which lives in ONE connection kept open until teardown, lent to one statement or transaction at a time
  (:class:`telo.kinds.sql_pool.OneConnection`).

Both wait for a bounded connection through :meth:`acquire` apart from the event loop's default threads
(:func:`telo.kinds.sql_pool.wait_apart`). The PostgreSQL ``connectionString`` usually carries a password: the
snapshot gives it as ``url`` (what ``durable-journal-postgres {connection}`` opens), and every message shows the
database without it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from telo.errors import Code, TeloError
from telo.kinds import sql_drivers as drivers
from telo.kinds import sql_pool
from telo.kinds.sql import Connection
from telo.manifest import Cel, Template
from telo.specs.durations import duration_ms
from telo.specs.sql_backends import DEFAULT_CONNECTION_TIMEOUT_MS, DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_POOL_MAX

if TYPE_CHECKING:
    from telo.runtime.resource import Host

MEMORY = ":memory:"


def _compiled(resource: Connection, key: str) -> Any:
    """A compile-time field, evaluated against variables and secrets — not the resources' snapshots, which
    include this one's."""
    raw = resource.config.get(key)
    if isinstance(raw, Cel | Template) or (isinstance(raw, Mapping) and raw):
        app = resource.app.manifest.application
        scope = {"variables": dict(app.variables), "secrets": dict(app.secrets), "resources": {}}
        raw = resource.app.compiler.value(raw, where=f"{resource.kind} {resource.name!r}.{key}").evaluate(scope)
    return raw


class PostgresConnection(Connection):
    """``Postgres.Connection``: a PostgreSQL database through a bounded pool (module docstring)."""

    kind = "Postgres.Connection"

    def __init__(self, app: Host, name: str, config: Mapping[str, Any], module: str | None) -> None:
        super().__init__(app, name, config, module)
        self._connection_string: str | None = None
        self._pg_pool: sql_pool.PgPool | None = None
        self._slots: sql_pool.Slots | None = None

    @property
    def where(self) -> str:
        return f"{self.kind} {self.name!r}"

    @property
    def url(self) -> str:
        if self._connection_string is None:
            raw = _compiled(self, "connectionString")
            if not isinstance(raw, str) or not raw.strip().startswith(("postgres://", "postgresql://")):
                shown = sql_pool.scrub(raw, raw) if isinstance(raw, str) else repr(raw)
                raise TeloError(Code.SQL_URL_INVALID, f"{self.where}.connectionString must be a postgres:// or "
                                f"postgresql:// URL, got {shown!r}",
                                hint="libpq's parameters go in the query: postgresql://user@host/db?sslmode=require")
            sql_pool.check_connection_string(raw.strip(), f"{self.where}.connectionString")
            self._connection_string = raw.strip()
        return self._connection_string

    @property
    def target(self) -> drivers.SqlTarget:
        return drivers.SqlTarget("postgres", self.url)

    def bounds(self) -> sql_pool.PoolBounds:
        """``pool``, with its defaults (spec: min 1, max 10 — or ``min`` if that is more —, idle 10 s, wait 30 s)."""
        raw = _compiled(self, "pool") or {}
        where = f"{self.where}.pool"
        try:
            lowest = int(raw.get("min", 1))
            highest = int(raw.get("max", max(DEFAULT_POOL_MAX, lowest)))
            idle = duration_ms(raw.get("idleTimeoutMs", DEFAULT_IDLE_TIMEOUT_MS))
            wait = duration_ms(raw.get("connectionTimeoutMs", DEFAULT_CONNECTION_TIMEOUT_MS))
        except (TypeError, ValueError, AttributeError) as exc:
            raise TeloError(Code.MANIFEST_VALIDATION_FAILED, f"{where}: {exc}") from None
        if lowest < 0 or highest < 1 or lowest > highest or idle < 0 or wait < 0:
            raise TeloError(Code.MANIFEST_VALIDATION_FAILED,
                            f"{where}: min {lowest} and max {highest} must hold 0 <= min <= max, max >= 1, and the "
                            "timeouts must not be negative", data={"min": lowest, "max": highest})
        return sql_pool.PoolBounds(lowest, highest, idle, wait)

    @property
    def pool(self) -> sql_pool.PgPool:
        if self._pg_pool is None:
            self._pg_pool = sql_pool.PgPool(self.url, self.bounds(), where=self.where,
                                            shown=drivers.display(self.target))
        return self._pg_pool

    async def init(self) -> None:
        _ = self.pool  # a malformed string or bounds fail at boot; the pool opens at the first statement

    def snapshot(self) -> Any:
        return {"url": self.url}

    def take(self) -> Any:
        return self.pool.take()

    def give(self, conn: Any) -> None:
        self.pool.give(conn)

    @property
    def slots(self) -> sql_pool.Slots:
        if self._slots is None:
            pool = self.pool
            self._slots = sql_pool.Slots(pool.bounds.max, pool.bounds.timeout_s, pool.exhausted, self._closed_error)
        return self._slots

    async def acquire(self) -> Any:
        return await _acquire(self.slots, self.take, self.give)

    async def release(self, conn: Any) -> None:
        try:
            await super().release(conn)
        finally:
            self.slots.leave()

    def _closed_error(self) -> TeloError:
        return TeloError(Code.SQL_FAILED, f"{self.where} is closed")

    async def teardown(self) -> None:
        if self._slots is not None:
            self._slots.close()
        if self._pg_pool is not None:
            await asyncio.to_thread(self._pg_pool.close)


class SqliteConnection(Connection):
    """``SQLite.Connection``: a SQLite file, or an in-memory database in one connection (module docstring)."""

    kind = "SQLite.Connection"

    def __init__(self, app: Host, name: str, config: Mapping[str, Any], module: str | None) -> None:
        super().__init__(app, name, config, module)
        self._location: str | None = None
        self._one: sql_pool.OneConnection | None = None
        self._slots: sql_pool.Slots | None = None

    @property
    def location(self) -> str:
        """The database file's absolute path, or ``:memory:``."""
        if self._location is None:
            raw = _compiled(self, "file")
            if raw is not None and (not isinstance(raw, str) or not raw.strip()):
                raise TeloError(Code.SQL_URL_INVALID, f"{self.kind} {self.name!r}.file must be a path, got {raw!r}")
            if raw is None or raw.strip() == MEMORY:
                self._location = MEMORY
            else:
                path = Path(raw.strip()).expanduser()
                self._location = os.path.abspath(path if path.is_absolute() else self.app.base_dir / path)
        return self._location

    @property
    def memory(self) -> bool:
        return self.location == MEMORY

    @property
    def url(self) -> str:
        return self.location if self.memory else f"sqlite://{self.location}"

    @property
    def target(self) -> drivers.SqlTarget:
        return drivers.SqlTarget("sqlite", self.location)

    async def init(self) -> None:
        if not self.memory:
            try:
                Path(self.location).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise TeloError(Code.SQL_FAILED, f"{self.kind} {self.name!r}: cannot create the directory of "
                                f"{self.location}: {exc}") from exc

    def snapshot(self) -> Any:
        return {"file": self.location}

    @property
    def one(self) -> sql_pool.OneConnection:
        if self._one is None:
            self._one = sql_pool.OneConnection(lambda: drivers.connect(self.target),
                                               timeout_s=drivers.BUSY_TIMEOUT_MS / 1000,
                                               where=f"{self.kind} {self.name!r}")
        return self._one

    def take(self) -> Any:
        return self.one.take() if self.memory else super().take()

    def give(self, conn: Any) -> None:
        if self.memory:
            self.one.give(conn)
        else:
            super().give(conn)

    @property
    def slots(self) -> sql_pool.Slots:
        if self._slots is None:
            timeout_s = drivers.BUSY_TIMEOUT_MS / 1000
            self._slots = sql_pool.Slots(1, timeout_s, lambda: TeloError(
                Code.SQL_FAILED, f"{self.kind} {self.name!r}: the in-memory database stayed held by another "
                f"statement or transaction for {timeout_s:g} s", hint="an in-memory database is one connection: "
                "shorten the transactions on it, or give the connection a `file`"),
                lambda: TeloError(Code.SQL_FAILED, f"{self.kind} {self.name!r} is closed"))
        return self._slots

    async def acquire(self) -> Any:
        if self.memory:
            return await _acquire(self.slots, self.take, self.give)
        return await super().acquire()

    async def release(self, conn: Any) -> None:
        try:
            await super().release(conn)
        finally:
            if self.memory:
                self.slots.leave()

    async def teardown(self) -> None:
        if self._slots is not None:
            self._slots.close()
        if self._one is not None:
            self._one.close()
        await super().teardown()


async def _acquire(slots: sql_pool.Slots, take: Callable[[], Any], give: Callable[[Any], None]) -> Any:
    """A slot, then a connection (:mod:`telo.kinds.sql_pool`); the slot is freed again if no connection comes."""
    await slots.enter()
    try:
        return await sql_pool.wait_apart(take, give)
    except BaseException:
        slots.leave()
        raise
