"""Rows of the PostgreSQL journal to model objects and back (reference §7 "Values", §8).

Values cross as stored TEXT: frame text beside its codec version, or legacy plain JSON when the version
column is NULL (decoded later by :func:`telo.journal.model.decode_stored`, which reads ``{"$bigint": "…"}``).
``error``, ``collapse_reasons`` and ``target`` are JSON text, as upstream writes them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import fields
from typing import Any, Final

import psycopg

from telo.errors import Code, JournalCorrupt, JournalError
from telo.journal.columns import json_column
from telo.journal.columns import json_text as dump
from telo.journal.integrity import checksum, verify
from telo.journal.model import Claim, Entry, Parked, RunRecord
from telo.journal.postgres_schema import ENTRY_COLUMNS, RUN_COLUMNS, RUN_EXTENSION_COLUMNS
from telo.journal.redact import redact

RUN_COLS: Final = tuple(n for n, _ in RUN_COLUMNS + RUN_EXTENSION_COLUMNS)
ENTRY_COLS: Final = tuple(n for n, _ in ENTRY_COLUMNS if n != "run")
RECORD_FIELDS: Final = frozenset(f.name for f in fields(RunRecord)) - {"run", "claim", "fence"}
# RunRecord fields whose column has another name; the rest map one to one (parked and claim span several).
_COLUMN_OF: Final = {"inputs_v": "inputs_codec_version", "result_v": "result_codec_version"}


@contextmanager
def db_errors(action: str) -> Iterator[None]:
    """Report driver failures as JournalError, so callers never need to import psycopg. The driver's message
    is redacted: libpq quotes a URL it cannot parse whole, password included."""
    try:
        yield
    except psycopg.OperationalError as exc:  # includes the pool's PoolTimeout and PoolClosed
        if (exc.sqlstate or "").startswith("40"):  # transaction rollback: a deadlock, a serialization failure
            raise JournalError(
                Code.JOURNAL_UNAVAILABLE,  # (transient: run again, it may well pass)
                f"the PostgreSQL journal could not {action}: PostgreSQL rolled the transaction back "
                f"({redact(str(exc)).strip()})",
                hint="nothing of that transaction was written: run it again (two transactions sending messages to "
                "the same runs in opposite orders can deadlock; PostgreSQL then aborts one of them)",
                data={"sqlstate": exc.sqlstate},
            ) from exc
        raise JournalError(
            Code.JOURNAL_UNAVAILABLE,
            f"the PostgreSQL journal could not {action}: {redact(str(exc))}",
            hint="check that the PostgreSQL server is up and reachable at the journal's URL",
        ) from exc
    except psycopg.Error as exc:
        raise JournalError(
            Code.JOURNAL_FAILED,
            f"the PostgreSQL journal could not {action}: {redact(str(exc))}",
            data={"sqlstate": exc.sqlstate} if exc.sqlstate else None,
        ) from exc


def _load(text: str | None, run: str, column: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise JournalCorrupt(
            f"the {column} column of run {run!r} is not JSON",
            data={"run": run},
        ) from exc


def record_from_row(row: Mapping[str, Any]) -> RunRecord:
    run = row["run"]
    parked = None
    if row["parked_path"] is not None:
        # Upstream keeps a park's ``at`` only as due_at (park sets due_at = at), so it is read back from there.
        parked = Parked(
            row["parked_path"],
            row["parked_resource"],
            row["parked_token"],
            row["due_at"],
            row["parked_reason"],
        )
    claim = None
    if row["claim_holder"] is not None and row["claim_until"] is not None:
        claim = Claim(row["claim_holder"], row["claim_until"])
    damage: list[str] = []  # a damaged column reads as None, named in `corrupt` (one bad row spoils nothing else)
    reasons = json_column(row["collapse_reasons"], "collapse_reasons", list, damage)
    error = json_column(row["error"], "error", dict, damage)
    return RunRecord(
        run=run,
        status=row["status"],
        due_at=row["due_at"],
        parked=parked,
        inputs=row["inputs"],
        inputs_v=row["inputs_codec_version"],
        result=row["result"],
        result_v=row["result_codec_version"],
        error=error if isinstance(error, dict) else None,
        collapsed_regions=row["collapsed_regions"],
        collapse_reasons=tuple(str(r) for r in reasons) if isinstance(reasons, list) else None,
        replayed_steps=row["replayed_steps"],
        manifest_digest=row["manifest_digest"],
        digest_scope=row["digest_scope"],
        workflow=row["workflow"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        claim=claim,
        epoch=row["epoch"] or 0,  # NULL in rows upstream wrote
        fence=row["claim_fence"] or 0,  # NULL in rows upstream wrote, or claimed only by upstream processes
        queue=row.get("queue"),  # issue 16 (NULL: not queued)
        queue_key=row.get("queue_key"),
        priority=row.get("priority"),
        started_at=row.get("started_at"),
        dedup_key=row.get("dedup_key"),  # issue 16 step 4 (telo.journal.keyed)
        debounce_key=row.get("debounce_key"),
        corrupt="; ".join(damage) or None,
    )


def entry_from_row(run: str, row: Mapping[str, Any]) -> Entry:
    kind = row["entry_kind"]
    if kind not in ("step", "decision"):
        raise JournalCorrupt(
            f"journal entry {row['path']!r} of run {run!r} has an unknown kind {kind!r}",
            data={"run": run, "path": row["path"]},
        )
    target = _load(row["target"], run, "target")
    if isinstance(target, dict):
        target = {k: str(target[k]) for k in ("kind", "name", "module") if target.get(k) is not None}
    elif target is not None:
        raise JournalCorrupt(
            f"journal entry {row['path']!r} of run {run!r} has a target that is not a JSON object",
            data={"run": run, "path": row["path"]},
        )
    at = row.get("written_at")  # not checksummed (telo.journal.integrity): a time that is not one reads None
    entry = Entry(row["path"], kind, row["value"], row["codec_version"], row["decision"], target, row["seq"],
                  at if type(at) is int else None)
    return verify(run, entry, row.get("checksum"))


def entry_params(run: str, entry: Entry) -> dict[str, Any]:
    target = None if entry.target is None else dump(dict(entry.target))
    return {
        "run": run,
        "path": entry.path,
        "kind": entry.kind,
        "decision": entry.decision,
        "target": target,
        "value": entry.value,
        "v": entry.v,
        "checksum": checksum(entry),
        "at": entry.at,
    }


def columns_for(changes: Mapping[str, Any]) -> dict[str, Any]:
    """The column assignments for :meth:`Store.update_run` changes, named by RunRecord field."""
    bad = set(changes) - RECORD_FIELDS
    if bad:
        raise TypeError(f"not run record fields: {sorted(bad)}")
    columns: dict[str, Any] = {}
    for name, value in changes.items():
        if name == "parked":  # a park's ``at`` is due_at, which only an explicit due_at change moves
            p = value if isinstance(value, Parked) else None
            for col in ("path", "resource", "token", "reason"):
                columns[f"parked_{col}"] = None if p is None else getattr(p, col)
        elif name == "error":
            columns["error"] = None if value is None else dump(dict(value))
        elif name == "collapse_reasons":
            columns["collapse_reasons"] = None if value is None else dump(list(value))
        else:
            columns[_COLUMN_OF.get(name, name)] = value
    return columns
