"""The bounded pools behind ``Postgres.Connection`` and an in-memory ``SQLite.Connection``: with
:mod:`telo.kinds.sql_drivers`, the driver code of the sql kinds, and their one importer of ``psycopg_pool``
(docs/design.md "The sql kinds").

* :class:`PgPool` — a ``psycopg_pool.ConnectionPool`` of autocommit connections, created and opened at the first
  :meth:`~PgPool.take` (a connection no statement uses opens nothing), with the resource's bounds:
  ``min_size`` kept open from then on, at most ``max_size`` at once, ``max_idle`` before one above ``min`` unused
  is closed, ``timeout`` that a taker waits. A connection the server dropped while idle is replaced on checkout.
* :class:`OneConnection` — the single connection an in-memory SQLite database lives in, lent to one holder at a
  time (a second connection would be another, empty, database).
* :func:`check_connection_string`, :func:`scrub` — a ``connectionString`` libpq cannot read is refused at boot,
  and no message shows its password (libpq's own may quote it).
* :class:`Slots` and :func:`wait_apart` — how an async caller waits for either: first for one of the resource's
  ``max`` slots, on the event loop (an ``asyncio.Semaphore``, so a waiter holds no thread at all: waiters on
  one connection never starve the holders of another, as they did while waiting in the pool on a shared set of
  threads); then, holding a slot, ``take()`` — which no longer waits for capacity, only for connecting — on a
  thread of this module's own, never one of the event loop's few default worker threads; a connection handed
  out to a caller cancelled meanwhile is given back, not lost to the pool for good.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from telo.errors import Code, TeloError
from telo.journal.redact import MASK, redact

# Where a caller holding one of its resource's Slots takes its connection: it waits here only for connecting, never
# for a holder to give one back (the Slots did that on the loop), so no set of waiters can starve a holder.
_WAITERS = ThreadPoolExecutor(max_workers=32, thread_name_prefix="telo-sql-wait")
FOREVER_S = 365 * 86_400.0  # "0: no limit" (threading's waits refuse infinity)


@dataclass(frozen=True, slots=True)
class PoolBounds:
    """``Postgres.Connection {pool}``: sizes, and times in milliseconds where 0 means "never" / "no limit"."""

    min: int
    max: int
    idle_timeout_ms: float
    connection_timeout_ms: float

    @property
    def timeout_s(self) -> float:
        return self.connection_timeout_ms / 1000 if self.connection_timeout_ms > 0 else FOREVER_S

    @property
    def idle_s(self) -> float:
        return self.idle_timeout_ms / 1000 if self.idle_timeout_ms > 0 else FOREVER_S


class PgPool:
    """A pool of autocommit PostgreSQL connections to ``url`` (module docstring). ``where`` names the resource in
    messages; ``shown`` is the database without its password."""

    def __init__(self, url: str, bounds: PoolBounds, *, where: str, shown: str) -> None:
        self._url, self.bounds, self._where, self._shown = url, bounds, where, shown
        self._pool: ConnectionPool[Any] | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def pool(self) -> ConnectionPool[Any] | None:
        """The psycopg pool, once opened."""
        return self._pool

    def _opened(self) -> ConnectionPool[Any]:
        with self._lock:
            if self._closed:
                raise TeloError(Code.SQL_FAILED, f"{self._where} is closed")
            if self._pool is None:
                pool: ConnectionPool[Any] = ConnectionPool(
                    self._url, min_size=self.bounds.min, max_size=self.bounds.max, max_idle=self.bounds.idle_s,
                    timeout=self.bounds.timeout_s, kwargs={"autocommit": True},
                    check=ConnectionPool.check_connection, name=self._where, num_workers=2, open=False)
                pool.open(wait=False)  # `min` connections are opened in the background; the taker waits for one
                self._pool = pool
            return self._pool

    def take(self) -> Any:
        """A connection, waited for up to the pool's timeout (blocking: call it from a worker thread)."""
        pool = self._opened()
        try:
            return pool.getconn()
        except PoolClosed:  # the application stopped while this caller waited
            raise TeloError(Code.SQL_FAILED, f"{self._where} is closed") from None
        except PoolTimeout as exc:
            raise self.exhausted() from exc

    def exhausted(self) -> TeloError:
        """No connection within the pool's timeout."""
        return TeloError(
            Code.SQL_FAILED,
            f"{self._where}: no connection to {self._shown} within {self.bounds.timeout_s:g} s: all {self.bounds.max} "
            "of the pool are in use, or the database cannot be reached (psycopg.pool logs why)",
            hint="raise pool.max or pool.connectionTimeoutMs, or hold connections for less time",
            data={"driver": "postgres", "max": self.bounds.max})

    def give(self, conn: Any) -> None:
        """Back to the pool, which rolls back a transaction left open and drops a broken connection."""
        pool = self._pool
        if pool is None or pool.closed:
            with suppress(Exception):
                conn.close()
            return
        pool.putconn(conn)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


class OneConnection:
    """The one connection of an in-memory database (``connect`` opens it at the first take), lent to one holder at
    a time: a taker waits up to ``timeout_s`` for the holder to give it back."""

    def __init__(self, connect: Callable[[], Any], *, timeout_s: float, where: str) -> None:
        self._connect, self._timeout_s, self._where = connect, timeout_s, where
        self._conn: Any = None
        self._free = threading.Semaphore(1)  # released by whichever thread gives the connection back
        self._lock = threading.Lock()
        self._closed = False

    def take(self) -> Any:
        if not self._free.acquire(timeout=self._timeout_s):
            raise TeloError(Code.SQL_FAILED, f"{self._where}: the in-memory database stayed held by another "
                            f"statement or transaction for {self._timeout_s:g} s",
                            hint="an in-memory database is one connection: shorten the transactions on it, or "
                                 "give the connection a `file`")
        try:
            with self._lock:
                if self._closed:
                    raise TeloError(Code.SQL_FAILED, f"{self._where} is closed")
                if self._conn is None:
                    self._conn = self._connect()
                return self._conn
        except BaseException:
            self._free.release()
            raise

    def give(self, conn: Any) -> None:
        if conn is not self._conn:  # closed meanwhile (teardown), or not ours
            return
        if getattr(conn, "in_transaction", False):  # never the case after a Sql.Transaction: a safety net
            with suppress(Exception):
                conn.execute("ROLLBACK")
        self._free.release()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
        if conn is not None:
            with suppress(Exception):
                conn.close()
        self._free.release()  # a taker still waiting wakes, finds it closed and wakes the next (take's except)


class Slots:
    """At most ``size`` holders of a bounded connection at once, waited for on the event loop (module docstring):
    :meth:`enter` waits up to ``timeout_s`` and raises ``refuse()`` past it; :meth:`leave` frees one;
    :meth:`close` (the resource's teardown) wakes every waiter at once with ``closed()``."""

    def __init__(self, size: int, timeout_s: float, refuse: Callable[[], TeloError],
                 closed: Callable[[], TeloError]) -> None:
        self._size, self._timeout_s, self._refuse, self._closed_error = size, timeout_s, refuse, closed
        self._free: asyncio.Semaphore | None = None  # made on first use, on the loop that uses it
        self._waiting = 0
        self._closed = False

    async def enter(self) -> None:
        if self._free is None:
            self._free = asyncio.Semaphore(self._size)
        if self._closed:
            raise self._closed_error()
        self._waiting += 1
        try:
            await asyncio.wait_for(self._free.acquire(), None if self._timeout_s >= FOREVER_S else self._timeout_s)
        except TimeoutError:
            raise self._refuse() from None
        finally:
            self._waiting -= 1
        if self._closed:
            self._free.release()  # woken by close: pass the wake-up on
            raise self._closed_error()

    def leave(self) -> None:
        if self._free is not None:
            self._free.release()

    def close(self) -> None:
        self._closed = True
        if self._free is not None and self._waiting:
            self._free.release()  # each woken waiter releases again for the next (enter)


async def wait_apart(take: Callable[[], Any], give: Callable[[Any], None]) -> Any:
    """``take()`` awaited on a thread of this module's own (module docstring); if the caller is cancelled while it
    waits, a connection handed out afterwards goes straight back through ``give``."""
    waiting: Future[Any] = _WAITERS.submit(take)
    try:
        return await asyncio.wrap_future(waiting)
    except asyncio.CancelledError:
        if not waiting.cancel():
            waiting.add_done_callback(lambda done: _give_back(done, give))
        raise


def _give_back(done: Future[Any], give: Callable[[Any], None]) -> None:
    if not done.cancelled() and done.exception() is None:
        give(done.result())


def check_connection_string(url: str, where: str) -> None:
    """Refuse a ``connectionString`` libpq cannot parse, at boot — with a message that never holds its password
    (libpq may quote the part it refuses, which can be the password itself)."""
    try:
        conninfo_to_dict(url)
    except Exception as exc:
        raise TeloError(Code.SQL_URL_INVALID, f"{where}: libpq cannot read the connection string "
                        f"{scrub(url, url)!r}: {scrub(str(exc), url)}") from None


def scrub(text: str, url: str) -> str:
    """``text`` with the password of ``url`` hidden: every URL password :func:`telo.journal.redact.redact` finds,
    and the literal password wherever else the text repeats it."""
    found = _PASSWORD.match(url)
    passwords = [found.group(1)] if found else []
    # libpq also takes it as a query parameter (…?password=…), and quotes a bad %-escape of it verbatim
    passwords += [m.group(1) for m in _QUERY_PASSWORD.finditer(url)]
    text = redact(text)
    for password in sorted({p for p in passwords if p}, key=len, reverse=True):
        text = text.replace(password, MASK).replace(unquote(password, errors="replace"), MASK)
    return text


_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://[^:/?#@]*:(.*)@", re.DOTALL)
_QUERY_PASSWORD = re.compile(r"[?&]password=([^&#]*)")
