"""A file-journal reader implementing ONLY the upstream rules (telo-reference §7 "File journal", §8 [M]): what the
Node runtime released before the codec does with a journal directory, so a test can hand it what telo wrote.

* one file per run, ``<encodeURIComponent(run)>.ndjson``; one JSON object a line;
* a final line without its newline is a torn write and is ignored; any other line that is not JSON is corrupt;
* a line's ``type`` says what it is: the LAST ``run`` line is the record, the FIRST ``entry`` line per path wins,
  and a line of any other type is skipped (telo's claim and base lines);
* a value is taken AS IT STANDS: there is no codec, ``v`` is ignored, and JSON is read as JavaScript reads it —
  every number is a JS number (a double: Python ``float`` here), an object a map of strings.

Nothing of telo is imported: the point is to read the files as the other runtime would.
"""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_MISSING = object()


def js_parse(text: str) -> Any:
    """``JSON.parse``: every number a double."""
    return json.loads(text, parse_int=float)


def js_stringify(value: Any) -> str:
    """``JSON.stringify`` of what :func:`js_parse` gave: an integral double is written without a fraction."""

    def plain(node: Any) -> Any:
        if type(node) is float and node.is_integer() and abs(node) < 1e21:
            return int(node)
        if type(node) is dict:
            return {k: plain(v) for k, v in node.items()}
        if type(node) is list:
            return [plain(v) for v in node]
        return node

    return json.dumps(plain(value), ensure_ascii=False, separators=(",", ":"))


@dataclass
class UpstreamRun:
    run: str
    record: dict[str, Any] | None = None
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)

    def value(self, path: str) -> Any:
        """The value of the entry at ``path`` as the upstream runtime hands it on (``_MISSING``: no value)."""
        return self.entries[path].get("value", _MISSING)


def file_name(run: str) -> str:
    """``encodeURIComponent(run) + ".ndjson"``."""
    return urllib.parse.quote(run, safe="!~*'()") + ".ndjson"


def read_run(directory: Path, run: str) -> UpstreamRun:
    data = (directory / file_name(run)).read_bytes()
    out = UpstreamRun(run)
    lines = data.split(b"\n")
    for number, raw in enumerate(lines[:-1], 1):  # the last piece has no newline: torn (or empty)
        if not raw.strip():
            continue
        try:
            obj = js_parse(raw.decode("utf-8"))
        except ValueError as exc:
            raise ValueError(f"{run}: line {number} is corrupt") from exc
        if obj.get("type") == "run":
            out.record = obj
        elif obj.get("type") == "entry":
            out.entries.setdefault(obj["entry"]["path"], obj["entry"])
    return out
