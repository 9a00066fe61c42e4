"""Changing a queue's limits without restarting its workers: ``telo queues set`` and ``App.set_queue_limits``
(issue 16; docs/proposals/admission-control.md "Visibility").

An override is a row of the journal's ``<prefix>_queues`` table (:mod:`telo.journal.queue_overrides`): the
limits it names replace the manifest's for every process on the journal — each reads the table again within
about a second, at its next claim (:mod:`telo.kinds.queue_overrides`) — and the others stay the manifest's. A
second ``set`` changes only what it names; ``reset`` drops the row, and the manifest's limits hold again. The row
records who changed it and when, which ``telo queues show`` prints with the manifest's value and the one in effect.

A limit is an integer ≥ 1, or ``none`` (Python: ``None``) for no limit whatever the manifest says; a rate is
``N/PERIOD`` (``100/1m``; Python also ``{"limit": 100, "period": "1m"}``). Anything else — 0, a negative or
fractional number, a period that is not a positive duration, a key limit for a queue without a
``concurrencyKey``, nothing to change — is ``ERR_INVALID_VALUE`` with a hint, before anything is written.
Lowering a limit never stops a run: the runs holding slots finish, and no new one starts until the queue is
under its new limit (docs/guarantees.md).
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from telo.clock import SYSTEM_CLOCK
from telo.errors import Code, TeloError
from telo.journal.queue_overrides import NO_LIMIT, QueueOverride
from telo.journal.store import Store
from telo.operations.queues import QueueConfig, with_override
from telo.specs.durations import duration_ms


class Unset(Enum):
    """The type of :data:`UNSET`."""

    UNSET = "unset"


UNSET: Final = Unset.UNSET  # a limit left as it is (None means "no limit")
Limit = int | str | None | Unset
Rate = str | Mapping[str, Any] | None | Unset

@dataclass(frozen=True, slots=True)
class Spelling:
    """How the limits were given, for messages and hints: the command line's options (``--key-limit none``) or
    the Python API's arguments (``key_limit=None``)."""

    names: Mapping[str, str]
    sep: str
    none: str

    def given(self, name: str, value: object) -> str:
        return f"{self.names[name]}{self.sep}{value}"


_LIMITS: Final = ("concurrency", "worker_concurrency", "key_limit", "rate_limit")
CLI: Final = Spelling({name: "--" + name.replace("_", "-") for name in (*_LIMITS, "reset")}, " ", "none")
API: Final = Spelling({name: name for name in (*_LIMITS, "reset")}, "=", "None")


@dataclass(frozen=True, slots=True)
class LimitsChange:
    """What a set or reset did: the queue's limits now (``config``: in effect, the manifest's and the override);
    for a reset, the override it dropped (None: there was none)."""

    config: QueueConfig
    reset: bool = False
    dropped: QueueOverride | None = None


def operator() -> str:
    """Who changes a limit when nobody says: ``user@host`` of this process."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # (no login name: a container's uid without a passwd entry)
        user = "unknown"
    return f"{user}@{socket.gethostname() or 'localhost'}"


def set_limits(store: Store, config: QueueConfig, *, concurrency: Limit = UNSET, worker_concurrency: Limit = UNSET,
               key_limit: Limit = UNSET, rate_limit: Rate = UNSET, reset: bool = False, by: str | None = None,
               now_ms: int | None = None, spelling: Spelling = CLI) -> LimitsChange:
    """Override the named limits of the queue ``config`` describes (as :func:`telo.operations.queues.config_of`
    reads it) in ``store``, or drop its override (``reset``); see the module docstring."""
    given = {k: v for k, v in zip(_LIMITS, (concurrency, worker_concurrency, key_limit, rate_limit), strict=True)
             if v is not UNSET}
    queue, reset_name = config.name, spelling.names["reset"]
    if reset:
        if given:
            raise _invalid(f"{reset_name} drops every override of queue {queue!r}: it takes no limit besides",
                           f"reset first, then set: give {reset_name} alone", queue)
        return LimitsChange(with_override(config, None), True, store.clear_queue_override(queue))
    if not given:
        raise _invalid(f"nothing to change for queue {queue!r}",
                       f"give {', '.join(spelling.names[k] for k in _LIMITS)} (N, or {spelling.none} for no limit), "
                       f"or {reset_name}", queue)
    parsed: dict[str, int | None] = {}
    for name, value in given.items():
        if name == "rate_limit":
            parsed["rate_limit"], parsed["rate_period_ms"] = parse_rate(value, spelling, queue)
        else:
            parsed[name] = parse_limit(value, name, spelling, queue)
    if "key_limit" in parsed and config.declared.key is None:
        raise _invalid(f"queue {queue!r} declares no concurrencyKey: there is no per-key limit to override",
                       "declare concurrencyKey: { key: !cel \"inputs.tenant\", limit: 2 } in the manifest (an override "
                       "changes its limit)", queue)
    at = SYSTEM_CLOCK.now_ms() if now_ms is None else now_ms
    row = QueueOverride(queue, parsed.get("concurrency"), parsed.get("worker_concurrency"), parsed.get("key_limit"),
                        parsed.get("rate_limit"), parsed.get("rate_period_ms"), set_by=by or operator(), set_at=at)
    return LimitsChange(with_override(config, store.set_queue_override(row)))


def _is_none(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() == "none")


def _integer(value: Any) -> Any:
    """``value``, or the integer a decimal text of one says (the command line gives text)."""
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())
    return value


def parse_limit(value: Any, name: str, spelling: Spelling, queue: str) -> int:
    """A limit as the override row keeps it: an integer ≥ 1, or :data:`NO_LIMIT` for none."""
    if _is_none(value):
        return NO_LIMIT
    number, option = _integer(value), spelling.names[name]
    if type(number) is not int:
        raise _invalid(f"{option} must be an integer ≥ 1 or {spelling.none}, got {value!r}",
                       f"e.g. {spelling.given(name, 3)}, or {spelling.given(name, spelling.none)} for no limit", queue)
    if number < 1:
        raise _invalid(f"{option} must be ≥ 1, got {number}: a limit of {number} would never start a run",
                       f"write {spelling.given(name, spelling.none)} for no limit", queue)
    return number


def parse_rate(value: Any, spelling: Spelling, queue: str) -> tuple[int, int | None]:
    """A rate as the override row keeps it: (limit, period ms), or (:data:`NO_LIMIT`, None) for none."""
    option = spelling.names["rate_limit"]
    hint = (f"write N/PERIOD, e.g. {spelling.given('rate_limit', '100/1m')} (PERIOD: 250ms, 2s, 1m, 1h, 1d), or "
            f"{spelling.given('rate_limit', spelling.none)} for no rate limit")
    if _is_none(value):
        return NO_LIMIT, None
    if isinstance(value, Mapping):
        limit, period = value.get("limit"), value.get("period")
    elif isinstance(value, str) and value.count("/") == 1:
        limit, period = (part.strip() for part in value.split("/"))
    else:
        raise _invalid(f"{option} must be N/PERIOD or {spelling.none}, got {value!r}", hint, queue)
    n = _integer(limit)
    if type(n) is not int or n < 1:
        raise _invalid(f"{option}'s N must be an integer ≥ 1, got {limit!r}", hint, queue)
    try:
        ms = duration_ms(_integer(period))
    except ValueError as exc:
        raise _invalid(f"{option}'s PERIOD is not a duration: {exc}", hint, queue) from None
    if ms < 1 or ms != int(ms):
        raise _invalid(f"{option}'s PERIOD must be a whole number of milliseconds, 1ms or more, got {period!r}",
                       hint, queue)
    return n, int(ms)


def _invalid(message: str, hint: str, queue: str) -> TeloError:
    return TeloError(Code.INVALID_VALUE, message, hint=hint, data={"queue": queue})
