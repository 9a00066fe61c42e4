"""What the ``telo`` command prints of telo's log records: WARNING and above, one line each on stderr, the
record's stable name followed by its attributes (docs/observability.md) — ``telo: durable.claim.lost
durable.run='pay:1' …`` rather than Python's bare last-resort ``durable.claim.lost``."""

from __future__ import annotations

import logging

_PREFIXES = ("durable.", "error.", "journal.", "telo.")


def _show(value: object) -> str:
    # str() first: a telo.errors.Code member shows as its code ('ERR_…'), not as <Code.…: 'ERR_…'>
    return repr(str(value) if isinstance(value, str) else value)


class _Line(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        attrs = " ".join(f"{k}={_show(v)}" for k, v in vars(record).items() if k.startswith(_PREFIXES))
        text = f"telo: {record.getMessage()}" + (f" {attrs}" if attrs else "")
        if record.exc_info and record.levelno >= logging.ERROR:
            text += "\n" + self.formatException(record.exc_info)
        return text


def install() -> None:
    """Print telo's warnings on stderr, unless the embedding program configured logging itself."""
    logger = logging.getLogger("telo")
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_Line())
    logger.addHandler(handler)
