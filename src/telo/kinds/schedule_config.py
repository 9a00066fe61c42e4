"""Reading a schedule's configuration (issue 17): what it invokes, ``every``, and the durable form's policies
(:class:`telo.kinds.schedule_plan.Policy`). Every field is checked at load, with the field named in the error."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from telo.errors import Code, TeloError
from telo.specs.durations import duration_ms

from .addressing import instant_ms
from .journals import compile_time
from .schedule_plan import CATCH_UP, DEFAULT_WINDOW_MS, OVERLAP, Policy

if TYPE_CHECKING:
    from telo.runtime.resource import Host, Resource

# The fields only a durable schedule (one invoking a DurableLocal.Workflow) has: an in-process timer keeps no
# record to catch up from, buffer in, or pause.
DURABLE_FIELDS = ("catchUp", "catchUpWindow", "overlap", "jitter", "startAt", "endAt", "pauseOnFailure")


def _invalid(where: str, field: str, message: str, hint: str) -> TeloError:
    return TeloError(Code.MANIFEST_VALIDATION_FAILED, f"{where}.{field}: {message}", hint=hint,
                     data={"field": field})


def target_of(app: Host, config: Mapping[str, Any], where: str) -> Resource:
    """The resource ``invoke`` names; it must be invocable."""
    target = app.resource_for(config["invoke"], where=f"{where}.invoke")
    if not target.invocable:
        raise _invalid(where, "invoke", f"{target.kind} {target.name!r} cannot be invoked",
                       "invoke a DurableLocal.Workflow (durable ticks) or any invocable kind (an in-process timer)")
    return target


def _ms(app: Host, config: Mapping[str, Any], field: str, where: str, hint: str) -> int | None:
    raw = config.get(field)
    if raw is None:
        return None
    value = compile_time(app, raw, f"{where}.{field}")
    try:
        ms = int(duration_ms(value))
    except ValueError as exc:
        raise _invalid(where, field, str(exc), hint) from None
    if ms < 0:
        raise _invalid(where, field, f"must not be negative, got {value!r}", hint)
    return ms


def every_ms(app: Host, config: Mapping[str, Any], where: str) -> int:
    """``every``: a positive duration (``30s``, ``5m``, ``1h``)."""
    ms = _ms(app, config, "every", where.rsplit(".", 1)[0], "write e.g. every: 30s")
    if not ms:
        raise _invalid(where.rsplit(".", 1)[0], "every", "must be a positive duration", "write e.g. every: 30s")
    return ms


def policy_of(app: Host, config: Mapping[str, Any], where: str, *, durable: bool) -> Policy:
    present = [f for f in DURABLE_FIELDS if f in config]
    if not durable:
        if present:
            raise _invalid(where, present[0], "only a durable schedule has this policy",
                           "make `invoke` a DurableLocal.Workflow (its ticks are then journaled), or drop the "
                           "field: an in-process timer has no record to catch up, buffer or pause from")
        return Policy()
    catch_up = str(config.get("catchUp", "latest"))
    if catch_up not in CATCH_UP:
        raise _invalid(where, "catchUp", f"{catch_up!r} is not one of {', '.join(CATCH_UP)}",
                       "catchUp: latest fires the most recent missed tick; all fires each; none skips them")
    overlap = str(config.get("overlap", "skip"))
    if overlap not in OVERLAP:
        raise _invalid(where, "overlap", f"{overlap!r} is not one of {', '.join(OVERLAP)}",
                       "overlap says what a tick does while the previous tick's run has not settled")
    window = _ms(app, config, "catchUpWindow", where, "write e.g. catchUpWindow: 1h")
    jitter = _ms(app, config, "jitter", where, "write e.g. jitter: 30s")
    start_at = _instant(app, config, "startAt", where)
    end_at = _instant(app, config, "endAt", where)
    if start_at is not None and end_at is not None and end_at <= start_at:
        raise _invalid(where, "endAt", "must be after startAt", "a schedule ticks from startAt until endAt")
    pause = config.get("pauseOnFailure", False)
    if not isinstance(pause, bool):
        raise _invalid(where, "pauseOnFailure", f"must be true or false, got {pause!r}", "pauseOnFailure: true")
    return Policy(catch_up, window if window is not None else DEFAULT_WINDOW_MS, overlap, jitter or 0,
                  start_at, end_at, pause)


def _instant(app: Host, config: Mapping[str, Any], field: str, where: str) -> int | None:
    raw = config.get(field)
    if raw is None:
        return None
    return instant_ms(compile_time(app, raw, f"{where}.{field}"), Code.MANIFEST_VALIDATION_FAILED,
                      f"{where}.{field}")
