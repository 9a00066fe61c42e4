"""The database drivers behind the ``sql`` kinds: with :mod:`telo.kinds.sql_pool` (the bounded pools of
``Postgres.Connection`` and an in-memory ``SQLite.Connection``), the one place outside ``journal/`` that imports
``sqlite3`` and ``psycopg`` (docs/design.md, "The sql kinds").

Everything driver-specific lives here, so :mod:`telo.kinds.sql` reads as the kinds' semantics only:

* :func:`parse_url` — what a ``Sql.Connection``'s ``url`` names: ``sqlite:///abs/path.db`` (a URI: the path
  after ``sqlite://``), ``sqlite:rel.db`` or a plain path (relative to the manifest's directory), or
  ``postgresql://…`` / ``postgres://…``;
* :func:`connect` — an autocommit connection (each statement outside a transaction commits on its own);
* :func:`execute` — one statement with parameters, returning row dicts converted to the CEL value domain;
* :func:`plain_transaction` — a driver transaction (or a SAVEPOINT when one is already open) that the journal
  cannot join: the region it wraps collapses (spec §8.2);
* :func:`same_database` — whether a journal store writes to the very database a connection names, which is
  when a ``Sql.Transaction`` opens its transaction through the journal instead (spec §8.2, reference §7
  "Transactions").

Parameters: SQLite statements use ``:name`` (named, from a map) or ``?`` (positional, from a list);
PostgreSQL statements use ``%(name)s`` or ``%s``, and a literal ``%`` must then be written ``%%``.
"""

from __future__ import annotations

import datetime
import decimal
import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any, Literal

from telo.errors import Code, TeloError
from telo.values import Duration, Timestamp, Uint, Url, to_plain
from telo.values.types import INT64_MAX, INT64_MIN

ERR_SQL_URL_INVALID = Code.SQL_URL_INVALID
ERR_SQL_FAILED = Code.SQL_FAILED
ERR_SQL_PARAM_INVALID = Code.SQL_PARAM_INVALID

Driver = Literal["sqlite", "postgres"]
BUSY_TIMEOUT_MS = 30_000  # as the SQLite journal: wait for another writer's lock, never fail at once
_SAVEPOINTS = count(1)


@dataclass(frozen=True, slots=True)
class SqlTarget:
    """The database a ``Sql.Connection`` names: ``location`` is an absolute file path (SQLite) or the URL."""

    driver: Driver
    location: str


def parse_url(raw: Any, base_dir: Path, where: str) -> SqlTarget:
    if not isinstance(raw, str) or not raw.strip():
        raise TeloError(ERR_SQL_URL_INVALID, f"{where}: `url` must be a non-empty string, got {raw!r}")
    text = raw.strip()
    if text.startswith(("postgresql://", "postgres://")):
        return SqlTarget("postgres", text)
    if text.startswith("sqlite:"):
        rest = text[len("sqlite:"):]
        if rest.startswith("//"):  # a URI: sqlite:///tmp/x.db has the path /tmp/x.db (RFC 8089 style)
            rest = rest[2:]
            if not rest.startswith("/"):
                raise TeloError(ERR_SQL_URL_INVALID, f"{where}: {raw!r} names a host; SQLite URLs are "
                                "sqlite:///absolute/path.db or sqlite:relative/path.db")
        text = rest
    elif "://" in text:
        raise TeloError(ERR_SQL_URL_INVALID, f"{where}: unsupported database URL {raw!r}",
                        hint="use sqlite:///path.db, a plain path to a SQLite file, or postgresql://…")
    if not text or text == ":memory:":
        raise TeloError(ERR_SQL_URL_INVALID, f"{where}: {raw!r} names no database file",
                        hint="an in-memory database would be a different one on every connection; name a file")
    path = Path(text).expanduser()
    return SqlTarget("sqlite", os.path.abspath(path if path.is_absolute() else base_dir / path))


# --- connections ---------------------------------------------------------------------------------------


def connect(target: SqlTarget) -> Any:
    """An autocommit connection; usable from any thread under its owner's lock (sqlite3 allows that with
    ``check_same_thread=False``, psycopg connections lock themselves)."""
    with _errors(f"connect to {display(target)}"):
        if target.driver == "sqlite":
            Path(target.location).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(target.location, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                   check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            return conn
        import psycopg

        return psycopg.connect(target.location, autocommit=True)


def close(conn: Any) -> None:
    with suppress(Exception):  # closing a broken connection has nothing left to report
        conn.close()


def display(target: SqlTarget) -> str:
    """The target without credentials, for messages."""
    if target.driver == "sqlite":
        return target.location
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(target.location)
    except Exception:
        return "a PostgreSQL database"
    return f"postgresql://{info.get('host', '')}:{info.get('port', '5432')}/{info.get('dbname', '')}"


def same_database(target: SqlTarget, store: Any) -> bool:
    """Whether the journal ``store`` writes into the database ``target`` names (SQLite: the same file;
    PostgreSQL: the same server, port, database and user)."""
    if target.driver == "sqlite" and getattr(store, "kind", None) == "sqlite":
        path = getattr(store, "path", None)
        return isinstance(path, str) and _same_file(path, target.location)
    if target.driver == "postgres" and getattr(store, "kind", None) == "postgres":
        url = getattr(store, "url", None)
        return isinstance(url, str) and _pg_identity(url) == _pg_identity(target.location)
    return False


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _pg_identity(url: str) -> tuple[str, str, str, str] | None:
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(url)
    except Exception:
        return None
    host = str(info.get("host") or info.get("hostaddr") or "localhost")
    if host == "127.0.0.1":
        host = "localhost"
    return host, str(info.get("port") or "5432"), str(info.get("dbname") or ""), str(info.get("user") or "")


# --- statements ----------------------------------------------------------------------------------------


def execute(conn: Any, sql: str, params: Any, *, rows: bool) -> tuple[list[dict[str, Any]], int]:
    """Run one statement; returns its rows (when ``rows``, as dicts of CEL values) and its rowcount."""
    bound = _params(params)
    with _errors("run a statement"):
        if isinstance(conn, sqlite3.Connection):
            cur = conn.execute(sql, bound if bound is not None else ())
        else:
            cur = conn.execute(sql, bound)  # psycopg: None means "no placeholders", so a bare % stays literal
        try:
            out: list[dict[str, Any]] = []
            if rows and cur.description is not None:
                names = [d[0] for d in cur.description]
                out = [{n: to_cel(v) for n, v in zip(names, row, strict=True)} for row in cur.fetchall()]
            return out, int(cur.rowcount if cur.rowcount is not None else -1)
        finally:
            cur.close()


def _params(params: Any) -> Mapping[str, Any] | list[Any] | None:
    if params is None:
        return None
    if isinstance(params, Mapping):
        return {str(k): to_param(v) for k, v in params.items()} or None
    if isinstance(params, list):
        return [to_param(v) for v in params] or None
    raise TeloError(ERR_SQL_PARAM_INVALID, f"statement parameters must be a map or a list, got {type(params).__name__}")


def to_param(value: Any) -> Any:
    """A CEL value as a driver parameter: scalars as themselves, time values and URLs as their canonical
    text, lists and maps as JSON text (what a JSON/JSONB column takes)."""
    t = type(value)
    if value is None or t in (bool, int, float, str, bytes):
        return value
    if t is Uint:
        return int(value)
    if t in (Timestamp, Duration):
        return value.to_text()
    if t is Url:
        return str(value)
    if isinstance(value, Mapping | list):
        return json.dumps(to_plain(value), ensure_ascii=False, separators=(",", ":"))
    raise TeloError(ERR_SQL_PARAM_INVALID, f"a {t.__name__} cannot be a statement parameter")


def to_cel(value: Any) -> Any:
    """A driver value in the CEL domain: ints stay int (beyond int64: text), floats double, bytes, null, text;
    a PostgreSQL ``numeric`` becomes a double (cast it to text in SQL to keep every digit), a ``timestamp`` a
    CEL timestamp (naive ones read as UTC), an ``interval`` a duration, JSON and arrays recursively."""
    t = type(value)
    if value is None or t in (bool, float, str, bytes):
        return value
    if t is int:
        return value if INT64_MIN <= value <= INT64_MAX else str(value)
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, datetime.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
        delta = aware - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
        return Timestamp.from_epoch_nanos(_delta_nanos(delta))
    if isinstance(value, datetime.timedelta):
        return Duration.from_nanos(_delta_nanos(value))
    if isinstance(value, datetime.date | datetime.time | uuid.UUID):
        return value.isoformat() if not isinstance(value, uuid.UUID) else str(value)
    if isinstance(value, Mapping):
        return {str(k): to_cel(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_cel(v) for v in value]
    if isinstance(value, int):  # an int subclass (an enum): its number
        return int(value)
    return str(value)


def _delta_nanos(delta: datetime.timedelta) -> int:
    return ((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds) * 1_000


# --- transactions --------------------------------------------------------------------------------------


@dataclass(eq=False)
class PlainTransaction:
    """A driver transaction the journal does not write into: a ``Sql.Transaction`` zone carrying it is not
    attested by ``writes_inside``, so its region collapses (spec §8.2)."""

    target: SqlTarget
    connection: Any
    lock: threading.RLock
    savepoint: str | None = None


@contextmanager
def plain_transaction(target: SqlTarget, conn: Any, lock: threading.RLock, *, nested: bool
                      ) -> Iterator[PlainTransaction]:
    """BEGIN … COMMIT on ``conn`` (``BEGIN IMMEDIATE`` for SQLite: take the write lock up front, so two
    transactions never deadlock upgrading a read lock); a SAVEPOINT when ``nested``. Any exception — a
    suspension or a cancellation too — rolls back and propagates."""
    name = f"telo_sql_{next(_SAVEPOINTS)}" if nested else None
    with lock, _errors("begin a transaction"):
        conn.execute(f"SAVEPOINT {name}" if name else ("BEGIN IMMEDIATE" if target.driver == "sqlite" else "BEGIN"))
    tx = PlainTransaction(target, conn, lock, name)
    try:
        yield tx
    except BaseException:
        with lock:
            _rollback(conn, name)
        raise
    with lock, _errors("commit a transaction"):
        try:
            conn.execute(f"RELEASE SAVEPOINT {name}" if name else "COMMIT")
        except BaseException:
            _rollback(conn, name)
            raise


def _rollback(conn: Any, savepoint: str | None) -> None:
    try:
        if savepoint is not None:
            conn.execute(f"ROLLBACK TO SAVEPOINT {savepoint}")
            conn.execute(f"RELEASE SAVEPOINT {savepoint}")
        else:
            conn.execute("ROLLBACK")
    except Exception:
        # The connection is broken: the server discards its transaction anyway.
        pass


def in_transaction(conn: Any) -> bool:
    """Whether ``conn`` has a transaction open (a pooled connection must come back without one)."""
    if isinstance(conn, sqlite3.Connection):
        return conn.in_transaction
    from psycopg.pq import TransactionStatus

    return bool(conn.info.transaction_status != TransactionStatus.IDLE)


def healthy(conn: Any) -> bool:
    if isinstance(conn, sqlite3.Connection):
        return True
    return not conn.closed and not conn.broken


@contextmanager
def _errors(what: str) -> Iterator[None]:
    """Driver errors as ``ERR_SQL_FAILED`` with the driver's message (and SQLSTATE for PostgreSQL)."""
    try:
        yield
    except sqlite3.Error as exc:
        raise TeloError(ERR_SQL_FAILED, f"SQLite could not {what}: {exc}",
                        data={"driver": "sqlite", "error": type(exc).__name__}) from exc
    except Exception as exc:
        if type(exc).__module__.startswith("psycopg"):
            state = getattr(exc, "sqlstate", None)
            data: dict[str, Any] = {"driver": "postgres", "error": type(exc).__name__}
            if state:
                data["sqlstate"] = state
            raise TeloError(ERR_SQL_FAILED, f"PostgreSQL could not {what}: {str(exc).strip()}", data=data) from exc
        raise
