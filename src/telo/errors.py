"""One exception tree for telo, carrying the codes of the catalogue :class:`Code` (spec §9, §6.5).

Every error has a ``code`` (a :class:`Code` member's string, or a manifest's own code from a ``throw``), a
message that says what happened and where, an optional ``hint`` that says what to do about it, and optional
JSON-compatible ``data``. ``str(err)`` starts with the code so a log line or CLI message is greppable.
Errors that get persisted (a failed run's record) round-trip through :meth:`TeloError.to_dict` /
:func:`error_from_dict`.

A class with one natural code fixes it as ``default_code`` and is raised with the message alone
(``JournalCorrupt("…")``); ``TeloError(code, message)`` names the code. ``code`` is always stored as an exact
``str``: it ends up in journaled run records and CEL scopes, whose value domain takes exact types only.

The suspension signal (``ERR_DURABLE_SUSPENDED``) is deliberately NOT in this tree: it derives from
``BaseException`` so that ``except Exception`` in user code cannot swallow it (spec §7.7).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, overload

from telo.error_codes import SPEC_CODES as SPEC_CODES
from telo.error_codes import UPSTREAM_NAMED as UPSTREAM_NAMED
from telo.error_codes import Code as Code

# --- the names codes had before the catalogue, kept as aliases of its members (docs and tests import them) ----
ERR_DURABLE_UNJOURNALABLE_VALUE = Code.DURABLE_UNJOURNALABLE_VALUE
ERR_JOURNAL_ENTRY_MISMATCH = Code.JOURNAL_ENTRY_MISMATCH
ERR_DURABLE_MANIFEST_CHANGED = Code.DURABLE_MANIFEST_CHANGED
ERR_DURABLE_NO_RUN = Code.DURABLE_NO_RUN
ERR_DURABLE_SUSPENDED = Code.DURABLE_SUSPENDED
ERR_DURABLE_SUSPENSION_SWALLOWED = Code.DURABLE_SUSPENSION_SWALLOWED
ERR_DURABLE_SUSPEND_FORBIDDEN = Code.DURABLE_SUSPEND_FORBIDDEN
ERR_DURABLE_TARGET_UNENCODABLE = Code.DURABLE_TARGET_UNENCODABLE
ERR_DURABLE_TARGET_UNDECODABLE = Code.DURABLE_TARGET_UNDECODABLE
ERR_DURABLE_ENTRY_UNDECODABLE = Code.DURABLE_ENTRY_UNDECODABLE
ERR_TYPED_FRAME_UNENCODABLE = Code.TYPED_FRAME_UNENCODABLE
ERR_TYPED_FRAME_UNDECODABLE = Code.TYPED_FRAME_UNDECODABLE
ERR_PREDICATE_NOT_BOOLEAN = Code.PREDICATE_NOT_BOOLEAN
ERR_DURABLE_JOURNAL_CORRUPT = Code.DURABLE_JOURNAL_CORRUPT
ERR_INVALID_STEP_NAME = Code.INVALID_STEP_NAME
ERR_INVALID_PATH = Code.INVALID_PATH
ERR_INTERNAL = Code.INTERNAL
ERR_DUPLICATE_STEP_NAME = Code.DUPLICATE_STEP_NAME


class TeloError(Exception):
    """Base of every error telo raises on purpose.

    ``code`` is the error's code (see :class:`Code`); ``hint`` tells the reader what to do; ``data`` holds
    structured, JSON-compatible details (paths, run ids, ...) for programs and logs. ``TeloError(message)``
    (the code left out) takes the class's ``default_code``.
    """

    default_code: ClassVar[str] = Code.INTERNAL

    @overload
    def __init__(self, message: str, /, *, hint: str | None = None,
                 data: Mapping[str, Any] | None = None) -> None: ...

    @overload
    def __init__(self, code: str | None, message: str, *, hint: str | None = None,
                 data: Mapping[str, Any] | None = None) -> None: ...

    def __init__(
        self,
        code: str | None,
        message: str | None = None,
        *,
        hint: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        if message is None:  # TeloError(message): the one positional argument is the message
            code, message = None, code or ""
        # str(): a Code member becomes the exact wire string (see the module docstring)
        self.code: str = str(code or self.default_code)
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

    default_code = Code.INTERNAL

    def __init__(self, message: str, *, data: Mapping[str, Any] | None = None) -> None:
        super().__init__(message, hint="this is a bug in telo; please report it with the message above", data=data)


# --- value codec (spec §6) ------------------------------------------------------------------------------


class ValueError_(TeloError):
    """Base of the value-codec errors. (Named with a trailing underscore: ``ValueError`` is a builtin.)"""


class TypedFrameUnencodable(ValueError_):
    """A value outside the CEL value domain was given to the typed-frame writer (§6.1).

    ``path`` is the JSON Pointer of the offending node inside the value.
    """

    default_code = Code.TYPED_FRAME_UNENCODABLE

    def __init__(self, message: str, *, path: str = "", hint: str | None = None) -> None:
        self.path = path
        super().__init__(
            f"{message} (at {path or '/'!s} inside the value)",
            hint=hint or "journaled values must be CEL values: null, bool, int, uint, double, string, bytes, "
            "timestamp, duration, list, map or Telo.Url",
            data={"path": path},
        )


class LegacyUnencodable(TypedFrameUnencodable):
    """Journal compat ``legacy`` (docs/compat.md): plain JSON cannot carry this node of the value back with its
    CEL type ``type_name`` to a reader that predates the typed frame. ``path`` is its JSON Pointer in the value.
    A subclass of :class:`TypedFrameUnencodable`, so every writer that re-raises a refusal of the journal's codec
    at a step path (``ERR_DURABLE_UNJOURNALABLE_VALUE``) re-raises this one too."""

    default_code = Code.JOURNAL_LEGACY_UNENCODABLE

    def __init__(self, message: str, *, path: str, type_name: str, hint: str) -> None:
        super().__init__(message, path=path, hint=hint)
        self.type_name = type_name
        self.data = {"path": path, "type": type_name}


class TypedFrameUndecodable(ValueError_):
    """A typed frame is malformed, carries an unknown tag or a non-canonical payload (§6.2).

    ``path`` is the JSON Pointer of the offending node inside the frame.
    """

    default_code = Code.TYPED_FRAME_UNDECODABLE

    def __init__(self, message: str, *, path: str = "", hint: str | None = None) -> None:
        self.path = path
        super().__init__(
            f"{message} (at {path or '/'!s} inside the frame)",
            hint=hint or "the frame was not written by a conforming writer or was damaged in storage",
            data={"path": path},
        )


class PlainValueInvalid(ValueError_):
    """A plain-encoded value (§6.4) does not read under the slot's declared schema."""

    default_code = Code.PLAIN_VALUE_INVALID

    def __init__(self, message: str, *, path: str = "", hint: str | None = None) -> None:
        self.path = path
        super().__init__(f"{message} (at {path or '/'})", hint=hint, data={"path": path})


# --- paths and targets (spec §5.1, §5.3) -----------------------------------------------------------------


class PathError(TeloError):
    """A step path (``ERR_INVALID_PATH``, the default) or step name (``ERR_INVALID_STEP_NAME``) breaks the
    grammar of spec §5.1."""

    default_code = Code.INVALID_PATH


class TargetUnencodable(TeloError):
    """A step target cannot be written down completely enough to cross a process boundary (§5.3)."""

    default_code = Code.DURABLE_TARGET_UNENCODABLE

    def __init__(self, message: str, *, hint: str | None = None, data: Mapping[str, Any] | None = None):
        super().__init__(message, hint=hint, data=data)


class TargetUndecodable(TeloError):
    """A step target arrived malformed, or in an encoding version this runtime does not read (§5.3)."""

    default_code = Code.DURABLE_TARGET_UNDECODABLE

    def __init__(self, message: str, *, hint: str | None = None, data: Mapping[str, Any] | None = None):
        super().__init__(message, hint=hint, data=data)


# --- journal and durable runs (spec §5.2, §7, §9) --------------------------------------------------------


class JournalError(TeloError):
    """A journal store could not do what was asked, or found its content unreadable."""


class JournalCorrupt(JournalError):
    """A journal's stored content is unreadable (a bad line, a checksum mismatch, a frame that does not decode)."""

    default_code = Code.DURABLE_JOURNAL_CORRUPT


class EntryUndecodable(JournalError):
    """A journal entry or run record is written under a codec version this runtime does not read (§5.2)."""

    default_code = Code.DURABLE_ENTRY_UNDECODABLE


class DurableError(TeloError):
    """An error of the durable backend (replay mismatch, unjournalable value, suspension misuse, ...)."""


class UnjournalableValue(DurableError):
    """A step result or decision cannot be journaled, at the step path that produced it (§6, §9)."""

    default_code = Code.DURABLE_UNJOURNALABLE_VALUE


class JournalEntryMismatch(DurableError):
    """A replay reached a different target than the journal entry at that path records (§5.2, §9)."""

    default_code = Code.JOURNAL_ENTRY_MISMATCH


class ManifestChanged(DurableError):
    """A resume would replay against a changed manifest (§9)."""

    default_code = Code.DURABLE_MANIFEST_CHANGED


class NoRun(DurableError):
    """A kind that needs a durable run was dispatched with no run handle ambient (§9)."""

    default_code = Code.DURABLE_NO_RUN


class SuspensionSwallowed(DurableError):
    """A body returned normally while a suspension was latched (§7, §9)."""

    default_code = Code.DURABLE_SUSPENSION_SWALLOWED


class SuspendForbidden(DurableError):
    """A park was attempted inside a zone declaring noSuspend (§9)."""

    default_code = Code.DURABLE_SUSPEND_FORBIDDEN


# --- engine / manifests ----------------------------------------------------------------------------------


class EngineError(TeloError):
    """A step failed, or the step engine refused what it was asked to evaluate."""


class PredicateNotBoolean(EngineError):
    """A predicate or condition produced a non-boolean (spec §4)."""

    default_code = Code.PREDICATE_NOT_BOOLEAN


class ManifestError(TeloError):
    """A manifest could not be loaded; ``data`` carries ``file``/``line``/``column`` where known."""


_BY_CODE: dict[str, type[TeloError]] = {}


def _register(cls: type[TeloError]) -> None:
    for sub in cls.__subclasses__():
        if sub.default_code != Code.INTERNAL and sub.__init__ is TeloError.__init__:
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
        code = Code.INTERNAL.value
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
