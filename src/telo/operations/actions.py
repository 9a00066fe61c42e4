"""Operating on runs: deliver, send (messages), events, cancel, resume, resolve, fork, restore. Synchronous
(stores block and are thread-safe; the Python API calls these through ``asyncio.to_thread``). Each returns a
typed result and raises :class:`~telo.errors.TeloError` with a code; none continues a run — a worker, a rerun,
or the Python API (which continues runs of its own application in-process) does that.

The rules that the addressing kinds share live one layer down, in :mod:`telo.durable.operator`; the payload
schema a delivery is checked against is the one the Await recorded in the journal (:func:`telo.durable.waits
.deliver`), so every front end validates the same payload the same way, with or without the manifest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from telo.clock import SYSTEM_CLOCK, Clock, uuid4_hex
from telo.durable import messages, operator, streams
from telo.durable.messages import Event, Sent
from telo.durable.operator import Cancelled, Resumed
from telo.durable.streams import StreamPage, StreamSummary
from telo.errors import Code, TeloError
from telo.journal import eventlog
from telo.journal.eventlog import Checkpoint
from telo.journal.model import NO_VALUE, RunRecord
from telo.journal.store import Store
from telo.operations.runs import resolve_checkpoint

__all__ = ["Cancelled", "Delivered", "Event", "Forked", "Restored", "Resumed", "Sent", "cancel", "deliver", "events",
           "follow_stream", "fork", "fork_id", "list_streams", "payload_from_json", "read_stream", "resolve",
           "restore", "resume", "send", "wait_for_event"]

FORK_MARK = ":fork:"  # docs/cli.md: a fork's default id is <run>:fork:<8 hex>


@dataclass(frozen=True, slots=True)
class Delivered:
    """What a delivery did: ``delivered`` is false for a spent or unknown token (nothing was written)."""

    delivered: bool
    run: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"delivered": True, "run": self.run} if self.delivered else {"delivered": False}


@dataclass(frozen=True, slots=True)
class Forked:
    run: str  # the new run
    source: str
    checkpoint: int
    workflow: str | None
    status: str
    keys: str | None = None  # the run whose idempotency keys it keeps (``keep_keys``); None: its own

    def to_json(self) -> dict[str, Any]:
        """What ``telo fork --json`` and the dashboard's fork answer (``keepsKeysOf`` only when kept)."""
        out: dict[str, Any] = {"run": self.run, "forkedFrom": self.source, "checkpoint": self.checkpoint,
                               "status": self.status}
        return out if self.keys is None else {**out, "keepsKeysOf": self.keys}


@dataclass(frozen=True, slots=True)
class Restored:
    run: str
    checkpoint: int
    epoch: int
    status: str


def payload_from_json(text: str | None, where: str, *, empty_is_null: bool = True) -> Any:
    """A payload written as JSON text (a CLI option, a form field) as a domain value (integers as CEL int);
    ``ERR_DURABLE_PAYLOAD_INVALID`` when it is not JSON. None is ``null``, and so is empty text (a form's empty
    field) unless ``empty_is_null`` is False (a command-line option given as ``''``: not JSON)."""
    from telo.values import from_plain
    from telo.values.depth import load_json

    if text is not None and not text.strip() and not empty_is_null:
        raise TeloError(Code.DURABLE_PAYLOAD_INVALID, f"{where} is empty, which is not JSON",
                        hint='write JSON, e.g. {"approvedBy": "ada"}, or null')
    try:  # nested past the value domain's limit: ERR_TYPED_FRAME_UNENCODABLE naming `where`
        plain = load_json(text, where) if text else None
    except ValueError as exc:
        raise TeloError(Code.DURABLE_PAYLOAD_INVALID, f"{where} is not JSON: {exc}",
                        hint='write JSON, e.g. {"approvedBy": "ada"}') from exc
    return from_plain(plain, {})


def deliver(store: Store, token: str, payload: Any) -> Delivered:
    """Deliver ``payload`` (a domain value) to the run parked on ``token``, checked first against the schema
    its Await recorded (``ERR_DURABLE_PAYLOAD_INVALID``); of racing deliveries to one token exactly one is
    delivered."""
    from telo.durable.waits import deliver as deliver_to

    out = deliver_to(store, token, payload)
    run = out.get("run")
    return Delivered(bool(out.get("delivered")), run if isinstance(run, str) else None)


def send(store: Store, run: str, topic: str, payload: Any, *, key: str | None = None) -> Sent:
    """Send ``payload`` to the run's receives of ``topic``, durable on return; idempotent by ``key`` (a second
    send with one key writes nothing: ``duplicate``). A receive parked on the topic is made due again (``woke``)."""
    return messages.send(store, run, topic, payload, key=key)


def events(store: Store, run: str, name: str | None = None) -> list[Event]:
    """Every event the run published (of ``name``, when given), oldest first."""
    return messages.events(store, run, name)


async def wait_for_event(store: Store, run: str, name: str, wait_ms: int, *, clock: Clock = SYSTEM_CLOCK
                         ) -> Event | None:
    """The latest event of ``name``, waiting up to ``wait_ms`` for the run to publish one (None if none came)."""
    return await messages.wait_for_event(store, run, name, wait_ms, clock=clock)


def read_stream(store: Store, run: str, stream: str, offset: int = 0) -> StreamPage:
    """The run's stream from ``offset`` on: its values, the next offset, and whether it ended."""
    return streams.read(store, run, stream, offset)


def list_streams(store: Store, run: str) -> tuple[list[StreamSummary], bool]:
    """The run's streams (name, values written, closed), and whether the run has settled."""
    return streams.summaries(store, run)


def follow_stream(store: Store, run: str, stream: str, offset: int = 0, *, wait_s: float | None = None,
                  clock: Clock = SYSTEM_CLOCK) -> AsyncIterator[tuple[int, Any]]:
    """Every value of the stream from ``offset`` on, waiting for more until it is closed or the run settles."""
    return streams.follow(store, run, stream, offset, wait_s=wait_s, clock=clock)


def cancel(store: Store, run: str, reason: str) -> Cancelled:
    """Cancel a run that has not settled (a body executing it stops at its next step)."""
    return operator.cancel_run(store, run, reason)


def resume(store: Store, run: str, reason: str, now_ms: int, *, force: bool = False) -> Resumed:
    """Continue a parked run now, an operator override recorded in the journal; a run held because its
    manifest changed continues only with ``force`` (else ``ERR_DURABLE_MANIFEST_CHANGED``). A run a resume
    would not move — settled, not parked, or waiting for an answer (``telo resolve``) or a delivery
    (``telo deliver``) — is answered ``resumed: false`` with the reason and what would move it, and nothing
    is written (:func:`telo.durable.operator.unmovable`)."""
    record = operator.require_run(store, run)
    stuck = operator.unmovable(record, now_ms, message_waiting=_message_waiting(store, record))
    if stuck is not None:
        return stuck
    return operator.resume_run(store, run, reason, now_ms, force=force)


def _message_waiting(store: Store, record: RunRecord) -> bool:
    """Does a receive the parked run waits at have an untaken message (its sender's wake lost)? The receives of
    parallel branches each record ``@waiting`` (telo.durable.messages); the park's token names one of them."""
    if record.status != "parked":
        return False
    token = record.parked.token if record.parked is not None else None
    inbox = f"{messages.INBOX_TOKEN_PREFIX}{record.run}:"
    topic = token[len(inbox):] if isinstance(token, str) and token.startswith(inbox) else None
    return messages.message_waiting(record.run, messages.logical_entries(store, record.run), topic)


def resolve(store: Store, run: str, path: str, action: str, value: Any = NO_VALUE,
            now_ms: int | None = None) -> Mapping[str, Any]:
    """Answer an unconfirmed effect: ``redrive``, ``skip`` (with ``value`` as its result) or ``fail``."""
    return operator.resolve_unconfirmed(store, run, path, action, value, now_ms)


def fork_keys_note(new_run: str, source: str, keys: str | None = None, *, keep: str = "--keep-keys") -> str:
    """Which idempotency keys a fork's re-executed steps carry (``telo fork`` and the dashboard say it alike;
    event-log §2). By default ``<new run>/<step path>``: the fork is another run, so an effect keyed by it is new
    to a system that deduplicated the original's. With ``keys`` (a fork that keeps them, telo.journal.lineage)
    ``<keys>/<step path>``, which such a system has seen. ``keep``: how the front end asks to keep them."""
    if keys is not None:
        return (f"the steps after the checkpoint execute again under {keys}'s idempotency keys ({keys}/steps/…), "
                f"not new ones: a system that deduplicates by key answers them from its record of {keys}'s effects "
                "(one that does not may perform them twice)")
    return (f"the steps after the checkpoint execute again under the new run's idempotency keys "
            f"({new_run}/steps/…), not {source}'s: an effect that is not idempotent across runs may happen twice; "
            f"fork with {keep} to execute them under the original's keys instead")


def fork_id(run: str) -> str:
    """The default id of a fork of ``run``: ``<run>:fork:<8 hex>`` (docs/cli.md)."""
    return f"{run}{FORK_MARK}{uuid4_hex()[:8]}"


def fork(store: Store, run: str, checkpoint: int | str | Checkpoint, new_run: str | None = None, *,
         keep_keys: bool = False) -> Forked:
    """Copy ``run``'s state at ``checkpoint`` into a new run (``new_run``, default :func:`fork_id`); the
    original is left untouched. The copy is ``running``: whoever continues runs continues it from there.
    ``keep_keys``: its steps carry ``run``'s idempotency keys (its root's, for a fork that kept them), recorded
    in its journal (telo.journal.lineage), instead of its own."""
    seq = resolve_checkpoint(store, run, checkpoint)
    target = new_run or fork_id(run)
    state = eventlog.fork(store, run, seq, target, keep_keys=keep_keys)
    record = state.record
    keys = state.origin.keys if state.origin is not None else None
    return Forked(target, run, seq, record.workflow if record else None, record.status if record else "running",
                  keys)


def restore(store: Store, run: str, checkpoint: int | str | Checkpoint, *, reason: str = "restored by operator",
            clock: Clock = SYSTEM_CLOCK) -> Restored:
    """Roll ``run`` back to ``checkpoint`` as a new journal epoch: the steps after it execute again."""
    seq = resolve_checkpoint(store, run, checkpoint)
    state = eventlog.restore(store, run, seq, reason=reason, clock=clock)
    return Restored(run, seq, state.epoch, state.record.status if state.record else "running")
