"""Where the engine journals, and whether it may (spec §4, §8.1; reference §4 "Collapse"); and whether the
enclosing zones let a run park here (spec §9 ``noSuspend``).

:func:`journal_for` answers, at one journaling site, which handle to record through: ``None`` outside a
durable run, and ``None`` inside a collapsed region — a region collapses when an enclosing zone is
``idempotent``, or ``atomic`` without the handle attesting it writes inside. Every zone walked is reported,
innermost first, so the backend can emit one ``durable.zone.mode`` record per region.
"""

from __future__ import annotations

from telo.engine.context import InvokeContext, current
from telo.engine.handle import RunHandle
from telo.engine.zones import ATOMIC, IDEMPOTENT, NO_SUSPEND, ZoneReport
from telo.errors import SuspendForbidden


def journal_for(ctx: InvokeContext | None = None) -> RunHandle | None:
    ctx = ctx or current()
    handle = ctx.handle
    if handle is None:
        return None
    handle.check_cancelled()
    for zone in reversed(ctx.zones):
        if zone.has(IDEMPOTENT):
            handle.report_zone(ZoneReport(zone, IDEMPOTENT, "collapsed"))
            return None
        if zone.has(ATOMIC):
            if handle.writes_inside(zone):
                handle.report_zone(ZoneReport(zone, ATOMIC, "perStep", "writesInside"))
                continue
            handle.report_zone(ZoneReport(zone, ATOMIC, "collapsed"))
            return None
    return handle


def suspend_allowed(resource: str) -> None:
    """Parking inside a ``noSuspend`` zone is refused, quoting that zone's own reason (spec §9)."""
    for zone in reversed(current().zones):
        if zone.has(NO_SUSPEND):
            raise SuspendForbidden(
                f"{resource!r} would park inside {zone.kind} {zone.resource or ''}, which forbids suspending: "
                f"{zone.reason(NO_SUSPEND)}".replace("  ", " "),
                hint="move the wait or the long retry outside the region, or shorten the backoff below 30 s",
                data={"resource": resource, "zone": zone.kind, "reason": zone.reason(NO_SUSPEND)},
            )
