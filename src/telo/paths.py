"""The one helper that composes and parses step paths (spec §5.1; reference §4).

A step path is ``/``-joined segments; a repetition qualifies its segment with ``[index]``::

    steps/checkStock/then/reserve      steps/poll/while[3]      steps/items[2]/charge

Spec §5.1 forbids any other module from formatting a path: a journal outlives the process that wrote
it, so two pieces of code keying differently produce a journal neither can replay. Everything that
builds or takes apart a path goes through here.

**Escaping.** Step names, the engine's fixed site words and reserved ``@`` segments never contain
``/``, ``[``, ``]`` or ``%``, so they are written verbatim and the bytes match upstream ``stepPath``.
A switch case key (or the name of a resource reached outside any step) can be any string, so a segment
name is percent-encoded when it contains one of those four characters: ``%`` → ``%25``, ``/`` →
``%2F``, ``[`` → ``%5B``, ``]`` → ``%5D`` (upper-case hex; nothing else is escaped), and the empty
name is written as a lone ``%``. Parsing accepts exactly those escapes and refuses any other spelling,
so every name has one encoding and ``format(parse(p)) == p`` for every valid path. Upstream does not
escape, so such a key (rare, and ambiguous in upstream paths anyway) is keyed differently from a Node
journal.

**Reserved segments** start with ``@``, a character outside the step-name grammar, so a record kept
beside a step's nested body (its ``@when`` guard) can never collide with a step of that body named
``when`` (spec §5.1). Older plain-word records (``inputs``, ``retry[<k>]``, the try guard ``when``)
keep their spelling because journals written with them must still replay.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from telo.errors import ERR_INVALID_STEP_NAME, PathError

STEP_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
_STEP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # used with fullmatch: `$` would accept a trailing "\n"

# --- fixed segments (reference §4, journaling sites) -----------------------------------------------------
ROOT = "steps"  # the base of a run's top-level body
INPUTS = "inputs"  # legacy plain word: the workflow's own inputs (root key) and a step's resolved inputs
WORKFLOW_INPUTS = INPUTS  # the root key of the workflow's own resolved `inputs:` decision
GUARD = "@when"  # an invoke step's `when:` guard — reserved, so a nested step `when` cannot collide
TRY_GUARD = "when"  # a try step's guard: upstream keeps the plain word, so old journals key it so
IF, ELSEIF, THEN, ELSE = "if", "elseif", "then", "else"
WHILE, DO = "while", "do"
SWITCH, CASES, DEFAULT = "switch", "cases", "default"
TRY, CATCH, FINALLY = "try", "catch", "finally"
RETRY = "retry"  # legacy plain word, indexed by attempt
COLLECTION, WAKE_AT, TOKEN, DEADLINE, VALUE = "collection", "wakeAt", "token", "deadline", "value"
OVERRIDE, RESUME = "override", "resume"

_HINT_GRAMMAR = (
    f"a step name must match {STEP_NAME_PATTERN}: a letter or underscore, then letters, digits or "
    "underscores (a hyphen is not allowed, CEL reads it as subtraction)"
)
_ESCAPES = {"%": "%25", "/": "%2F", "[": "%5B", "]": "%5D"}
_UNESCAPES = {v: k for k, v in _ESCAPES.items()}
_NEEDS_ESCAPE = re.compile(r"[%/\[\]]")
_TURN = re.compile(r"\[(?:0|[1-9][0-9]*)\](?:/|\Z)")
_RAW_SEGMENT = re.compile(r"(?P<body>[^\[\]]*)(?:\[(?P<index>0|[1-9][0-9]*)\])?")


@dataclass(frozen=True, slots=True)
class Segment:
    """One path segment: a (decoded) name and an optional repetition index (spec §5.1)."""

    name: str
    index: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise PathError(f"a path segment name must be a string, not {self.name!r}")
        if self.index is not None and (type(self.index) is not int or self.index < 0):
            raise PathError(
                f"segment {self.name!r} has index {self.index!r}; an index is a non-negative integer",
            )

    def __str__(self) -> str:
        text = _escape(self.name)
        return text if self.index is None else f"{text}[{self.index}]"


def _escape(name: str) -> str:
    if not name:
        return "%"
    if _NEEDS_ESCAPE.search(name) is None:  # the common case: a step name or a fixed word
        return name
    return _NEEDS_ESCAPE.sub(lambda m: _ESCAPES[m.group()], name)


def _fail(path: str, position: int, why: str) -> PathError:
    return PathError(
        f"invalid step path {path!r}: {why} at position {position}",
        hint="a path is '/'-joined non-empty segments, each optionally ending in [index]; build paths only "
        "with telo.paths",
        data={"path": path, "position": position},
    )


def _unescape(path: str, start: int, body: str) -> str:
    if body == "%":
        return ""
    if "%" not in body:
        return body
    out: list[str] = []
    i = 0
    while i < len(body):
        if body[i] != "%":
            out.append(body[i])
            i += 1
            continue
        code = body[i : i + 3]
        if code not in _UNESCAPES:
            raise _fail(path, start + i, f"invalid escape {code!r} (only %25 %2F %5B %5D are written)")
        out.append(_UNESCAPES[code])
        i += 3
    return "".join(out)


def parse(path: str) -> tuple[Segment, ...]:
    """Split a path into segments, decoding escapes; raise :class:`PathError` (``ERR_INVALID_PATH``)."""
    if not isinstance(path, str):
        raise PathError(f"a step path must be a string, not {type(path).__name__}")
    return _parse(path)


# A run re-derives the same few paths at every step (every run of a workflow walks the same step names), so
# parsing is memoized; the result is an immutable tuple of frozen segments, safe to share. Bounded, because
# loop turns make the set of paths open-ended. An invalid path raises and is not cached.
@functools.lru_cache(maxsize=4096)
def _parse(path: str) -> tuple[Segment, ...]:
    if not path:
        raise _fail(path, 0, "empty path")
    segments: list[Segment] = []
    start = 0
    for raw in path.split("/"):
        if not raw:
            raise _fail(path, start, "empty segment")
        m = _RAW_SEGMENT.fullmatch(raw)
        if m is None:
            bad = next(i for i, ch in enumerate(raw) if ch in "[]")
            if raw[bad] == "[" and raw.endswith("]") and raw.count("[") == raw.count("]") == 1:
                why = f"invalid index {raw[bad:]!r} (an index is digits without leading zeros)"
            else:
                why = f"stray {raw[bad]!r} (an index is one [digits] ending its segment)"
            raise _fail(path, start + bad, why)
        body, index = m.group("body"), m.group("index")
        if not body:
            raise _fail(path, start, "an index with no segment name before it")
        segments.append(Segment(_unescape(path, start, body), None if index is None else int(index)))
        start += len(raw) + 1
    return tuple(segments)


def format(segments: Iterable[Segment]) -> str:  # shadows the builtin on purpose: used as paths.format
    """Join segments into a path, escaping names as the module docstring describes."""
    parts = [str(s) for s in segments]
    if not parts:
        raise PathError("a step path needs at least one segment")
    return "/".join(parts)


def _append(segments: list[Segment], parts: tuple[str | int, ...]) -> None:
    for part in parts:
        if isinstance(part, str):
            segments.append(Segment(part))
        elif type(part) is int:
            if not segments:
                raise PathError(f"index [{part}] has no segment before it to qualify")
            last = segments[-1]
            if last.index is not None:
                raise PathError(
                    f"segment {str(last)!r} already has an index; cannot add [{part}]",
                    hint="a segment carries at most one repetition index",
                )
            segments[-1] = Segment(last.name, part)
        else:
            raise PathError(f"a path part is a string or an int, not {part!r}")


def step_path(*parts: str | int) -> str:
    """Compose a path like upstream ``stepPath(...parts)``: each string is ONE segment name (escaped if it
    needs to be, never split on ``/``), and an int attaches as ``[n]`` to the segment before it (spec §5.1).
    """
    segments: list[Segment] = []
    _append(segments, parts)
    return format(segments)


def child(base: str | None, *parts: str | int) -> str:
    """Continue the enclosing path ``base`` (or start at ``steps`` when there is none) with ``parts``.

    A nested body MUST continue its dispatching step's path rather than restart at the root (spec §5.1). A
    leading int qualifies ``base``'s last segment: ``child("steps/items", 2)`` is ``steps/items[2]``.
    """
    # The fast path appends text to the (validated) base; anything it does not handle — a bad part, an int
    # after an indexed segment — goes the segment way, which raises the precise error. ``format(parse(p)) == p``
    # for a valid ``p``, and a segment's text ends in ``]`` exactly when it carries an index, so both ways
    # produce the same bytes (a property test holds them equal).
    if base is None:
        text = ROOT
    elif type(base) is str:
        _parse(base)  # validates (raises PathError); memoized
        text = base
    else:
        return _child_by_segments(base, parts)
    for part in parts:
        if isinstance(part, str):
            text = f"{text}/{_escape(part)}"
        elif type(part) is int and part >= 0 and not text.endswith("]"):
            text = f"{text}[{part}]"
        else:
            return _child_by_segments(base, parts)
    return text


def _child_by_segments(base: str | None, parts: tuple[str | int, ...]) -> str:
    """:func:`child` the plain way: parse, append segments, format (the reference for its fast path)."""
    segments = list(parse(base)) if base is not None else [Segment(ROOT)]
    _append(segments, parts)
    return format(segments)


def extend(base: str | None, segments: Iterable[Segment]) -> str:
    """``base`` followed by already-parsed ``segments`` (for example the result of :func:`relative_to`)."""
    return format([*(parse(base) if base is not None else (Segment(ROOT),)), *segments])


def validate_step_name(name: object, *, where: str | None = None) -> str:
    """Return ``name`` if it matches the step-name grammar, else raise ``ERR_INVALID_STEP_NAME`` (§5.1)."""
    if isinstance(name, str) and _STEP_NAME.fullmatch(name):
        return name
    place = f" in {where}" if where else ""
    raise PathError(
        ERR_INVALID_STEP_NAME,
        f"invalid step name {name!r}{place}",
        hint=_HINT_GRAMMAR,
        data={"name": name if isinstance(name, str) else repr(name), "where": where},
    )


def reserved(name: str) -> str:
    """The reserved segment ``@name``: outside the step-name grammar, so it never collides with a step."""
    return "@" + validate_step_name(name, where="a reserved segment")


def is_reserved(segment: str | Segment) -> bool:
    """Whether a segment (name or :class:`Segment`) is a reserved ``@`` segment."""
    name = segment.name if isinstance(segment, Segment) else segment
    return name.startswith("@")


# --- the journaling sites of reference §4, each a function of the step (or dispatch) path ------------------
def inputs_path(step: str) -> str:
    return child(step, INPUTS)


def guard_path(step: str) -> str:
    return child(step, GUARD)


def if_path(step: str) -> str:
    return child(step, IF)


def elseif_path(step: str, i: int) -> str:
    return child(step, ELSEIF, i)


def then_body(step: str) -> str:
    return child(step, THEN)


def elseif_then_body(step: str, i: int) -> str:
    return child(step, ELSEIF, i, THEN)


def else_body(step: str) -> str:
    return child(step, ELSE)


def while_path(step: str, turn: int) -> str:
    """The condition decision of turn ``turn`` (a while step, or a Run.Loop at its dispatch path)."""
    return child(step, WHILE, turn)


def do_body(step: str, turn: int) -> str:
    return child(step, DO, turn)


def switch_path(step: str) -> str:
    return child(step, SWITCH)


def case_body(step: str, key: str) -> str:
    """The body of switch case ``key``; any string is allowed (escaped, see the module docstring)."""
    return child(step, CASES, key)


def default_body(step: str) -> str:
    return child(step, DEFAULT)


def try_guard_path(step: str) -> str:
    return child(step, TRY_GUARD)


def try_body(step: str) -> str:
    return child(step, TRY)


def catch_body(step: str) -> str:
    return child(step, CATCH)


def finally_body(step: str) -> str:
    return child(step, FINALLY)


def retry_path(step: str, attempt: int) -> str:
    return child(step, RETRY, attempt)


# Confirmed effects (event-log spec §2): telo's own records beside a step, under reserved segments.
ATTEMPT_MARK = "@attempt"  # the start of re-attempt k (attempt 0 is marked by the step's inputs decision)
RETRY_VERDICT = "@retry"  # the verdict of failed attempt k: code, backoff, due time
UNCONFIRMED = "@unconfirmed"  # the n-th resolution of an effect whose outcome was unknown
REDRIVE_MARK = "@redrive"  # the start of the re-execution the n-th resolution decided
FAILED = "@failed"  # a step's failure receipt: the error its effect ended with (event-log §1 "outcome")
PAYLOAD_SCHEMA = "@payloadSchema"  # the schema an Await's delivery must match, recorded before it parks


def attempt_path(step: str, attempt: int) -> str:
    return child(step, ATTEMPT_MARK, attempt)


def retry_verdict_path(step: str, attempt: int) -> str:
    return child(step, RETRY_VERDICT, attempt)


def unconfirmed_path(step: str, n: int) -> str:
    return child(step, UNCONFIRMED, n)


def redrive_path(step: str, n: int) -> str:
    return child(step, REDRIVE_MARK, n)


def failure_path(step: str) -> str:
    """Where a failed step's receipt is recorded: ``<step>/@failed``."""
    return child(step, FAILED)


def payload_schema_path(dispatch: str) -> str:
    return child(dispatch, PAYLOAD_SCHEMA)


def collection_path(dispatch: str) -> str:
    return child(dispatch, COLLECTION)


def turn_body(dispatch: str, turn: int) -> str:
    """The body of turn/item ``turn`` of an iteration, projection or loop: ``<dispatch>[turn]``."""
    return child(dispatch, turn)


def wake_at_path(dispatch: str) -> str:
    return child(dispatch, WAKE_AT)


def token_path(dispatch: str) -> str:
    return child(dispatch, TOKEN)


def deadline_path(dispatch: str) -> str:
    return child(dispatch, DEADLINE)


def value_path(dispatch: str) -> str:
    return child(dispatch, VALUE)


def fallback_path(resource_name: str) -> str:
    """Where a durable kind reached outside any step records: ``steps/<resourceName>``."""
    return child(None, resource_name)


def resume_override_path(epoch_ms: int) -> str:
    """An operator resume's decision key, ``override/resume/<epoch ms>`` (a root key, not under ``steps``)."""
    if type(epoch_ms) is not int or epoch_ms < 0:
        raise PathError(f"a resume time is non-negative epoch ms, not {epoch_ms!r}")
    return step_path(OVERRIDE, RESUME, str(epoch_ms))


# --- navigating paths (subtrees, regions) -----------------------------------------------------------------
def is_within(path: str, prefix: str, *, include_turns: bool = False) -> bool:
    """Whether ``path`` is ``prefix`` or lies in its subtree (whole segments: ``steps/a`` is not within
    ``steps/ab``). With ``include_turns``, ``<prefix>[n]/…`` (the turns of an iteration or loop dispatched at
    ``prefix``) count too. Exact on plain strings because escaping keeps ``/`` and ``[`` structural.
    """
    if path == prefix or path.startswith(prefix + "/"):
        return True
    if not include_turns or prefix.endswith("]") or not path.startswith(prefix):
        return False
    return _TURN.match(path, len(prefix)) is not None


def parent(path: str) -> str | None:
    """The path without its last segment, or ``None`` for a single-segment path."""
    segments = parse(path)
    return format(segments[:-1]) if len(segments) > 1 else None


def relative_to(path: str, prefix: str) -> tuple[Segment, ...]:
    """The segments of ``path`` below ``prefix`` (empty when equal); ``PathError`` if it is not within."""
    inner, outer = parse(path), parse(prefix)
    if inner[: len(outer)] != outer:
        raise PathError(
            f"step path {path!r} is not within {prefix!r}",
            data={"path": path, "prefix": prefix},
        )
    return inner[len(outer) :]
