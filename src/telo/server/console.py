"""What the run page derives from a run's journal for an operator: when things happened, which steps ran,
failed or wait and for how long, their retries, their fan-outs, and the timeline bars (issue 15).

Every entry a telo store writes records when it was written (``Entry.at``, epoch ms from the store's clock), so
a step's duration runs from its first entry — its inputs intent (event-log §1 ``effect_intent``) — to the entry
that ends it: its receipt, its failure receipt, or for an Await the delivery (its first entry is written as it
parks, so that is the park to the delivery). The Gantt-like timeline is laid out over those times. Entries of a
journal written before entries had times (the upstream runtime's, an older telo's) have none, and nothing here
invents one: such an entry gets an ``at`` only when its recorded value says when it happened (a retry verdict,
an operator's resume, a restore), and the timeline then runs over log positions, as it also does when every
entry was written in the same millisecond. Every time leaves as RFC 3339 text in UTC with milliseconds
(:func:`rfc3339`), the CLI's format.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from telo import paths
from telo.errors import TeloError
from telo.journal.model import RunRecord


def rfc3339(ms: Any) -> str | None:
    """Epoch milliseconds as ``2026-12-02T07:52:55.123Z`` (None for no time): one width for every time."""
    if not isinstance(ms, int) or isinstance(ms, bool):
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def recorded_at(item: Mapping[str, Any]) -> int | None:
    """When a timeline item happened, in epoch ms, if its value records it: a retry verdict was written at
    ``dueAt - backoffMs`` (engine/retry.py computes the due time from the moment of the failure); an operator's
    resume, a digest acceptance and a restore record an ``at``. None for everything else."""
    value = item.get("value")
    if not isinstance(value, Mapping):
        return None
    if item.get("decision") == "retry" and isinstance(value.get("dueAt"), int) \
            and isinstance(value.get("backoffMs"), int):
        return int(value["dueAt"]) - int(value["backoffMs"])
    at = value.get("at")
    if isinstance(at, int) and not isinstance(at, bool):
        return at
    if isinstance(at, str):
        from telo.values.types import parse_rfc3339

        try:
            return parse_rfc3339(at).epoch_millis()
        except (TeloError, ValueError):
            return None
    return None


def _split(path: str) -> tuple[str, str] | None:
    """``(step, last segment name)`` of a path, or None for a path that does not parse."""
    try:
        segments = paths.parse(path)
    except TeloError:
        return None
    if len(segments) < 2:
        return None
    return path.rsplit("/", 1)[0], segments[-1].name


def steps(events: Sequence[Mapping[str, Any]], record: RunRecord, now_ms: int,
          attempts_of: Mapping[str, int] | None = None,
          times: Mapping[int, int] | None = None) -> list[dict[str, Any]]:
    """One row per step that recorded an intent or a receipt, in the order it started: where it starts and
    ends in the log (``from``/``to`` seqs), its ``state`` (completed, failed, parked, open), its failure, its
    retries (``attempt``, the last verdict and when the next attempt is due), for a fan-out the items whose
    steps all have receipts (``fanOut: {done, total}``), and — from ``times``, each entry's write time by seq —
    when it started and ended and how long it took (``startedAt``, ``endedAt``, ``durationMs``; None where an
    entry has no time or the step has not ended) and ``offsetMs``, its start after the run's first entry."""
    rows: dict[str, dict[str, Any]] = {}
    last_seq = 0
    collections: dict[str, int] = {}
    for e in events:
        seq = e.get("seq")
        if not isinstance(seq, int):
            continue
        last_seq = max(last_seq, seq)
        path = str(e["path"])
        category = e.get("category")
        if category == "intent" and path.endswith("/inputs"):
            step = path[: -len("/inputs")]
            rows.setdefault(step, {"path": step, "from": seq, "state": "open", "attempt": 1})
            continue
        split = _split(path)
        if category == "step" and e.get("target") is not None:
            done = rows.setdefault(path, {"path": path, "from": seq, "state": "open", "attempt": 1})
            done.update({"to": seq, "state": "completed", "target": e["target"]})
            continue
        if category == "delivery" and path in rows:  # an Await's result is the payload delivered to it
            rows[path].update({"to": seq, "state": "completed"})
            continue
        if split is None:
            continue
        step, name = split
        row = rows.get(step)
        value = e.get("value")
        if name == paths.FAILED and row is not None and isinstance(value, Mapping):
            row.update({"to": seq, "state": "failed",
                        "error": {"code": value.get("code"), "message": value.get("message")}})
        elif name == paths.RETRY_VERDICT and row is not None and isinstance(value, Mapping):
            row["lastFailure"] = {"code": value.get("code"), "message": value.get("message"),
                                  "at": rfc3339(recorded_at(e))}
            if isinstance(value.get("dueAt"), int):
                row["nextAttemptAt"] = rfc3339(value["dueAt"])
                row["nextAttemptInMs"] = max(0, int(value["dueAt"]) - now_ms)
            row["retries"] = row.get("retries", 0) + 1
        elif name == paths.ATTEMPT_MARK and row is not None and isinstance(value, Mapping):
            attempt = value.get("attempt")
            if isinstance(attempt, int):
                row["attempt"] = attempt + 1  # attempt k is the (k+1)-th
                row.pop("nextAttemptAt", None)
                row.pop("nextAttemptInMs", None)
        elif name == paths.COLLECTION and isinstance(value, list):
            collections[step] = len(value)
    parked = record.parked.path if record.status == "parked" and record.parked is not None else None
    for row in rows.values():
        if row["state"] == "open":
            row["to"] = last_seq
            if parked is not None and (parked == row["path"] or parked.startswith(row["path"] + "/")):
                row["state"] = "parked"
            if record.status in ("failed", "cancelled") and "nextAttemptAt" in row:
                row.pop("nextAttemptAt")
                row.pop("nextAttemptInMs", None)
        if row.get("retries") and attempts_of and row["path"] in attempts_of:
            row["attempts"] = attempts_of[row["path"]]
        if row["path"] in collections:
            row["fanOut"] = _fan_out(row["path"], collections[row["path"]], rows)
    ordered = sorted(rows.values(), key=lambda r: (r["from"], r["path"]))
    first = min(times.values()) if times else None
    for row in ordered:
        row["depth"] = row["path"].count("/") - 1
        _timed(row, times or {}, first)
    return ordered


def _timed(row: dict[str, Any], times: Mapping[int, int], first: int | None) -> None:
    """A step's times from its first and last entries' (an open or parked step has not ended)."""
    start = times.get(row["from"])
    end = times.get(row["to"]) if row["state"] in ("completed", "failed") else None
    row["startedAt"] = rfc3339(start)
    row["endedAt"] = rfc3339(end)
    row["durationMs"] = None if start is None or end is None else end - start
    row["offsetMs"] = None if start is None or first is None else start - first


def span_ms(times: Mapping[int, int], rows: Sequence[Mapping[str, Any]], record: RunRecord,
            now_ms: int) -> int | None:
    """How long the timeline spans: the run's first entry to its last — or to now while a step of a run that has
    not settled is still open or waiting, whose bar runs until now (None when no entry has a time)."""
    if not times:
        return None
    end = max(times.values())
    if not record.terminal and any(row["state"] in ("open", "parked") for row in rows):
        end = max(end, now_ms)
    return end - min(times.values())


def _fan_out(step: str, total: int, rows: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """A fan-out's progress: of its ``total`` items, those that recorded steps and have no step still open
    (an item between two of its steps counts as done for that moment: the journal cannot tell)."""
    done = 0
    for i in range(total):
        prefix = f"{step}[{i}]/"
        mine = [r for p, r in rows.items() if p.startswith(prefix)]
        if mine and all(r["state"] == "completed" for r in mine):
            done += 1
    return {"done": done, "total": total}


def retry_budgets(record: RunRecord) -> dict[str, int]:
    """The number of attempts a step's retry policy allows, where the journal says it: a run parked on a long
    backoff records "retry k of n" in its park reason (engine/retry.py); the policy itself is not journaled."""
    parked = record.parked
    if record.status != "parked" or parked is None or not parked.reason:
        return {}
    words = parked.reason.split()
    if len(words) >= 4 and words[0] == "retry" and words[2] == "of" and words[3].isdigit():
        step = parked.path.rsplit("/", 1)[0]
        return {step: int(words[3]) + 1}  # n retries after the first attempt
    return {}


def in_time(rows: Sequence[Mapping[str, Any]], span: int | None) -> bool:
    """Whether the timeline is laid out over wall-clock time: every step has a start time and the entries
    span some time (otherwise over log positions: a journal without times, or one written in one instant)."""
    return bool(span) and all(isinstance(row.get("offsetMs"), int) for row in rows)


def bars(rows: Sequence[Mapping[str, Any]], last_seq: int, span: int | None = None) -> list[dict[str, Any]]:
    """The timeline's bars as percentages of the whole run (SVG attributes, not inline styles: the pages'
    Content-Security-Policy allows no inline style): each step from its start to its end in time over the
    timeline's ``span`` (:func:`in_time`, :func:`span_ms`; a step that has not ended runs to the span's end),
    or else its span of log positions over the whole log."""
    if span and in_time(rows, span):
        out = []
        for row in rows:
            start = int(row["offsetMs"])
            took = row.get("durationMs")
            out.append(_bar(start / span, (took if isinstance(took, int) else span - start) / span))
        return out
    width = max(last_seq, 1)
    return [_bar((int(row["from"]) - 1) / width, (int(row.get("to", row["from"])) - int(row["from"]) + 1) / width)
            for row in rows]


def _bar(x: float, w: float) -> dict[str, str]:
    """A bar at fraction ``x`` of the width, ``w`` wide: at least 0.6 % so that an instant shows, and moved left
    rather than past the right edge."""
    width = max(w * 100, 0.6)
    return {"x": f"{min(x * 100, 100 - width):.2f}", "w": f"{width:.2f}"}


def payload_schema(events: Sequence[Mapping[str, Any]], record: RunRecord) -> Any:
    """The schema the Await the run is parked at recorded for its delivery (``<await>/@payloadSchema``), or
    None: the deliver form shows it, the server enforces it (durable/waits.py)."""
    if record.status != "parked" or record.parked is None:
        return None
    where = paths.payload_schema_path(record.parked.path)
    for e in events:
        if e.get("path") == where and "value" in e:
            return e["value"]
    return None
