"""The absent value and decoding a value as the journal stores it (spec §5.2), under its codec version — moved
out of :mod:`telo.journal.model` (which re-exports both) to keep that module to the records.

A stored value is TEXT: canonical typed-frame text under codec version ``v`` (1 or 2), or, for a legacy value
(``v is None``), the plain JSON the store wrote before codecs existed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from telo.errors import EntryUndecodable, JournalCorrupt, TypedFrameUndecodable
from telo.values import decode_frame, encode_frame
from telo.values.legacy import encode_legacy

CODEC_VERSION: Final = 2
READABLE_VERSIONS: Final = (1, 2)


class _NoValue:
    """The absent value: what a step that produced nothing returns, and replays as (§5.2)."""

    _instance: _NoValue | None = None

    def __new__(cls) -> _NoValue:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_VALUE"

    def __bool__(self) -> bool:
        return False


NO_VALUE: Final = _NoValue()


@dataclass(frozen=True, slots=True)
class Writer:
    """How values are written into a journal (telo.journal.compat): typed frames under :data:`CODEC_VERSION`
    (the default), or — ``legacy`` — plain JSON with no codec version, for a runtime that predates the codec,
    refusing what plain JSON cannot carry back (:func:`telo.values.legacy.encode_legacy`; ``bigint``: an int as
    ``{"$bigint": …}``, the upstream SQL stores' form)."""

    legacy: bool = False
    bigint: bool = False

    def stored(self, value: Any) -> tuple[str | None, int | None]:
        """``(text, codec version)`` of ``value``; ``(None, None)`` for :data:`NO_VALUE`. Raises
        TypedFrameUnencodable (LegacyUnencodable: what legacy plain JSON cannot carry)."""
        if value is NO_VALUE:
            return None, None
        if self.legacy:
            return encode_legacy(value, bigint=self.bigint), None
        return encode_frame(value), CODEC_VERSION


TYPED: Final = Writer()


def decode_stored(
    text: str | None, v: int | None, *, run: str, path: str, legacy_bigint: bool = True
) -> Any:
    """Decode a stored value under its codec version (§5.2).

    ``v is None`` is legacy plain JSON: numbers read as doubles (the Node runtime held every JSON number as a
    JS number) except ``{"$bigint": "…"}``, which the SQL stores wrote for big integers and reads as int.
    A version this runtime does not read raises ``ERR_DURABLE_ENTRY_UNDECODABLE``; a frame that does not
    decode raises ``ERR_DURABLE_JOURNAL_CORRUPT`` with the codec error as its cause.
    """
    if text is None:
        return NO_VALUE
    if v is None:
        try:
            return _from_legacy(json.loads(text, parse_int=float), legacy_bigint)
        except ValueError as exc:
            raise JournalCorrupt(
                f"legacy journal value at {path!r} of run {run!r} is not JSON",
                data={"run": run, "path": path},
            ) from exc
    if v not in READABLE_VERSIONS:
        raise EntryUndecodable(
            f"journal value at {path!r} of run {run!r} is written under codec version {v}, "
            f"which this runtime does not read",
            hint="upgrade telo to a version that reads this journal's codec",
            data={"run": run, "path": path, "version": v, "reads": list(READABLE_VERSIONS)},
        )
    try:
        return decode_frame(text, version=v)
    except TypedFrameUndecodable as exc:
        raise JournalCorrupt(
            f"journal value at {path!r} of run {run!r} does not decode: {exc.message}",
            hint="the journal was damaged or written by a non-conforming writer; inspect it with "
            "`telo runs journal`",
            data={"run": run, "path": path},
        ) from exc


def _from_legacy(obj: Any, bigint: bool) -> Any:
    if isinstance(obj, dict):
        if bigint and len(obj) == 1 and isinstance(obj.get("$bigint"), str):
            return int(obj["$bigint"])
        return {k: _from_legacy(v, bigint) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_from_legacy(v, bigint) for v in obj]
    return obj
