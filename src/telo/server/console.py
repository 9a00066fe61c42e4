"""What the run page derives from a run's journal for an operator: when things happened, which steps ran,
failed or wait, their retries, their fan-outs, and the timeline bars.

Journal entries carry no wall-clock time of their own (the store records a ``seq``, not a timestamp), so
nothing here invents one: an event gets an ``at`` only when its recorded value says when it happened (a retry
verdict, an operator's resume, a restore), and the Gantt-like timeline runs over log positions, not seconds.
Every time leaves as RFC 3339 text in UTC with milliseconds (:func:`rfc3339`), the CLI's format.
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
          attempts_of: Mapping[str, int] | None = None) -> list[dict[str, Any]]:
    """One row per step that recorded an intent or a receipt, in the order it started: where it starts and
    ends in the log (``from``/``to`` seqs), its ``state`` (completed, failed, parked, open), its failure, its
    retries (``attempt``, the last verdict and when the next attempt is due), and for a fan-out the items
    whose steps all have receipts (``fanOut: {done, total}``)."""
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
    for row in ordered:
        row["depth"] = row["path"].count("/") - 1
    return ordered


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


def bars(rows: Sequence[Mapping[str, Any]], last_seq: int) -> list[dict[str, Any]]:
    """The timeline's bars: each step's span of log positions as percentages of the whole log (SVG
    attributes, not inline styles: the pages' Content-Security-Policy allows no inline style)."""
    width = max(last_seq, 1)
    out = []
    for row in rows:
        start, end = int(row["from"]), int(row.get("to", row["from"]))
        x = (start - 1) / width * 100
        out.append({"x": f"{x:.2f}", "w": f"{max((end - start + 1) / width * 100, 0.6):.2f}"})
    return out


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
