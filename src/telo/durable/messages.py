"""Messages into a run and events out of it (issue 18; DBOS ``send``/``recv`` and ``set_event``/``get_event``,
Temporal signals and queries), built on the journal's own rules — every store has them with no table of its own.

**A message** is an entry of the RECEIVING run, a ``message`` decision at ``@inbox/<topic>/<key>`` (a root key,
like ``@digest``: never under ``steps``, so replay and version gates never mistake it for the body's work),
``{payload, nonce}``, written by the sender with the store's ``append_in_order``. So it is durable when ``send``
returns, its ``seq`` orders it among the run's messages (and no reader sees a message before an older one has
committed: Store.append_in_order), and **first writer wins** makes a sender's ``key`` its idempotency key: a
second send with one key stores nothing (``duplicate: true``; the nonce says which send stored it). A send
without a key gets a fresh one. A message is stored under no epoch (telo.journal.eventlog): every timeline of a
restored run sees it, and a send racing a restore cannot land in the epoch the restore abandons.

**A receive** (``Durable.Receive``) is a decision at ``<step>/@received``: the oldest message of its topic that no
earlier receive of the run recorded, as ``{topic, key, seq, payload, timedOut: false}``. Recorded once, replayed
verbatim: a crash after it hands the body the same message again and never a second one. With nothing to
receive, it records ``{topic}`` at ``<step>/@waiting`` and the run parks on the token ``inbox:<run>:<topic>``
(until the receive's deadline, when it has a timeout); a send unparks a parked run in which a receive of its
topic waits — one whose ``@waiting`` has no ``@received`` beside it. The ``@waiting`` record, not the park's
token, says so: parallel branches may wait on several topics (and Awaits) at once, while the run record holds one
park (telo.durable.parks). The lost wake-up — a message written after the receive
looked and before its park was recorded, whose sender then found the run not parked yet — is closed from the
receiving side: once the park is recorded, the receive looks again, and unparks the run itself if a message came
(either the sender's look at the run follows the park, or the receive's second look follows the message). Past
the deadline the receive records ``{topic, timedOut: true}``.

**An event** (``Durable.Publish``) is a decision at ``<step>/@event``, ``{name, value}``: recorded once (a replay
does not publish again), readable by run and name while the run executes and after it settles. The latest one
per name wins; :func:`events` keeps the whole history, in journal order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from telo import paths
from telo.clock import SYSTEM_CLOCK, Clock, uuid4
from telo.errors import Code, TeloError
from telo.journal import eventlog
from telo.journal.compat import writer_for
from telo.journal.model import Entry, RunRecord
from telo.journal.store import Store
from telo.runtime.contracts import SchemaValidator

INBOX = "@inbox"  # root key of a run's messages: @inbox/<topic>/<key>
RECEIVED = "@received"  # <receive step>/@received: the message a receive took (or its time-out)
WAITING = "@waiting"  # <receive step>/@waiting: {topic}, recorded before its park (a send wakes the run by it)
EVENT = "@event"  # <publish step>/@event: {name, value}
MESSAGE_DECISION = "message"
RECEIVED_DECISION = "received"
WAITING_DECISION = "waiting"
EVENT_DECISION = "event"
SETTLED = frozenset({"completed", "failed", "cancelled"})


def inbox_path(topic: str, key: str) -> str:
    return paths.step_path(INBOX, topic, key)


INBOX_TOKEN_PREFIX = "inbox:"


def inbox_token(run: str, topic: str) -> str:
    """The token a receive parks on: one per run and topic, so a send finds the run it wakes by the token."""
    return f"{INBOX_TOKEN_PREFIX}{run}:{topic}"


def _name(value: Any, what: str, **data: Any) -> str:
    if not isinstance(value, str) or not value:
        raise TeloError(Code.DURABLE_MESSAGE_INVALID, f"a message's {what} must be a non-empty string, not {value!r}",
                        hint=f"name the {what} as a non-empty string", data={what: repr(value), **data})
    return value


def topic_name(topic: Any, run: str) -> str:
    return _name(topic, "topic", run=run)


def event_name(name: Any, run: str) -> str:
    return _name(name, "event name", run=run)


@dataclass(frozen=True, slots=True)
class Sent:
    """What a send did: ``duplicate`` when a message with its key was there already (nothing was written)."""

    run: str
    topic: str
    key: str
    seq: int
    duplicate: bool
    woke: bool  # a receive was parked on the topic and the run was made due again

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "topic": self.topic, "key": self.key, "seq": self.seq,
                "duplicate": self.duplicate, "woke": self.woke}


def send(store: Store, run: str, topic: Any, payload: Any, *, key: str | None = None) -> Sent:
    """Queue ``payload`` for the run's receives of ``topic`` (module docstring); durable on return.

    Refused for an unknown run (``ERR_DURABLE_RUN_NOT_FOUND``) and a settled one (``ERR_DURABLE_RUN_SETTLED``:
    nothing would ever receive it) — unless the run holds a message with this key already: a retried send then
    answers ``duplicate``, whatever became of the run."""
    topic = topic_name(topic, run)
    key = uuid4() if key is None else _name(key, "key", run=run, topic=topic)
    record = _known(store.read_run(run), run, "send a message to")
    state = eventlog.recover(store, run, record)
    logical = inbox_path(topic, key)
    existing = state.entries.get(logical)
    if existing is None and record.status in SETTLED:  # (a retry of a send that landed answers duplicate)
        raise TeloError(Code.DURABLE_RUN_SETTLED, f"cannot send a message to run {run!r}: it is {record.status}, "
                        "and nothing would receive it", hint="send to a run that is still running or parked",
                        data={"run": run, "status": record.status})
    if existing is None:
        check_against_waiting(run, state.entries, topic, payload)
        nonce = uuid4()  # which send stored it: racing sends of one key may carry equal payloads
        text, v = writer_for(store).stored({"payload": payload, "nonce": nonce})
        entry = Entry(logical, "decision", text, v, MESSAGE_DECISION, None)
        stored = store.append_in_order(run, entry)
        got = stored.decode(run)
        duplicate = not (isinstance(got, Mapping) and got.get("nonce") == nonce)  # another send got there first
    else:
        stored, duplicate = existing, True
    # A duplicate wakes too while its message is untaken: the send that stored it may have died before its wake
    # (a retry with its key is how a sender recovers). A parked run's entries are all in the store (a park is a
    # barrier), so ``taken`` is exact whenever there is a park to undo.
    woke = not (duplicate and _taken(run, state.entries, topic, key)) and _wake(store, run, topic)
    return Sent(run, topic, key, stored.seq or 0, duplicate, woke)


def _wake(store: Store, run: str, topic: str) -> bool:
    """Unpark the run if it is parked and a receive of ``topic`` waits in it. Read after the message is stored,
    record first: a park this read sees was recorded after its ``@waiting`` (a park is a barrier), so the entries
    read next show it; a park it does not see comes after the message, and the receive's look after its park
    takes the message (module docstring)."""
    record = store.read_run(run)
    if record is None or record.status != "parked" or record.parked is None:
        return False
    park = record.parked
    if park.token is None and park.at is None and park.reason is not None:
        return False  # an operator's to end (a manifest hold, an unconfirmed effect): a wake would park it again
    if park.token != inbox_token(run, topic) and topic not in waiting_topics(run, logical_entries(store, run)):
        return False  # (the token: a run parked before receives recorded @waiting)
    return store.unpark(run)


def waiting_topics(run: str, entries: Mapping[str, Entry]) -> set[str]:
    """The topics receives of the run wait on: a ``@waiting`` with no ``@received`` beside it (logical entries)."""
    return {topic for topic, _, _ in _waiting(run, entries)}


def message_waiting(run: str, entries: Mapping[str, Entry], topic: str | None = None) -> bool:
    """Does a receive of the run waiting for a message (``@waiting``, and ``topic`` besides: a park's token from
    before receives recorded it) have an untaken one? ``entries``: the run's logical entries."""
    topics = waiting_topics(run, entries) | ({topic} if topic is not None else set())
    return any(next_message(run, entries, t) is not None for t in sorted(topics))


def _waiting(run: str, entries: Mapping[str, Entry]) -> list[tuple[str, Mapping[str, Any] | None, str]]:
    """``(topic, payload schema or None, receive step)`` of each receive of the run waiting for a message."""
    out: list[tuple[str, Mapping[str, Any] | None, str]] = []
    for path, entry in entries.items():
        if entry.kind == "decision" and entry.decision == WAITING_DECISION:
            step = paths.parent(path)
            got = entry.decode(run)
            if step is not None and paths.child(step, RECEIVED) not in entries and isinstance(got, Mapping) \
                    and isinstance(got.get("topic"), str):
                schema = got.get("schema")
                out.append((got["topic"], schema if isinstance(schema, Mapping) else None, step))
    return out


def check_against_waiting(run: str, entries: Mapping[str, Entry], topic: str, payload: Any) -> None:
    """Refuse (``ERR_DURABLE_PAYLOAD_INVALID``, nothing written) a message that a receive waiting on ``topic``
    would refuse by its declared ``outputType``: taken, it would fail that step and the run — as ``telo deliver``
    checks an Await's. A message sent while no receive waits is checked when one takes it."""
    for waiting_topic, schema, step in _waiting(run, entries):
        if waiting_topic == topic and schema is not None:
            SchemaValidator(schema, Code.DURABLE_PAYLOAD_INVALID).validate(
                payload, where=f"the message sent to run {run!r} on topic {topic!r} (the receive at {step} "
                f"waits for it)")


def _taken(run: str, entries: Mapping[str, Entry], topic: str, key: str) -> bool:
    """Has a receive of the run recorded the message ``key`` of ``topic``?"""
    for entry in entries.values():
        if entry.kind == "decision" and entry.decision == RECEIVED_DECISION:
            got = entry.decode(run)
            if isinstance(got, Mapping) and got.get("topic") == topic and got.get("key") == key:
                return True
    return False


def _known(record: RunRecord | None, run: str, doing: str) -> RunRecord:
    if record is None:
        raise TeloError(Code.DURABLE_RUN_NOT_FOUND, f"cannot {doing} run {run!r}: the journal has no such run",
                        hint="list the runs: `telo runs list`", data={"run": run})
    return record


def logical_entries(store: Store, run: str) -> dict[str, Entry]:
    """The run's entries by logical path, as its next execution reads them (snapshots and epochs folded)."""
    return eventlog.fold(run, store.read_entries(run))[0]


def next_message(run: str, entries: Mapping[str, Entry], topic: str) -> dict[str, Any] | None:
    """The oldest message of ``topic`` no receive of the run has recorded, as a receive records it; None if
    there is none. ``entries``: the run's logical entries."""
    taken: set[str] = set()
    waiting: list[tuple[int, str, Entry]] = []
    for path, entry in entries.items():
        if entry.kind != "decision":
            continue
        if entry.decision == RECEIVED_DECISION:
            got = entry.decode(run)
            if isinstance(got, Mapping) and got.get("topic") == topic and isinstance(got.get("key"), str):
                taken.add(got["key"])
        elif entry.decision == MESSAGE_DECISION and path.startswith(INBOX + "/"):
            segments = paths.parse(path)
            if len(segments) == 3 and segments[1].name == topic:
                waiting.append((entry.seq or 0, segments[2].name, entry))
    for seq, key, entry in sorted(waiting, key=lambda w: w[0]):
        if key not in taken:
            return {"topic": topic, "key": key, "seq": seq, "payload": message_payload(run, entry), "timedOut": False}
    return None


def message_payload(run: str, entry: Entry) -> Any:
    """The payload a message entry carries (``{payload, nonce}``; the nonce tells racing sends of one key apart)."""
    got = entry.decode(run)
    return got.get("payload") if isinstance(got, Mapping) else None


def check_payload(message: Mapping[str, Any], schema: Mapping[str, Any] | None, resource: str) -> None:
    if schema is not None:
        SchemaValidator(schema, Code.DURABLE_PAYLOAD_INVALID).validate(
            message.get("payload"), where=f"the message {message.get('key')!r} of topic {message.get('topic')!r} "
            f"received by Durable.Receive {resource!r}")


# --- events out of a run ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Event:
    run: str
    name: str
    value: Any
    seq: int
    path: str  # the publishing step's entry
    at: int | None  # when it was journaled (epoch ms), if the store records it

    def to_json(self) -> dict[str, Any]:
        out = {"run": self.run, "name": self.name, "value": self.value, "seq": self.seq, "path": self.path}
        return out if self.at is None else {**out, "at": self.at}


def events(store: Store, run: str, name: str | None = None) -> list[Event]:
    """Every event the run published (of ``name``, when given), oldest first; ``ERR_DURABLE_RUN_NOT_FOUND`` for an
    unknown run."""
    if store.read_run(run) is None:
        raise TeloError(Code.DURABLE_RUN_NOT_FOUND, f"run {run!r} is not in the journal",
                        hint="list the runs: `telo runs list`", data={"run": run})
    out: list[Event] = []
    for path, entry in logical_entries(store, run).items():
        if entry.kind != "decision" or entry.decision != EVENT_DECISION:
            continue
        got = entry.decode(run)
        if isinstance(got, Mapping) and isinstance(got.get("name"), str) and (name is None or got["name"] == name):
            out.append(Event(run, got["name"], got.get("value"), entry.seq or 0, str(paths.parent(path)), entry.at))
    return sorted(out, key=lambda e: e.seq)


def latest_event(store: Store, run: str, name: str) -> Event | None:
    """The latest value the run published under ``name`` (None while it has published none)."""
    found = events(store, run, event_name(name, run))
    return found[-1] if found else None


def event_value(name: str, value: Any) -> dict[str, Any]:
    return {"name": name, "value": value}


def _event_or_settled(store: Store, run: str, name: str) -> tuple[Event | None, bool]:
    """The latest event of ``name`` and whether the wait for one is over. The status is read first: an event
    read after the run was seen settled is the last it will publish (read the other way round, one published just
    before the run settled was reported as never set)."""
    record = store.read_run(run)
    settled = record is None or record.status in SETTLED
    found = latest_event(store, run, name)
    return found, found is not None or settled


async def wait_for_event(store: Store, run: str, name: Any, wait_ms: int, *, clock: Clock = SYSTEM_CLOCK,
                         poll_s: float = 0.1) -> Event | None:
    """:func:`latest_event`, waiting up to ``wait_ms`` for the run to publish one (it polls the journal; a run
    that settles without publishing ends the wait). None if none came."""
    name = event_name(name, run)
    deadline = clock.monotonic() + wait_ms / 1000
    while True:
        found, final = await asyncio.to_thread(_event_or_settled, store, run, name)
        if found is not None or final or clock.monotonic() >= deadline:
            return found
        await asyncio.sleep(min(poll_s, max(0.0, deadline - clock.monotonic())))
