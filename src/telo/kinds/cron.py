"""When a schedule's ticks fall (issue 17): cron expressions in a time zone, and fixed intervals. The one module
that imports ``cronsim`` (a cron parser made for this, by the healthchecks.io authors) and ``zoneinfo``.

A tick is an instant, in epoch milliseconds; a source answers "the first tick strictly after ``t``".

Cron expressions have five fields (minute hour day-of-month month day-of-week), or six with seconds first,
plus the macros ``@yearly`` ``@annually`` ``@monthly`` ``@weekly`` ``@daily`` ``@midnight`` ``@hourly``. They are
read in the schedule's ``timezone`` (IANA name, default ``UTC``). Daylight-saving transitions follow Debian
cron's rules, which cronsim implements:

- the fixed times a skipped stretch holds (spring forward: 02:30 in Europe/Berlin on the last Sunday of March)
  fire **once, together**, at the first instant after the gap (03:00 local): ``30 2 * * *`` and ``0,30 2 * * *``
  each fire one tick at 03:00 — never lost, never doubled;
- a fixed time the clocks repeat (fall back: 02:30 twice on the last Sunday of October) fires **once**, at its
  first occurrence;
- except that an expression whose minute or hour field is ``*`` or ``*/n`` (``0 * * * *``, ``*/30 2 * * *``)
  runs on the real clock: it fires at each real occurrence — twice in the repeated hour, not at all in the
  skipped one. A range with a step (``0-59/30``) counts as fixed times.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Final, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from telo.errors import Code, TeloError

MACROS: Final = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
_UTC = datetime.UTC


class Ticks(Protocol):
    """Where a schedule's ticks fall."""

    def after(self, ms: int) -> int:
        """The first tick strictly after ``ms`` (epoch milliseconds)."""
        ...

    def describe(self) -> str:
        """The source as a person reads it (``cron "0 9 * * 1-5" in Europe/Berlin``, ``every 30s``)."""
        ...


def zone(name: str, where: str) -> ZoneInfo:
    """The IANA time zone ``name`` (``ERR_MANIFEST_VALIDATION_FAILED`` naming ``where`` if unknown)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise TeloError(Code.MANIFEST_VALIDATION_FAILED, f"{where}: {name!r} is not a time zone this machine knows",
                        hint="use an IANA name such as UTC, Europe/Berlin or America/New_York",
                        data={"timezone": name}) from None


class CronTicks:
    """The ticks of a cron expression read in a time zone (the module docstring has the DST rules)."""

    def __init__(self, expression: str, timezone: str, where: str) -> None:
        self.expression = expression.strip()
        self.timezone = timezone
        self._zone = zone(timezone, where)
        self._fields = MACROS.get(self.expression.lower(), self.expression)
        try:
            next(CronSim(self._fields, datetime.datetime(2026, 1, 1, tzinfo=self._zone)))
        except (CronSimError, StopIteration) as exc:
            raise TeloError(Code.MANIFEST_VALIDATION_FAILED,
                            f"{where}: {self.expression!r} is not a cron expression telo can read ({exc})",
                            hint="five fields (minute hour day-of-month month day-of-week), six with seconds "
                                 "first, or a macro such as @hourly; e.g. cron: \"*/15 9-17 * * 1-5\"",
                            data={"cron": self.expression}) from None

    def after(self, ms: int) -> int:
        start = datetime.datetime.fromtimestamp(ms / 1000, tz=_UTC).astimezone(self._zone)
        found = next(CronSim(self._fields, start))
        return int(found.timestamp() * 1000)

    def describe(self) -> str:
        return f"cron {self.expression!r} in {self.timezone}"


class IntervalTicks:
    """Every ``every_ms`` from ``anchor_ms`` (exclusive): the first tick lands one interval after the anchor, as
    upstream's ``Schedule.Interval`` does after it starts."""

    def __init__(self, every_ms: int, anchor_ms: int, every_text: str) -> None:
        self.every_ms = every_ms
        self.anchor_ms = anchor_ms
        self.every_text = every_text

    def after(self, ms: int) -> int:
        if ms < self.anchor_ms:
            return self.anchor_ms + self.every_ms
        return self.anchor_ms + ((ms - self.anchor_ms) // self.every_ms + 1) * self.every_ms

    def describe(self) -> str:
        return f"every {self.every_text}"


def between(ticks: Ticks, after_ms: int, until_ms: int, limit: int) -> Iterator[int]:
    """The ticks in ``(after_ms, until_ms]``, at most ``limit`` of them, in order."""
    at = after_ms
    for _ in range(limit):
        at = ticks.after(at)
        if at > until_ms:
            return
        yield at


def tick_text(ms: int) -> str:
    """An instant as RFC 3339 in UTC, to the second (``2026-12-02T17:00:00Z``), with milliseconds only when it
    has some: what a tick's run id and its ledger entry are named by."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=_UTC)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{ms % 1000:03d}Z" if ms % 1000 else f"{text}Z"


def local_text(ms: int, timezone: str) -> str:
    """An instant as RFC 3339 with the zone's offset at that instant (``2026-03-29T03:00:00+02:00``)."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=_UTC).astimezone(ZoneInfo(timezone))
    return moment.isoformat(timespec="milliseconds" if ms % 1000 else "seconds")
