"""CEL errors: compile errors at load time, evaluation errors at run time (telo-reference §2, §11).

The library reports both as text: a compile error as ``INVALID_ARGUMENT: ERROR: <input>:L:C: message`` (one
``ERROR:`` block per problem, each followed by a caret snippet), an evaluation error as a value of type ERROR
whose text is ``STATUS: message``. This module turns the first into :class:`CelCompileError` with the position
mapped onto the manifest, and the second into :class:`CelEvalError` with a code a ``catch:`` can test.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar, Final, NamedTuple

from telo.errors import Code, TeloError

__all__ = [
    "ERR_CEL_COMPILE",
    "ERR_CEL_EVAL",
    "ERR_CEL_NO_SUCH_KEY",
    "ERR_CEL_OVERFLOW",
    "CelCompileError",
    "CelError",
    "CelEvalError",
    "SourcePos",
]

ERR_CEL_COMPILE: Final = Code.CEL_COMPILE
ERR_CEL_EVAL: Final = Code.CEL_EVAL
ERR_CEL_NO_SUCH_KEY: Final = Code.CEL_NO_SUCH_KEY
ERR_CEL_OVERFLOW: Final = Code.CEL_OVERFLOW

#: Prefix of the message of an exception raised by one of our catalog functions. The library reports every
#: exception a Python function raises as ``OUT_OF_RANGE: <message>``, which would otherwise read as an
#: arithmetic overflow.
FUNCTION_FAILURE_MARK: Final = "[telo-fn] "


class SourcePos(NamedTuple):
    """Where an expression's first character sits in its manifest: 1-based ``line`` and ``column``."""

    file: str | None
    line: int | None
    column: int | None

    def describe(self) -> str:
        where = self.file or "<expression>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return where

    def data(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.file is not None:
            out["file"] = self.file
        if self.line is not None:
            out["line"] = self.line
        if self.column is not None:
            out["column"] = self.column
        return out


NO_POS: Final = SourcePos(None, None, None)


def _quote(text: str, limit: int = 200) -> str:
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return repr(shown)


class CelError(TeloError):
    """Base of the CEL errors; ``data`` carries ``expression`` and, when known, ``file``/``line``/``column``."""

    default_code: ClassVar[str] = ERR_CEL_EVAL


class CelCompileError(CelError):
    """An expression does not parse or does not type-check (raised at load time, never at run time).

    ``data = {expression, file?, line, column, errors}``: ``line``/``column`` are the manifest position of the
    first problem (the library's position inside the expression, offset by where the expression starts);
    ``errors`` lists every problem the library found, each ``{line, column, message, at}`` where ``at`` is
    ``[line, column]`` INSIDE the expression text (1-based; ``None`` when the library gives no position), for a
    caller that maps positions itself (a block scalar's later lines are indented in the file).
    """

    default_code = ERR_CEL_COMPILE

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message, hint=hint, data=data)


class CelEvalError(CelError):
    """An expression failed while evaluating; ``code`` is ``ERR_CEL_NO_SUCH_KEY``, ``ERR_CEL_OVERFLOW`` or
    ``ERR_CEL_EVAL``; ``data = {expression, reason, file?, line?, column?}``."""

    default_code = ERR_CEL_EVAL

    def __init__(
        self,
        code: str | None,
        message: str,
        *,
        hint: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(code or ERR_CEL_EVAL, message, hint=hint, data=data)


# --- compile errors ----------------------------------------------------------------------------------------

_BLOCK_HEAD: Final = re.compile(r"ERROR: <input>:(-?\d+):(-?\d+): ")
_STATUS_TAIL: Final = re.compile(r"\s*\[[A-Z_]+\]\s*$")
_DEPTH_LIMIT: Final = "Exceeded max recursion depth"

_DEPTH_HINT: Final = (
    "the CEL parser nests at most 32 levels: a chain of more than 32 binary operators ('a' + 'b' + …) or "
    "more than 32 nested brackets does not compile; build long strings with [a, b, …].join('') and split "
    "long conditions into steps or bindings (cel.bind)"
)


def compile_error(library_text: str, expression: str, pos: SourcePos) -> CelCompileError:
    """The :class:`CelCompileError` for the library's compile-error text, positions mapped onto ``pos``."""
    problems: list[dict[str, Any]] = []
    for line, column, message in _problems(library_text):
        mline, mcol = _map_position(line, column, pos)
        at = [line, column] if line >= 1 else None
        entry = {"line": mline, "column": mcol, "message": message, "at": at}
        if entry not in problems:  # the depth-limit error is reported twice
            problems.append(entry)
    if not problems:  # not the format we know: keep the whole text rather than lose it
        problems.append({"line": pos.line, "column": pos.column, "message": library_text.strip(), "at": None})
    first = problems[0]
    hint = _DEPTH_HINT if _DEPTH_LIMIT in first["message"] else None
    where = SourcePos(pos.file, first["line"], first["column"])
    data = {"expression": expression, **where.data(), "errors": problems}
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return CelCompileError(
        f"CEL expression {_quote(expression)} at {where.describe()} does not compile: {first['message']}{more}",
        hint=hint,
        data=data,
    )


def _problems(text: str) -> list[tuple[int, int, str]]:
    """Split the library's text into ``(line, column, message)``: each block is ``ERROR: <input>:L:C: msg``,
    then an optional caret snippet (lines starting `` |``); the status tail (`` [INVALID_ARGUMENT]``) ends
    the last one."""
    heads = list(_BLOCK_HEAD.finditer(text))
    out: list[tuple[int, int, str]] = []
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        body = _STATUS_TAIL.sub("", text[m.end() : end])
        message = body.split("\n |", 1)[0].strip()
        out.append((int(m.group(1)), int(m.group(2)), message))
    return out


def _map_position(line: int, column: int, pos: SourcePos) -> tuple[int | None, int | None]:
    """Map the library's 1-based (line, column) inside the expression onto the manifest.

    The library counts columns in code points, 1-based; ``-1:-1`` means "no position" (the parser's depth
    limit), which maps to where the expression starts. Only the first line is shifted by the expression's
    start column: later lines of a multi-line scalar start at column 1 of the expression text.
    """
    if line < 1:
        return pos.line, pos.column
    if pos.line is None:
        return line, column
    if line == 1:
        return pos.line, (pos.column + column - 1) if pos.column is not None else column
    return pos.line + line - 1, column


# --- evaluation errors ---------------------------------------------------------------------------------------


def classify(reason: str) -> str:
    """The telo code for the library's evaluation-error text (``STATUS: message``)."""
    if FUNCTION_FAILURE_MARK in reason:
        return ERR_CEL_EVAL
    if reason.startswith("NOT_FOUND:") or "No such key" in reason:
        return ERR_CEL_NO_SUCH_KEY
    if reason.startswith("OUT_OF_RANGE:") and ("overflow" in reason or "out of" in reason):
        return ERR_CEL_OVERFLOW
    return ERR_CEL_EVAL


def clean_reason(reason: str) -> str:
    """The library's text without our function-failure marker (and the status the library put before it)."""
    return _MARKED.sub("", reason)


_MARKED: Final = re.compile(r"(?:[A-Z_]+: )?" + re.escape(FUNCTION_FAILURE_MARK))


def eval_error(reason: str, expression: str, pos: SourcePos, *, code: str | None = None) -> CelEvalError:
    """The :class:`CelEvalError` for an evaluation that failed with the library's ``reason`` text."""
    reason = reason.strip()
    code = code or classify(reason)
    text = clean_reason(reason)
    at = f" at {pos.describe()}" if pos != NO_POS else ""
    return CelEvalError(
        code,
        f"CEL expression {_quote(expression)}{at} failed: {text}",
        data={"expression": expression, "reason": text, **pos.data()},
    )
