"""The sources a ``Durable.Consume`` reads (telo.kinds.consume): another run's stream, a SQL query paged by a
key, a newline-delimited JSON file. Each hands out batches after a cursor and reads a pinned batch back between
two cursors — the same items, whatever was added since (the source is append-only by contract: a stream always
is; the file is appended to). A query's rows are not: its ``WHERE`` may stop selecting the rows a batch's own
steps updated (``WHERE sent = 0`` and a step marking them — the outbox pattern), so a query batch pins its items
(``pins_items``) and is never read again."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from telo.durable import streams
from telo.errors import Code, TeloError
from telo.journal.store import Store
from telo.kinds.journals import Journal
from telo.kinds.sql import Connection
from telo.kinds.sql_statements import run_sql
from telo.kinds.sql_text import identifier, positional
from telo.values import from_plain
from telo.values.depth import load_json


class Source(Protocol):
    start: Any  # the cursor before the first item
    pins_items: bool  # a pinned batch records its items, not only its bounds (module docstring)

    async def next_batch(self, cursor: Any, limit: int) -> tuple[list[Any], Any, bool]:
        """Up to ``limit`` items after ``cursor``: ``(items, the cursor after them, whether the source ended)``."""
        ...

    async def between(self, after: Any, upto: Any) -> list[Any]:
        """The items after ``after`` up to ``upto`` (a pinned batch, read again)."""
        ...


class StreamSource:
    """Another run's stream (telo.durable.streams): cursors are offsets."""

    start = 0
    pins_items = False  # (a stream's offsets never change)

    def __init__(self, store: Store, run: str, stream: str) -> None:
        self.store, self.run, self.stream = store, run, stream

    async def next_batch(self, cursor: Any, limit: int) -> tuple[list[Any], Any, bool]:
        page = await asyncio.to_thread(streams.read, self.store, self.run, self.stream, int(cursor))
        values = page.values[:limit]
        return [v for _, v in values], int(cursor) + len(values), page.ended and len(values) == len(page.values)

    async def between(self, after: Any, upto: Any) -> list[Any]:
        page = await asyncio.to_thread(streams.read, self.store, self.run, self.stream, int(after))
        return [v for offset, v in page.values if offset < int(upto)]


class FileSource:
    """A newline-delimited JSON file: cursors are byte offsets. Lines end at ``\\n`` only (a ``\\r`` inside a
    JSON string is part of it); the file's last line may lack its newline — read once the rest is, as the end of
    the file (a consume of a file ends there: consume a file once it is complete)."""

    start = 0
    pins_items = False  # (appended to, by contract)
    CHUNK = 1 << 16  # bytes read at a time: a batch reads what it needs, not the rest of the file

    def __init__(self, path: Path, where: str) -> None:
        self.path, self.where = path, where

    def _item(self, raw: bytes, at: int, items: list[Any]) -> None:
        if raw.strip():
            try:  # (load_json: a line nested past the value limit is refused, never a RecursionError)
                items.append(from_plain(load_json(raw.decode(), f"the line at byte {at} of {str(self.path)!r}"), {}))
            except ValueError as exc:
                raise TeloError(Code.INVALID_VALUE, f"{self.where}: the line at byte {at} of {str(self.path)!r} is "
                                f"not JSON: {exc}", hint="write one JSON value per line") from exc

    def _read(self, offset: int, limit: int | None, upto: int | None) -> tuple[list[Any], int]:
        """Up to ``limit`` items from byte ``offset`` (up to byte ``upto``, a pinned batch's end); with the
        offset after them. Past the last newline, the rest of the file (or of the range) is its last item."""
        items: list[Any] = []
        at = offset  # the byte offset of buf[pos]
        try:
            with self.path.open("rb") as f:
                f.seek(offset)
                buf, pos, eof = b"", 0, False
                while limit is None or len(items) < limit:
                    nl = buf.find(b"\n", pos)
                    if nl >= 0:
                        self._item(buf[pos:nl + 1], at, items)
                        at += nl + 1 - pos
                        pos = nl + 1
                        continue
                    if eof:
                        if pos < len(buf):  # the last line, with no newline
                            self._item(buf[pos:], at, items)
                            at += len(buf) - pos
                        break
                    want = self.CHUNK if upto is None else min(self.CHUNK, upto - at - (len(buf) - pos))
                    chunk = f.read(want) if want > 0 else b""
                    buf, pos, eof = buf[pos:] + chunk, 0, not chunk
        except OSError as exc:
            raise TeloError(Code.INVALID_VALUE, f"{self.where}: cannot read {str(self.path)!r}: {exc.strerror}",
                            hint="check the source file's path") from exc
        return items, at

    async def next_batch(self, cursor: Any, limit: int) -> tuple[list[Any], Any, bool]:
        items, after = await asyncio.to_thread(self._read, int(cursor), limit, None)
        return items, after, not items

    async def between(self, after: Any, upto: Any) -> list[Any]:
        return (await asyncio.to_thread(self._read, int(after), None, int(upto)))[0]


class QuerySource:
    """A SQL query paged by a key column (a table as a queue): cursors are the last key read (None first)."""

    start = None
    pins_items = True  # (its rows change under it: module docstring)

    def __init__(self, conn: Connection, query: str, key: str, where: str) -> None:
        self.conn, self.query, self.where = conn, query.strip().rstrip(";"), where
        self.key = identifier(key, f"{where}.key")
        self.key_name = key

    def _mark(self, n: int) -> str:
        """The n-th (1-based) placeholder as the driver's statements write it: ``?`` for SQLite, ``$n`` for
        PostgreSQL (telo.kinds.sql_text.positional turns those into psycopg's)."""
        return "?" if self.conn.target.driver == "sqlite" else f"${n}"

    async def _rows(self, after: Any, upto: Any, limit: int | None) -> list[Any]:
        conds: list[str] = []
        params: list[Any] = []
        for op, bound in ((">", after), ("<=", upto)):
            if bound is not None:
                params.append(bound)
                conds.append(f"{self.key} {op} {self._mark(len(params))}")
        text = f"SELECT * FROM ({self.query}) AS telo_source" + (" WHERE " + " AND ".join(conds) if conds else "")
        text += f" ORDER BY {self.key}"
        if limit is not None:
            params.append(limit)
            text += f" LIMIT {self._mark(len(params))}"
        sql, args = positional(self.conn.target.driver, text, params, self.where)
        rows, _ = await run_sql(self.conn, sql, args, rows=True)
        return rows

    async def next_batch(self, cursor: Any, limit: int) -> tuple[list[Any], Any, bool]:
        # One row more than the batch: a key the next page shares with this one would be skipped by `key > last`.
        rows = await self._rows(cursor, None, limit + 1)
        if not rows:
            return [], cursor, True
        self._check_keys(rows)
        batch = rows[:limit]
        return batch, batch[-1].get(self.key_name), len(rows) < limit

    def _check_keys(self, rows: list[Any]) -> None:
        """Paging by ``key > last`` and reading a pinned batch back by ``key <= to`` need a unique, NOT NULL key:
        a shared key would lose rows, a null one change a pinned batch. Refused, never skipped silently."""
        previous: Any = None
        for i, row in enumerate(rows):
            key = row.get(self.key_name)
            if key is None:
                raise TeloError(Code.INVALID_VALUE, f"{self.where}: a row of the query has no {self.key_name!r} "
                                "column, or it is null", hint="select the key column, and page by a unique, NOT NULL "
                                "key (a primary key)", data={"key": self.key_name})
            if i and key == previous:
                raise TeloError(Code.INVALID_VALUE, f"{self.where}: two rows of the query share the key "
                                f"{self.key_name}={key!r}; paging by it would skip one", hint="page by a unique, NOT "
                                "NULL key (a primary key)", data={"key": self.key_name, "value": repr(key)})
            previous = key

    async def between(self, after: Any, upto: Any) -> list[Any]:
        """(A batch pinned by a telo that recorded bounds only.)"""
        return await self._rows(after, upto, None)


def source_for(resource: Any, scope: Mapping[str, Any]) -> Source:
    """The source a ``Durable.Consume``'s ``source:`` names (exactly one of stream, query, file)."""
    where = f"{resource.kind} {resource.name!r}.source"
    config = resource.config.get("source") or {}

    def value(name: str) -> Any:
        """A field of the source (``stream.run``) evaluated against the call's scope; None when absent."""
        group, _, key = name.partition(".")
        node = (config.get(group) or {}).get(key)
        return None if node is None else resource.app.compiler.value(node, where=f"{where}.{name}").evaluate(scope)

    if "stream" in config:
        journal = resource.app.resource_for(config["stream"].get("journal"), where=f"{where}.stream.journal")
        if not isinstance(journal, Journal):
            raise TeloError(Code.RESOURCE_NOT_FOUND, f"{where}.stream.journal must name a journal")
        run, name = value("stream.run"), value("stream.name")
        if not isinstance(run, str) or not run:
            raise TeloError(Code.DURABLE_RUN_ID_INVALID, f"{where}.stream.run must be a run id, not {run!r}")
        return StreamSource(journal.store, run, streams.stream_name(name, run))
    if "query" in config:
        conn = resource.app.resource_for(config["query"].get("connection"), where=f"{where}.query.connection")
        if not isinstance(conn, Connection):
            raise TeloError(Code.RESOURCE_NOT_FOUND, f"{where}.query.connection must name a SQL connection")
        sql, key = value("query.sql"), value("query.key")
        if not isinstance(sql, str) or not isinstance(key, str):
            raise TeloError(Code.INVALID_VALUE, f"{where}.query needs `sql` (a SELECT) and `key` (its column)")
        return QuerySource(conn, sql, key, f"{where}.query")
    if "file" in config:
        path = value("file.path")
        if not isinstance(path, str) or not path:
            raise TeloError(Code.INVALID_VALUE, f"{where}.file.path must be a path")
        return FileSource(resource.app.base_dir / path if not Path(path).is_absolute() else Path(path), f"{where}.file")
    raise TeloError(Code.MANIFEST_VALIDATION_FAILED, f"{where}: give exactly one of `stream`, `query`, `file`")
