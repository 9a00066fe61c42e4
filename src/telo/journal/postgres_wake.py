"""Wake-ups over PostgreSQL LISTEN/NOTIFY (reference §6 "Local.Resumer", §7 "onWake").

An unpark (a delivery, an operator resume) NOTIFYs ``<channel>`` with the run id; a resumer subscribed here
sweeps at once instead of waiting for its next interval. NOTIFY is only a hint: a missed one (listener down,
server restart) costs latency, never correctness, because the resumer's timed sweep still finds the run due.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Final

import psycopg
from psycopg import sql

from telo.journal.postgres_session import CONNECT_OPTIONS
from telo.journal.redact import redact

log = logging.getLogger("telo.journal.postgres")

_POLL_S: Final = 0.25  # how often the listen loop looks at its stop flag
_READY_WAIT_S: Final = 5.0
_BACKOFF_FIRST_S: Final = 0.1
_BACKOFF_MAX_S: Final = 5.0


class WakeListener:
    """One dedicated LISTEN connection in a daemon thread, calling ``callback(run)`` for each NOTIFY."""

    def __init__(self, url: str, channel: str, callback: Callable[[str], None]) -> None:
        self._url = url
        self._channel = channel
        self._callback = callback
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"telo-pg-wake:{channel}", daemon=True)
        self._thread.start()
        # Return once LISTEN is in place (or the first attempt failed), so a NOTIFY sent right after
        # subscribing is not lost to a listener that was still connecting.
        self._ready.wait(_READY_WAIT_S)

    def stop(self) -> None:
        self._stop.set()
        if threading.current_thread() is not self._thread:  # an unsubscribe from inside the callback
            self._thread.join(timeout=2 * _POLL_S + 1.0)

    def _run(self) -> None:
        backoff = _BACKOFF_FIRST_S
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._url, autocommit=True, **CONNECT_OPTIONS) as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                    self._ready.set()
                    backoff = _BACKOFF_FIRST_S
                    while not self._stop.is_set():
                        for notify in conn.notifies(timeout=_POLL_S):
                            self._deliver(notify.payload)
                            if self._stop.is_set():
                                break
            except psycopg.Error as exc:
                self._ready.set()
                if self._stop.is_set():
                    return
                # the wake-up listener lost its connection; it reconnects after the backoff
                log.warning("journal.postgres.listener_reconnecting",
                            extra={"durable.channel": self._channel, "journal.backoff_s": backoff,
                                   "error.message": redact(str(exc))})
                self._stop.wait(backoff)
                backoff = min(backoff * 2, _BACKOFF_MAX_S)

    def _deliver(self, run: str) -> None:
        try:
            self._callback(run)
        except Exception:  # a subscriber's bug must not kill the listener for every later wake-up
            log.exception("journal.postgres.wake_callback_failed", extra={"durable.run": run})


class WakeHub:
    """The wake-up subscribers of one store, sharing ONE listener (one LISTEN connection), started with the
    first subscriber and stopped with the last: a worker of a manifest with ten workflows holds one
    connection for its wake-ups, not ten."""

    def __init__(self, url: str, channel: str) -> None:
        self._url = url
        self._channel = channel
        self._lock = threading.Lock()
        self._callbacks: dict[int, Callable[[str], None]] = {}
        self._next = 0
        self._listener: WakeListener | None = None

    def subscribe(self, callback: Callable[[str], None]) -> Callable[[], None]:
        with self._lock:
            key = self._next
            self._next += 1
            self._callbacks[key] = callback
            if self._listener is None:
                self._listener = WakeListener(self._url, self._channel, self._deliver)

        def unsubscribe() -> None:
            with self._lock:
                self._callbacks.pop(key, None)
                listener = self._listener if not self._callbacks else None
                if listener is not None:
                    self._listener = None
            if listener is not None:
                listener.stop()

        return unsubscribe

    def _deliver(self, run: str) -> None:
        with self._lock:
            callbacks = list(self._callbacks.values())
        for callback in callbacks:
            try:
                callback(run)
            except Exception:  # a subscriber's bug must not keep the wake-up from the others
                log.exception("journal.postgres.wake_callback_failed", extra={"durable.run": run})

    def close(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            self._callbacks.clear()
        if listener is not None:
            listener.stop()
