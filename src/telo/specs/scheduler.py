"""Module ``scheduler`` (library ``Scheduler``; manifests usually import it as ``Schedule``): ``Scheduler.Cron``
and ``Scheduler.Interval`` (upstream-sql-and-scheduler.md "scheduler"; issue 17 adds the durable form)."""

from __future__ import annotations

from .common import Schema, compile_time, duration, ref, runtime
from .model import KindSpec, ModuleSpec, module

M = "Scheduler"

_TICK = {"x-telo-scope": ["tick"]}
_TICK_TEXT = ("`tick.at` (the tick as RFC 3339 UTC), `tick.local` (in `timezone`), `tick.ms` (epoch ms) and "
              "`tick.schedule`")
_DURABLE = "Durable form only (`invoke` is a `DurableLocal.Workflow`). "


def _common() -> dict[str, Schema]:
    return {
        "invoke": ref(description="What each tick runs. A `DurableLocal.Workflow`: the durable form — each tick "
                                  "starts one run `<schedule>@<RFC 3339 tick>`, exactly once across processes and "
                                  "crashes, recorded in the schedule's ledger. Anything else invocable: an "
                                  "in-process timer as upstream's (every process fires; a missed tick is lost)."),
        "inputs": runtime(**_TICK, description=f"The call's inputs for each tick; its CEL sees {_TICK_TEXT}. "
                                                "Absent: `{tick: <RFC 3339 tick>}`."),
        "when": runtime(type="boolean", **_TICK,
                        description=f"A gate per tick (CEL seeing {_TICK_TEXT}): false skips the tick (recorded "
                                    "in the durable form)."),
        "catchUp": {"enum": ["none", "latest", "all"], "default": "latest",
                    "description": _DURABLE + "Ticks missed while no worker ran (decided more than a minute "
                                   "late): `latest` fires the most recent due tick (an on-time one if there is "
                                   "one) and skips the others, `all` fires each, `none` skips them. Skipped "
                                   "ticks are recorded as one range."},
        "catchUpWindow": compile_time(**duration(default="1d"),
                                      description=_DURABLE + "Missed ticks older than this are skipped whatever "
                                                             "`catchUp` says."),
        "overlap": {"enum": ["skip", "bufferOne", "bufferAll", "cancelRunning", "allow"], "default": "skip",
                    "description": _DURABLE + "A tick while the previous tick's run has not settled: `skip` it; "
                                   "`bufferOne` starts it once the previous settles (one waits at most, later "
                                   "ones are skipped); `bufferAll` starts each in turn; `cancelRunning` cancels "
                                   "the previous run and fires; `allow` fires regardless."},
        "jitter": compile_time(**duration(), description=_DURABLE + "Each tick's run is due up to this long after "
                                                                    "its tick (a fixed delay per tick, the same in "
                                                                    "every process); the run id keeps the tick."),
        "startAt": compile_time(type=["string", "integer"],
                                description=_DURABLE + "No tick before this instant (RFC 3339 or epoch ms); an "
                                                       "interval schedule's ticks count from it."),
        "endAt": compile_time(type=["string", "integer"],
                              description=_DURABLE + "No tick after this instant (RFC 3339 or epoch ms)."),
        "pauseOnFailure": {"type": "boolean", "default": False,
                           "description": _DURABLE + "Pause the schedule when a tick's run fails (recorded; "
                                                     "`telo schedules resume` lifts it)."},
    }


CRON = KindSpec(
    M, "Cron",
    {"type": "object", "additionalProperties": False, "required": ["cron", "invoke"],
     "properties": {
         "cron": {"type": "string",
                  "description": "Five fields (minute hour day-of-month month day-of-week), six with seconds first, "
                                 "or `@hourly` `@daily` `@weekly` `@monthly` `@yearly`."},
         "timezone": {"type": "string", "default": "UTC",
                      "description": "The IANA zone the expression is read in. Fixed times the clocks skip fire "
                                     "once, together, right after the gap; a repeated one fires once, at its "
                                     "first occurrence; a minute or hour field of `*` or `*/n` follows the real "
                                     "clock (docs/schedules.md)."},
         **_common()}},
    "service",
    description="Runs `invoke` on a cron expression in a time zone. Invoking a durable workflow, its ticks are "
                "journaled: each fires exactly once across processes and crashes, missed ticks are caught up by "
                "`catchUp`, and `telo schedules` pauses, resumes, triggers and backfills it.",
    example="""\
kind: Scheduler.Cron
metadata: { name: nightly }
cron: "30 2 * * *"
timezone: Europe/Berlin
invoke: !ref report
inputs: { day: !cel "tick.local" }
catchUp: latest
overlap: skip
""",
)

INTERVAL = KindSpec(
    M, "Interval",
    {"type": "object", "additionalProperties": False, "required": ["every", "invoke"],
     "properties": {
         "every": compile_time(**duration(), description="The interval (`30s`, `5m`, `1h`): the first tick lands "
                                                         "one interval after the schedule first runs (or after "
                                                         "`startAt`)."),
         **_common()}},
    "service",
    description="Runs `invoke` every interval; with a durable workflow, its ticks are journaled like "
                "`Scheduler.Cron`'s.",
    example="""\
kind: Scheduler.Interval
metadata: { name: sweep }
every: 5m
invoke: !ref cleanup
""",
)

SCHEDULER: ModuleSpec = module("scheduler", M, CRON, INTERVAL)
