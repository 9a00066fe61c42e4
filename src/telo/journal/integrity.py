"""A checksum per journal entry, verified on read (issue 12: "a flipped byte that still parses is caught
rather than replayed").

A frame whose bytes were damaged on disk usually stops decoding (``ERR_DURABLE_JOURNAL_CORRUPT``), but not
always: ``{"n":7}`` damaged into ``{"n":3}`` still parses, and replay would hand the body a value no step ever
produced. So the SQLite, file and PostgreSQL journals store, beside each entry they write, a CRC-32 of everything replay
reads from it — path, kind, decision, target, value and codec version — and check it whenever the entry is
read. A mismatch is ``ERR_DURABLE_JOURNAL_CORRUPT`` naming the run and the path: the run is left alone (listed,
never executed) like any damaged run. An entry stored without a checksum (written by an older telo, by the
upstream runtime, or by hand) is read unchecked. CRC-32 is there to catch accidents of storage, not tampering:
it costs well under a microsecond per entry (zlib), and a damaged byte changes it with certainty.

The entry's write time (``Entry.at``, issue 15) is NOT covered, like ``seq``: replay never reads it (it is for an
operator's timeline), so a damaged time cannot hand a body a wrong value, and it must not make a run that
replays correctly unrunnable; a stored time that is not an integer reads as no time. Leaving it out also keeps
every checksum written before entries had times valid, with no rule for which formula a row was written under.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping

from telo.errors import JournalCorrupt
from telo.journal.model import Entry

_SEP = b"\x1f"  # unit separator: cannot occur in a path, kind or decision, so fields never run together
# A run journals the same few targets over and over: each one's canonical bytes are computed once. (Serialising
# the target at every append was 3.3 us of a 4 us checksum — benchmarks/durable.py, sequential.)
_TARGETS: dict[tuple[tuple[str, str], ...], bytes] = {}


def _target_bytes(target: Mapping[str, str]) -> bytes:
    key = tuple(target.items())
    found = _TARGETS.get(key)
    if found is None:
        if len(_TARGETS) >= 4096:
            _TARGETS.clear()
        found = _TARGETS[key] = json.dumps(dict(target), sort_keys=True, separators=(",", ":")).encode()
    return found


def checksum(entry: Entry) -> int:
    """The CRC-32 of what replay reads from ``entry`` (seq and at excluded: the store assigns them)."""
    target = b"" if entry.target is None else _target_bytes(entry.target)
    value = b"\x00" if entry.value is None else b"=" + entry.value.encode("utf-8", "surrogatepass")
    parts = (entry.path.encode("utf-8", "surrogatepass"), entry.kind.encode(), (entry.decision or "").encode(),
             target, value, b"" if entry.v is None else str(entry.v).encode())
    return zlib.crc32(_SEP.join(parts))


def verify(run: str, entry: Entry, stored: int | None) -> Entry:
    """``entry`` if ``stored`` (its checksum as written; None: none written) matches it, else raise."""
    if stored is not None and stored != checksum(entry):
        raise JournalCorrupt(
            f"journal entry {entry.path!r} of run {run!r} does not match its checksum: its stored bytes were "
            "damaged after it was written",
            hint="the run is left as it is; inspect it with `telo runs journal`, then cancel it, or restore or "
            "fork it to a checkpoint before this entry",
            data={"run": run, "path": entry.path, "checksum": stored},
        )
    return entry
