"""The file journal's on-disk format: file names and NDJSON line shapes (reference §7 "File journal").

One file per run, ``<encodeURIComponent(run)>.ndjson``; one JSON object per line. The upstream line types
are written exactly as the Node runtime writes them, so either runtime reads the other's journals:

- ``{"type":"run","run":…,"status":…,…}`` — a run record; the LAST run line is the record (reference §7).
  Telo writes the whole current record on every run line (its extension fields ``workflow``, ``createdAt``,
  ``updatedAt``, ``manifestDigest``, ``digestScope``, ``epoch`` ride along), so a completion keeps what the
  record held and a park without ``at`` has no ``dueAt`` (the quirks of reference §15.8 are not copied).
- ``{"type":"entry","entry":{…},"crc":N,"at":MS}`` — an entry (:meth:`Entry.to_json`); the FIRST line per path
  wins. ``crc`` and ``at`` are telo's, line-level members beside ``entry`` — the ``entry`` object keeps
  upstream's exact shape, and upstream readers take only ``type`` and ``entry`` from a line, so they ignore
  both. ``crc`` is the entry's checksum (:mod:`telo.journal.integrity`), checked on every read; a line without
  it (upstream's, an older telo's) is read unchecked. ``at`` is ``Entry.at``, epoch ms when the store wrote the
  line; a line without it reads ``at=None``. The checksum does not cover ``at`` (integrity.py says why).

Telo adds two line types. Upstream readers dispatch on ``type`` and keep only ``run`` and ``entry`` lines, so
we assume they skip lines of any other type (the reference names no error for an unknown type; only an
unparseable line is corrupt); these lines carry nothing an upstream reader needs:

- ``{"type":"claim","holder":…,"until":…,"fence":N}`` — the run's claim; the last claim line wins, and
  ``{"type":"claim","holder":null,"fence":N}`` releases it. Claims live in the file (not in memory,
  reference §15.9) so that two processes on one directory exclude each other. ``fence`` is the claim's
  fencing token (:mod:`telo.journal.claims`), kept on release; a line without it (older telo) reads as 0.
- ``{"type":"base","seq":N[,"id":…]}`` — written by compaction: the next entry line has ``seq`` N+1. Entry
  ``seq`` is otherwise the 1-based ordinal of the entry line among the file's entry lines, so dropping a
  prefix must say where the numbering stands. A compacted file starts with a base line carrying a random
  ``id``, which tells a cached parse of the old file apart from the new one even if the inode is reused.

Reading (reference §7 "Torn tail"): a final line without its newline is a torn write and is ignored; any
other line that is not JSON, or is JSON of the wrong shape, is ``ERR_DURABLE_JOURNAL_CORRUPT`` with the run
and the 1-based line number. Blank lines are skipped. Unknown ``type`` values are skipped (forward
compatibility with both runtimes' extensions).
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from telo.errors import Code, JournalCorrupt, JournalError
from telo.journal.integrity import checksum, verify
from telo.journal.model import STATUSES, Claim, Entry, Parked, RunRecord

SUFFIX: Final = ".ndjson"
# The longest file name ext4, XFS, btrfs, tmpfs and APFS take (NAME_MAX). Fixed rather than asked of the
# directory's filesystem, so whether a run id is valid does not change when the journal is moved or copied.
NAME_MAX: Final = 255
MAX_STEM: Final = NAME_MAX - len(SUFFIX)

# encodeURIComponent leaves exactly A-Z a-z 0-9 - _ . ! ~ * ' ( ) unescaped; quote() always keeps
# A-Z a-z 0-9 _ . - ~, so these extras make the two produce the same bytes (UTF-8, upper-case hex).
_URI_COMPONENT_SAFE: Final = "!~*'()"

_CORRUPT_HINT: Final = (
    "the journal file was damaged or edited by hand (a torn final line is tolerated, any other bad line is "
    "not); repair or remove the line named in the error data, or move the file aside to abandon the run"
)


def file_stem(run: str) -> str:
    """The run's file name without suffix: ``encodeURIComponent(run)`` (reference §7).

    ``ERR_DURABLE_RUN_ID_INVALID`` for an id that cannot name a file: every store operation on a run goes
    through here, so a run that could never be stored is refused before anything is written (and a read of
    it answers the same, not with an ``OSError``)."""
    try:
        stem = urllib.parse.quote(run, safe=_URI_COMPONENT_SAFE, errors="strict")
    except UnicodeEncodeError as exc:  # a lone surrogate: encodeURIComponent throws URIError too
        raise JournalError(
            Code.DURABLE_RUN_ID_INVALID,
            f"run id {run!r} is not Unicode text and cannot name a journal file",
            hint="run ids must be valid Unicode strings (no unpaired surrogates)",
            data={"run": run},
        ) from exc
    if len(stem) + len(SUFFIX) > NAME_MAX:  # the stem is ASCII: characters are bytes
        shown = run if len(run) <= 60 else run[:60] + "…"
        raise JournalError(
            Code.DURABLE_RUN_ID_INVALID,
            f"run id {shown!r} ({len(run)} characters) is too long for the file journal: its file name "
            f"would be {len(stem) + len(SUFFIX)} bytes, and a file name holds at most {NAME_MAX} "
            f"(encodeURIComponent(run id) + {SUFFIX!r}: at most {MAX_STEM} bytes of encoded id)",
            hint=f"use a shorter run id (at most {MAX_STEM} ASCII letters, digits and -_.!~*'(); every other "
            "character takes 3 bytes per UTF-8 byte), or a SQLite or PostgreSQL journal, which take longer ids",
            data={"run": run, "fileNameBytes": len(stem) + len(SUFFIX), "limit": NAME_MAX},
        )
    return stem


def run_of_stem(stem: str) -> str | None:
    """The run a file name holds, or None when the name is not the canonical encoding of any run."""
    try:
        run = urllib.parse.unquote(stem, errors="strict")
    except UnicodeDecodeError:
        return None
    return run if file_stem(run) == stem else None


def dump_line(obj: Mapping[str, Any]) -> bytes:
    """One NDJSON line as JSON.stringify writes it: no spaces, non-ASCII literal, then ``\\n``."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def corrupt(run: str, line: int, message: str, **data: Any) -> JournalCorrupt:
    return JournalCorrupt(
        f"journal file of run {run!r}, line {line}: {message}",
        hint=_CORRUPT_HINT,
        data={"run": run, "line": line, **data},
    )


# --- run lines -----------------------------------------------------------------------------------------


def _stored_value(text: str, v: int | None) -> Any:
    """A value as a run line holds it: frame text as a JSON string ([N]), or plain JSON when legacy."""
    return text if v is not None else json.loads(text)


def run_line(record: RunRecord) -> dict[str, Any]:
    """The run line for a record: upstream's camelCase keys in upstream's order, then telo's extensions.

    The claim is not part of it: claims are claim lines (see the module docstring).
    """
    out: dict[str, Any] = {"type": "run", "run": record.run, "status": record.status}
    if record.due_at is not None:
        out["dueAt"] = record.due_at
    if record.parked is not None:
        out["parked"] = record.parked.to_json()
    if record.inputs is not None:
        out["inputs"] = _stored_value(record.inputs, record.inputs_v)
        if record.inputs_v is not None:
            out["inputsCodecVersion"] = record.inputs_v
    if record.result is not None:
        out["result"] = _stored_value(record.result, record.result_v)
        if record.result_v is not None:
            out["resultCodecVersion"] = record.result_v
    if record.error is not None:
        out["error"] = dict(record.error)
    if record.collapsed_regions is not None:
        out["collapsedRegions"] = record.collapsed_regions
    if record.collapse_reasons is not None:
        out["collapseReasons"] = list(record.collapse_reasons)
    if record.replayed_steps is not None:
        out["replayedSteps"] = record.replayed_steps
    for key, val in (
        ("workflow", record.workflow),
        ("createdAt", record.created_at),
        ("updatedAt", record.updated_at),
        ("manifestDigest", record.manifest_digest),
        ("digestScope", record.digest_scope),
    ):
        if val is not None:
            out[key] = val
    if record.epoch:
        out["epoch"] = record.epoch
    return out


class _Shape(Exception):
    """A run/claim line member of the wrong type (turned into JournalCorrupt with the line number)."""


def _int(obj: Mapping[str, Any], key: str) -> int | None:
    val = obj.get(key)
    if val is None:
        return None
    if type(val) is float and val.is_integer():  # a JS number written by another JSON library
        return int(val)
    if type(val) is not int:
        raise _Shape(f"{key} is not an integer: {val!r}")
    return val


def _str(obj: Mapping[str, Any], key: str) -> str | None:
    val = obj.get(key)
    if val is not None and not isinstance(val, str):
        raise _Shape(f"{key} is not a string: {val!r}")
    return val


def _value(obj: Mapping[str, Any], key: str, version_key: str) -> tuple[str | None, int | None]:
    """A stored inputs/result value as (text, codec version), the way Entry.from_json reads ``value``."""
    if key not in obj:
        return None, None
    v = _int(obj, version_key)
    raw = obj[key]
    if v is None:  # legacy (no codec version): plain JSON, kept as its compact text
        return json.dumps(raw, ensure_ascii=False, separators=(",", ":")), None
    if not isinstance(raw, str):
        raise _Shape(f"{key} carries codec v{v} but is not frame text")
    return raw, v


def record_from_line(obj: Mapping[str, Any], *, run: str, line: int) -> RunRecord:
    """Read a run line (legacy [M] or [N] shape, with or without telo's extension fields)."""
    try:
        if obj.get("run") != run:
            raise _Shape(f"the run line names run {obj.get('run')!r}, not this file's run")
        status = obj.get("status")
        if status not in STATUSES:
            raise _Shape(f"unknown run status {status!r}")
        parked_obj = obj.get("parked")
        parked = None
        if parked_obj is not None:
            if not isinstance(parked_obj, Mapping) or not isinstance(parked_obj.get("path"), str):
                raise _Shape("parked has no path")
            parked = Parked.from_json(parked_obj)
        inputs, inputs_v = _value(obj, "inputs", "inputsCodecVersion")
        result, result_v = _value(obj, "result", "resultCodecVersion")
        error = obj.get("error")
        if error is not None and not isinstance(error, Mapping):
            raise _Shape("error is not an object")
        reasons = obj.get("collapseReasons")
        if reasons is not None and not (
            isinstance(reasons, list) and all(isinstance(r, str) for r in reasons)
        ):
            raise _Shape("collapseReasons is not a list of strings")
        return RunRecord(
            run=run,
            status=status,
            due_at=_int(obj, "dueAt"),
            parked=parked,
            inputs=inputs,
            inputs_v=inputs_v,
            result=result,
            result_v=result_v,
            error=dict(error) if error is not None else None,
            collapsed_regions=_int(obj, "collapsedRegions"),
            collapse_reasons=tuple(reasons) if reasons is not None else None,
            replayed_steps=_int(obj, "replayedSteps"),
            manifest_digest=_str(obj, "manifestDigest"),
            digest_scope=_str(obj, "digestScope"),
            workflow=_str(obj, "workflow"),
            created_at=_int(obj, "createdAt"),
            updated_at=_int(obj, "updatedAt"),
            epoch=_int(obj, "epoch") or 0,
        )
    except _Shape as exc:
        raise corrupt(run, line, f"bad run line: {exc}") from None


# --- claim, entry and base lines ----------------------------------------------------------------------


def claim_line(claim: Claim | None, fence: int) -> dict[str, Any]:
    if claim is None:
        return {"type": "claim", "holder": None, "fence": fence}
    return {"type": "claim", "holder": claim.holder, "until": claim.until, "fence": fence}


def entry_line(entry: Entry) -> dict[str, Any]:
    line = {"type": "entry", "entry": entry.to_json(), "crc": checksum(entry)}
    return line if entry.at is None else {**line, "at": entry.at}


def base_line(seq: int, ident: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "base", "seq": seq}
    if ident is not None:
        out["id"] = ident
    return out


# --- parsing -------------------------------------------------------------------------------------------


def iter_lines(data: bytes, first_line: int = 1) -> Iterator[tuple[int, bytes]]:
    """``(line number, raw line with its newline)`` for every COMPLETE line; a torn tail is not yielded."""
    start, number = 0, first_line
    while True:
        end = data.find(b"\n", start)
        if end < 0:
            return
        yield number, data[start : end + 1]
        start, number = end + 1, number + 1


@dataclass
class FileState:
    """What the complete lines of one run file say so far; fed incrementally as the file grows.

    ``ident`` is the file's (st_dev, st_ino) and ``prefix`` its first bytes: together they tell whether a
    cached state still describes the file at the path (compaction replaces the file).
    """

    run: str
    ident: tuple[int, int]
    prefix: bytes = b""
    offset: int = 0  # bytes consumed: just after the last complete line
    lines: int = 0  # complete lines consumed (for line numbers in errors)
    counter: int = 0  # entry ordinal of the last entry line (the next one gets counter + 1)
    record: RunRecord | None = None  # the last run line, without the claim
    claim: Claim | None = None  # the last claim line
    fence: int = 0  # the fencing token of the last claim line
    entries: dict[str, Entry] = field(default_factory=dict)  # first entry per path, in seq order

    @property
    def current(self) -> RunRecord | None:
        """The run record with its claim, as the store protocol hands it out."""
        if self.record is None:
            return None
        if self.claim is None and self.fence == 0:
            return self.record
        return replace(self.record, claim=self.claim, fence=self.fence)

    def feed(self, data: bytes) -> int:
        """Apply the complete lines of ``data`` (the file's bytes from ``offset``); returns bytes consumed."""
        consumed = 0
        for number, raw in iter_lines(data, self.lines + 1):
            self.apply(number, raw)
            consumed += len(raw)
            self.lines = number
        self.offset += consumed
        return consumed

    def apply(self, number: int, raw: bytes) -> str | None:
        """Apply one complete line; returns its type (None for a blank line)."""
        if not raw.strip():
            return None
        try:
            obj = json.loads(raw.decode("utf-8"))  # decode first: json.loads(bytes) would guess UTF-16/32
        except ValueError as exc:  # includes UnicodeDecodeError
            raise corrupt(self.run, number, f"not JSON ({exc})") from None
        kind = obj.get("type") if isinstance(obj, dict) else None
        if not isinstance(kind, str):
            raise corrupt(self.run, number, "not a journal record (an object with a string `type`)")
        if kind == "run":
            self.record = record_from_line(obj, run=self.run, line=number)
        elif kind == "entry":
            self._entry(number, obj.get("entry"), obj.get("crc"), obj.get("at"))
        elif kind == "claim":
            self.claim = self._claim(number, obj)
        elif kind == "base":
            seq = obj.get("seq")
            if type(seq) is not int or seq < self.counter:
                raise corrupt(self.run, number, f"base seq {seq!r} is not an integer >= {self.counter}")
            self.counter = seq
        return kind

    def _entry(self, number: int, obj: Any, crc: Any, at: Any) -> None:
        if not isinstance(obj, Mapping):
            raise corrupt(self.run, number, "entry line without an `entry` object")
        if crc is not None and type(crc) is not int:
            raise corrupt(self.run, number, f"entry line checksum {crc!r} is not an integer")
        self.counter += 1
        try:
            entry = verify(self.run, Entry.from_json(obj, run=self.run, seq=self.counter), crc)
        except JournalCorrupt as exc:
            extra = {k: v for k, v in exc.data.items() if k != "run"}
            raise corrupt(self.run, number, exc.message, **extra) from exc
        if type(at) is int:  # a time that is not one reads as none: it is not checksummed, replay never reads it
            entry = replace(entry, at=at)
        self.entries.setdefault(entry.path, entry)

    def _claim(self, number: int, obj: Mapping[str, Any]) -> Claim | None:
        holder, until, fence = obj.get("holder"), obj.get("until"), obj.get("fence", 0)
        if type(fence) is not int or fence < 0:
            raise corrupt(self.run, number, f"claim line fence {fence!r} is not a non-negative integer")
        self.fence = fence
        if holder is None:
            return None
        if not isinstance(holder, str) or type(until) is not int:
            raise corrupt(self.run, number, "claim line needs a string holder and an integer until")
        return Claim(holder, until)


# --- compaction ----------------------------------------------------------------------------------------


def compacted(run: str, data: bytes, seq: int, ident: str) -> tuple[bytes, int] | None:
    """The file a compaction writes: ``data`` (the file's complete lines) without entries below ``seq``.

    Returns ``(new file bytes, entries removed)``, or None when no entry is below ``seq``. The new file is
    a base line carrying ``ident``, the last run line, the last claim line (a held claim, or the fencing
    token of a released one), then the
    first-occurrence entry lines at or above ``seq`` with base lines wherever the ordinals skip (a dropped
    duplicate line), and a final base line so the next append continues the old numbering.
    """
    state = FileState(run, (0, 0))
    run_raw = claim_raw = b""
    entry_lines: list[tuple[int, bytes]] = []
    for number, raw in iter_lines(data):
        kind = state.apply(number, raw)
        if kind == "run":
            run_raw = raw
        elif kind == "claim":
            claim_raw = raw
        elif kind == "entry":
            entry_lines.append((state.counter, raw))
    firsts = {e.seq for e in state.entries.values()}
    removed = sum(1 for s in firsts if s is not None and s < seq)
    if removed == 0:
        return None
    body: list[bytes] = []
    last: int | None = None
    for ordinal, raw in entry_lines:
        if ordinal < seq or ordinal not in firsts:
            continue
        if last is None or ordinal != last + 1:
            body.append(dump_line(base_line(ordinal - 1)))
        body.append(raw)
        last = ordinal
    if last != state.counter:
        body.append(dump_line(base_line(state.counter)))
    # body[0] is always a base line (the loop starts with one, or only the final one was written).
    head = [dump_line(base_line(json.loads(body[0])["seq"], ident)), run_raw]
    if claim_raw:
        head.append(claim_raw)
    return b"".join(head + body[1:]), removed
