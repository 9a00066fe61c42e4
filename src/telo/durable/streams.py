"""Streams out of a run (issue 18; DBOS ``write_stream``/``read_stream``): a step appends values to a named stream
of its run, readers iterate it from an offset, blocking for more until the stream is closed.

**A write** (``Durable.StreamWrite``) is a ``stream`` decision at ``<step>/@stream``: ``{stream, offset, value}``,
or ``{stream, offset, closed: true}`` for the close. The offset is the number of records the stream had before
it, counted in the run's own journal; the body is deterministic and the record is written once at its step's
path (first writer wins), so a replay writes nothing and a re-executed step after a crash computes the same
offset: **every offset holds one value, once** — the exactly-once a reader relies on. Writing to a closed stream
is ``ERR_DURABLE_STREAM_CLOSED``.

**A read** folds the run's journal (snapshots and epochs, telo.journal.eventlog) and returns the values from an
offset on, in offset order, stopping at the first gap (a deferred entry not committed yet is not visible; the
run's entries commit in order, so a gap closes on a later read). :func:`follow` polls until the stream is closed
or the run settles.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from telo.clock import SYSTEM_CLOCK, Clock
from telo.durable import messages
from telo.errors import Code, TeloError
from telo.journal.model import Entry
from telo.journal.store import Store

STREAM = "@stream"  # <write step>/@stream
STREAM_DECISION = "stream"


@dataclass(frozen=True, slots=True)
class StreamPage:
    """Values of a stream from an offset: ``next`` is the offset to read from next; ``closed`` once the writer
    closed it, ``settled`` once the run has settled (no value will ever follow)."""

    run: str
    stream: str
    values: tuple[tuple[int, Any], ...]
    next: int
    closed: bool
    settled: bool

    @property
    def ended(self) -> bool:
        return self.closed or self.settled

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "stream": self.stream, "values": [{"offset": o, "value": v} for o, v in self.values],
                "next": self.next, "closed": self.closed, "settled": self.settled}


def records(run: str, entries: Mapping[str, Entry], stream: str) -> dict[int, Mapping[str, Any]]:
    """The stream's records by offset, from the run's logical entries."""
    out: dict[int, Mapping[str, Any]] = {}
    for entry in entries.values():
        if entry.kind == "decision" and entry.decision == STREAM_DECISION:
            got = entry.decode(run)
            if isinstance(got, Mapping) and got.get("stream") == stream and type(got.get("offset")) is int:
                out.setdefault(got["offset"], got)
    return out


def next_offset(run: str, entries: Mapping[str, Entry], stream: str) -> tuple[int, bool]:
    """The offset the stream's next record takes, and whether the stream is closed."""
    found = records(run, entries, stream)
    return len(found), any(r.get("closed") is True for r in found.values())


def stream_name(name: Any, run: str) -> str:
    if not isinstance(name, str) or not name:
        raise TeloError(Code.DURABLE_MESSAGE_INVALID, f"a stream's name must be a non-empty string, not {name!r}",
                        hint="name the stream as a non-empty string", data={"run": run, "stream": repr(name)})
    return name


def read(store: Store, run: str, stream: Any, offset: int = 0) -> StreamPage:
    """The stream's values from ``offset`` on (module docstring); ``ERR_DURABLE_RUN_NOT_FOUND`` for an unknown
    run."""
    stream = stream_name(stream, run)
    if type(offset) is not int or offset < 0:
        raise TeloError(Code.INVALID_VALUE, f"a stream offset is a non-negative integer, not {offset!r}",
                        hint="read from 0, or from the `next` of the previous page")
    record = store.read_run(run)
    if record is None:
        raise TeloError(Code.DURABLE_RUN_NOT_FOUND, f"run {run!r} is not in the journal",
                        hint="list the runs: `telo runs list`", data={"run": run})
    found = records(run, messages.logical_entries(store, run), stream)
    values: list[tuple[int, Any]] = []
    at, closed = offset, False
    while at in found:
        got = found[at]
        if got.get("closed") is True:
            closed = True
            break
        values.append((at, got.get("value")))
        at += 1
    # (a close read past: still closed, so a reader from beyond its offset ends too)
    closed = closed or any(r.get("closed") is True and o < offset for o, r in found.items())
    return StreamPage(run, stream, tuple(values), at, closed, record.status in messages.SETTLED)


async def follow(store: Store, run: str, stream: Any, offset: int = 0, *, poll_s: float = 0.1,
                 clock: Clock = SYSTEM_CLOCK, wait_s: float | None = None) -> AsyncIterator[tuple[int, Any]]:
    """Every value from ``offset`` on, waiting for more until the stream is closed or the run settles (or
    ``wait_s`` passes with nothing new)."""
    quiet_since = clock.monotonic()
    while True:
        page = await asyncio.to_thread(read, store, run, stream, offset)
        for item in page.values:
            yield item
        if page.values:
            quiet_since = clock.monotonic()
        offset = page.next
        if page.ended and not page.values:
            # settled: one more read, so that values committed with the completion are not missed
            last = await asyncio.to_thread(read, store, run, stream, offset)
            for item in last.values:
                yield item
            return
        if wait_s is not None and clock.monotonic() - quiet_since >= wait_s:
            return
        if not page.values:
            await asyncio.sleep(poll_s)


@dataclass(frozen=True, slots=True)
class StreamSummary:
    stream: str
    values: int  # values written (the close not counted)
    closed: bool

    def to_json(self) -> dict[str, Any]:
        return {"stream": self.stream, "values": self.values, "closed": self.closed}


def summaries(store: Store, run: str) -> tuple[list[StreamSummary], bool]:
    """The run's streams, in the order first written, and whether the run has settled (none will grow);
    ``ERR_DURABLE_RUN_NOT_FOUND`` for an unknown run."""
    record = store.read_run(run)
    if record is None:
        raise TeloError(Code.DURABLE_RUN_NOT_FOUND, f"run {run!r} is not in the journal",
                        hint="list the runs: `telo runs list`", data={"run": run})
    entries = messages.logical_entries(store, run)
    first: dict[str, int] = {}
    for entry in entries.values():
        if entry.kind == "decision" and entry.decision == STREAM_DECISION:
            got = entry.decode(run)
            if isinstance(got, Mapping) and isinstance(got.get("stream"), str):
                first[got["stream"]] = min(first.get(got["stream"], entry.seq or 0), entry.seq or 0)
    out = []
    for name in sorted(first, key=lambda n: first[n]):
        written, closed = next_offset(run, entries, name)
        out.append(StreamSummary(name, written - (1 if closed else 0), closed))
    return out, record.status in messages.SETTLED
