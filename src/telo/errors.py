"""One exception tree for telo, carrying the spec's error codes (spec §9, §6.5).

Every error has a ``code`` (``ERR_…``), a message that says what happened and where, an optional ``hint``
that says what to do about it, and optional JSON-compatible ``data``. ``str(err)`` starts with the code so a
log line or CLI message is greppable. Errors that get persisted (a failed run's record) round-trip through
:meth:`TeloError.to_dict` / :func:`error_from_dict`.

The suspension signal (``ERR_DURABLE_SUSPENDED``) is deliberately NOT in this tree: it derives from
``BaseException`` so that ``except Exception`` in user code cannot swallow it (spec §7.7).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

# --- every code of spec §9 and §6.5, plus the engine's own -----------------------------------------------
ERR_DURABLE_UNJOURNALABLE_VALUE = "ERR_DURABLE_UNJOURNALABLE_VALUE"
ERR_JOURNAL_ENTRY_MISMATCH = "ERR_JOURNAL_ENTRY_MISMATCH"
ERR_DURABLE_MANIFEST_CHANGED = "ERR_DURABLE_MANIFEST_CHANGED"
ERR_DURABLE_NO_RUN = "ERR_DURABLE_NO_RUN"
ERR_DURABLE_SUSPENDED = "ERR_DURABLE_SUSPENDED"
ERR_DURABLE_SUSPENSION_SWALLOWED = "ERR_DURABLE_SUSPENSION_SWALLOWED"
ERR_DURABLE_SUSPEND_FORBIDDEN = "ERR_DURABLE_SUSPEND_FORBIDDEN"
ERR_DURABLE_TARGET_UNENCODABLE = "ERR_DURABLE_TARGET_UNENCODABLE"
ERR_DURABLE_TARGET_UNDECODABLE = "ERR_DURABLE_TARGET_UNDECODABLE"
ERR_DURABLE_ENTRY_UNDECODABLE = "ERR_DURABLE_ENTRY_UNDECODABLE"
ERR_TYPED_FRAME_UNENCODABLE = "ERR_TYPED_FRAME_UNENCODABLE"
ERR_TYPED_FRAME_UNDECODABLE = "ERR_TYPED_FRAME_UNDECODABLE"
ERR_PREDICATE_NOT_BOOLEAN = "ERR_PREDICATE_NOT_BOOLEAN"
ERR_DURABLE_JOURNAL_CORRUPT = "ERR_DURABLE_JOURNAL_CORRUPT"
ERR_INVALID_STEP_NAME = "ERR_INVALID_STEP_NAME"
ERR_INVALID_PATH = "ERR_INVALID_PATH"
ERR_INTERNAL = "INTERNAL_ERROR"
ERR_DUPLICATE_STEP_NAME = "ERR_DUPLICATE_STEP_NAME"  # two sibling steps share a name (one journal path)

SPEC_CODES: tuple[str, ...] = (
    ERR_DURABLE_UNJOURNALABLE_VALUE,
    ERR_JOURNAL_ENTRY_MISMATCH,
    ERR_DURABLE_MANIFEST_CHANGED,
    ERR_DURABLE_NO_RUN,
    ERR_DURABLE_SUSPENDED,
    ERR_DURABLE_SUSPENSION_SWALLOWED,
    ERR_DURABLE_SUSPEND_FORBIDDEN,
    ERR_DURABLE_TARGET_UNENCODABLE,
    ERR_DURABLE_TARGET_UNDECODABLE,
    ERR_DURABLE_ENTRY_UNDECODABLE,
    ERR_TYPED_FRAME_UNENCODABLE,
    ERR_TYPED_FRAME_UNDECODABLE,
)


class TeloError(Exception):
    """Base of every error telo raises on purpose.

    ``code`` is the spec code; ``hint`` tells the reader what to do; ``data`` holds structured, JSON-compatible
    details (paths, run ids, ...) for programs and logs.
    """

    default_code: ClassVar[str] = ERR_INTERNAL

    def __init__(
        self,
        code: str | None,
        message: str,
        *,
        hint: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        self.code: str = code or self.default_code
        self.message: str = message
        self.hint: str | None = hint
        self.data: dict[str, Any] = dict(data) if data else {}
        super().__init__(self.code, message)

    def __str__(self) -> str:
        text = f"{self.code}: {self.message}"
        if self.hint:
            text += f" (hint: {self.hint})"
        return text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r})"

    def to_dict(self) -> dict[str, Any]:
        """The plain form persisted in a run record or printed as JSON: ``{code, message[, hint][, data]}``."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.hint:
            out["hint"] = self.hint
        if self.data:
            out["data"] = self.data
        return out


class InternalError(TeloError):
    """A bug in telo itself: an invariant the code relies on did not hold."""

    default_code = ERR_INTERNAL

    def __init__(self, message: str, *, data: Mapping[str, Any] | None = None) -> None:
        super().__init__(
            ERR_INTERNAL,
            message,
            hint="this is a bug in telo; please report it with the message above",
            data=data,
        )


# --- value codec (spec §6) ------------------------------------------------------------------------------


class ValueError_(TeloError):
    """Base of the value-codec errors. (Named with a trailing underscore: ``ValueError`` is a builtin.)"""


class TypedFrameUnencodable(ValueError_):
    """A value outside the CEL value domain was given to the typed-frame writer (§6.1).

    ``path`` is the JSON Pointer of the offending node inside the value.
    """

    default_code = ERR_TYPED_FRAME_UNENCODABLE

    def __init__(self, message: str, *, path: str = "", hint: str | None = None) -> None:
        self.path = path
        super().__init__(
            ERR_TYPED_FRAME_UNENCODABLE,
            f"{message} (at {path or '/'!s} inside the value)",
            hint=hint or "journaled values must be CEL values: null, bool, int, uint, double, string, bytes, "
            "timestamp, duration, list, map or Telo.Url",
            data={"path": path},
        )


class TypedFrameUndecodable(ValueError_):
    """A typed frame is malformed, carries an unknown tag or a non-canonical payload (§6.2).

    ``path`` is the JSON Pointer of the offending node inside the frame.
    """

    default_code = ERR_TYPED_FRAME_UNDECODABLE

    def __init__(self, message: str, *, path: str = "", hint: str | None = None) -> None:
        self.path = path
        super().__init__(
            ERR_TYPED_FRAME_UNDECODABLE,
            f"{message} (at {path or '/'!s} inside the frame)",
            hint=hint or "the frame was not written by a conforming writer or was damaged in storage",
            data={"path": path},
        )


class PlainValueInvalid(ValueError_):
    """A plain-encoded value (§6.4) does not read under the slot's declared schema."""

    default_code = "ERR_PLAIN_VALUE_INVALID"

    def __init__(self, message: str, *, path: str = "", hint: str | None = None) -> None:
        self.path = path
        super().__init__(
            "ERR_PLAIN_VALUE_INVALID",
            f"{message} (at {path or '/'})",
            hint=hint,
            data={"path": path},
        )


# --- paths and targets (spec §5.1, §5.3) -----------------------------------------------------------------


class PathError(TeloError):
    """A step path or step name breaks the grammar of spec §5.1."""

    default_code = ERR_INVALID_PATH


class TargetUnencodable(TeloError):
    """A step target cannot be written down completely enough to cross a process boundary (§5.3)."""

    default_code = ERR_DURABLE_TARGET_UNENCODABLE

    def __init__(self, message: str, *, hint: str | None = None, data: Mapping[str, Any] | None = None):
        super().__init__(ERR_DURABLE_TARGET_UNENCODABLE, message, hint=hint, data=data)


class TargetUndecodable(TeloError):
    """A step target arrived malformed, or in an encoding version this runtime does not read (§5.3)."""

    default_code = ERR_DURABLE_TARGET_UNDECODABLE

    def __init__(self, message: str, *, hint: str | None = None, data: Mapping[str, Any] | None = None):
        super().__init__(ERR_DURABLE_TARGET_UNDECODABLE, message, hint=hint, data=data)


# --- journal and durable runs (spec §5.2, §7, §9) --------------------------------------------------------


class JournalError(TeloError):
    """A journal store could not do what was asked, or found its content unreadable."""


class JournalCorrupt(JournalError):
    default_code = ERR_DURABLE_JOURNAL_CORRUPT


class EntryUndecodable(JournalError):
    default_code = ERR_DURABLE_ENTRY_UNDECODABLE


class DurableError(TeloError):
    """An error of the durable backend (replay mismatch, unjournalable value, suspension misuse, ...)."""


class UnjournalableValue(DurableError):
    default_code = ERR_DURABLE_UNJOURNALABLE_VALUE


class JournalEntryMismatch(DurableError):
    default_code = ERR_JOURNAL_ENTRY_MISMATCH


class ManifestChanged(DurableError):
    default_code = ERR_DURABLE_MANIFEST_CHANGED


class NoRun(DurableError):
    default_code = ERR_DURABLE_NO_RUN


class SuspensionSwallowed(DurableError):
    default_code = ERR_DURABLE_SUSPENSION_SWALLOWED


class SuspendForbidden(DurableError):
    default_code = ERR_DURABLE_SUSPEND_FORBIDDEN


# --- engine / manifests ----------------------------------------------------------------------------------


class EngineError(TeloError):
    """A step failed, or the step engine refused what it was asked to evaluate."""


class PredicateNotBoolean(EngineError):
    default_code = ERR_PREDICATE_NOT_BOOLEAN


class ManifestError(TeloError):
    """A manifest could not be loaded; ``data`` carries ``file``/``line``/``column`` where known."""


_BY_CODE: dict[str, type[TeloError]] = {}


def _register(cls: type[TeloError]) -> None:
    for sub in cls.__subclasses__():
        if sub.default_code != ERR_INTERNAL and sub.__init__ is TeloError.__init__:
            _BY_CODE.setdefault(sub.default_code, sub)
        _register(sub)


_register(TeloError)


def error_from_dict(plain: Mapping[str, Any]) -> TeloError:
    """Rebuild an error from :meth:`TeloError.to_dict` output (for example a failed run's ``error``).

    The class is chosen by code where telo has a dedicated one; the code, message, hint and data are kept
    exactly, so ``error_from_dict(e.to_dict()).to_dict() == e.to_dict()``.
    """
    code = plain.get("code")
    message = plain.get("message")
    if not isinstance(code, str) or not code:
        code = ERR_INTERNAL
    if not isinstance(message, str):
        message = code
    hint = plain.get("hint")
    data = plain.get("data")
    cls = _BY_CODE.get(code, TeloError)
    return cls(
        code,
        message,
        hint=hint if isinstance(hint, str) else None,
        data=data if isinstance(data, Mapping) else None,
    )
