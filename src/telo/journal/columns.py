"""The JSON-text columns of the SQL journals (SQLite, PostgreSQL), which upstream writes as JSON text too.

A column that does not hold what it must is damage to ONE run: it reads as None and is named in the record's
``corrupt`` (telo.journal.model.RunRecord), so listing, showing and cancelling the run — and every other run —
keep working (issue 12, case 7), instead of one bad row failing every read that meets it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def json_text(value: Any) -> str:
    """Compact JSON, non-ASCII kept (what the SQL journals store in their TEXT columns)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class TargetTexts:
    """The JSON text of entry targets, each encoded once: a run journals the same few targets over and over."""

    __slots__ = ("_texts",)

    MAX_TARGETS = 4096

    def __init__(self) -> None:
        self._texts: dict[tuple[tuple[str, str], ...], str] = {}

    def text(self, target: Mapping[str, str] | None) -> str | None:
        if target is None:
            return None
        key = tuple(target.items())
        text = self._texts.get(key)
        if text is None:
            if len(self._texts) >= self.MAX_TARGETS:
                self._texts.clear()
            text = self._texts[key] = json_text(dict(target))
        return text


def json_column(text: Any, column: str, shape: type, damage: list[str]) -> Any:
    """A JSON column's value of ``shape``; None, with ``damage`` noted, if it is not that (RunRecord.corrupt)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        damage.append(f"the {column} column is not JSON: {str(text)[:60]!r}")
        return None
    if not isinstance(value, shape):
        damage.append(f"the {column} column holds {type(value).__name__}, not {shape.__name__}")
        return None
    return value
