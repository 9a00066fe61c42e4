"""What the ``telo`` command prints of telo's log records: WARNING and above (``telo worker``: INFO, a line per
run it continues, parks or settles; ``--log-level``), one line each on stderr, the record's stable name followed
by its attributes (docs/observability.md) — ``telo: durable.claim.lost durable.run='pay:1' …`` rather than
Python's bare last-resort ``durable.claim.lost`` — or, with ``--log-json``, one JSON object a line for a log
shipper: ``{"time": RFC 3339, "level", "event", "logger", <attributes>}``."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

_PREFIXES = ("durable.", "error.", "journal.", "telo.")


def _show(value: object) -> str:
    # str() first: a telo.errors.Code member shows as its code ('ERR_…'), not as <Code.…: 'ERR_…'>
    return repr(str(value) if isinstance(value, str) else value)


class _Line(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        attrs = " ".join(f"{k}={_show(v)}" for k, v in vars(record).items()
                         if k.startswith(_PREFIXES) and v is not None)
        text = f"telo: {record.getMessage()}" + (f" {attrs}" if attrs else "")
        if record.exc_info and record.levelno >= logging.ERROR:
            text += "\n" + self.formatException(record.exc_info)
        return text


class _Json(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        at = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        out: dict[str, object] = {"time": at, "level": record.levelname.lower(), "event": record.getMessage(),
                                  "logger": record.name}
        for k, v in vars(record).items():
            if k.startswith(_PREFIXES) and v is not None:
                out[k] = str(v) if isinstance(v, str) else v  # a Code member as its plain string
        if record.exc_info and record.levelno >= logging.ERROR:
            out["traceback"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


LEVELS = ("debug", "info", "warning", "error")


def install(level: str = "warning", *, as_json: bool = False) -> None:
    """Print telo's records of ``level`` and above on stderr, unless the embedding program configured logging
    itself (then it decides). Called again (``telo worker --log-level``), it re-sets the level and format."""
    logger = logging.getLogger("telo")
    ours = [h for h in logger.handlers if getattr(h, "telo_cli", False)]
    if not ours and (logger.handlers or logging.getLogger().handlers):
        return
    handler = ours[0] if ours else logging.StreamHandler()
    if not ours:
        handler.telo_cli = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    numeric = getattr(logging, level.upper())
    handler.setLevel(numeric)
    if logger.level == logging.NOTSET or logger.level > numeric:
        logger.setLevel(numeric)  # records below WARNING reach the handler only if the logger lets them
    handler.setFormatter(_Json() if as_json else _Line())
