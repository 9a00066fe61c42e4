"""The value domain's nesting limit, checked without recursion, for every boundary a value enters through.

The typed-frame writer refuses a value whose containers nest :data:`MAX_VALUE_DEPTH` + 1 deep (see
:data:`~telo.values.canonical.MAX_DEPTH`: the frame keeps one level to spare for a tagged scalar), so a
deeper value can never be journaled. Refusing it where it ENTERS — a manifest literal, ``--input``, a
delivered payload, plain JSON — with the writer's own code (``ERR_TYPED_FRAME_UNENCODABLE``) and a message
naming where, gives one clear error instead of a ``RecursionError`` from whichever recursive helper meets it
first. The walk here is iterative on purpose: it must answer for any depth, on any caller's stack.
"""

from __future__ import annotations

import json
from typing import Any, Final

from telo.errors import TypedFrameUnencodable
from telo.values.canonical import MAX_DEPTH
from telo.values.types import CelMap

#: The deepest container nesting a value may have (a list holding a list … 499 levels; scalars are no level).
MAX_VALUE_DEPTH: Final = MAX_DEPTH - 1

#: The plain writer's bound (:func:`telo.values.to_plain`): a little past the domain's, because it also writes
#: the views that carry a value a few levels down (``telo result`` prints a run's result under
#: ``result.steps.<name>.result``), and still far inside ``json.dumps``'s own C recursion limit (~1000).
MAX_PLAIN_DEPTH: Final = MAX_VALUE_DEPTH + 64

HINT: Final = (f"values nest at most {MAX_VALUE_DEPTH} lists or maps deep (the typed frame's limit); "
               "flatten the value, or carry the deep part as a string")


def _kids(node: Any) -> list[tuple[str | int, Any]] | None:
    t = type(node)
    if t is list:
        return list(enumerate(node))
    if t is dict:
        return [(str(k), v) for k, v in node.items()]
    if t is CelMap:
        return [(str(k), v) for k, v in node.pairs()]
    return None


def too_deep(value: Any, limit: int = MAX_VALUE_DEPTH) -> list[str | int] | None:
    """The path (outermost segment first) of the first container nested deeper than ``limit``, or None.

    Iterative and bounded by ``limit``: a value that contains itself is reported as too deep, not looped on."""
    kids = _kids(value)
    if kids is None:
        return None
    if limit < 1:
        return []
    path: list[str | int] = []
    stack = [iter(kids)]
    while stack:
        step = next(stack[-1], None)
        if step is None:
            stack.pop()
            if path:
                path.pop()
            continue
        segment, child = step
        grandkids = _kids(child)
        if grandkids is None:
            continue
        path.append(segment)
        if len(stack) + 1 > limit:
            return path
        stack.append(iter(grandkids))
    return None


def pointer_of(path: list[str | int]) -> str:
    """The JSON Pointer (RFC 6901) of an outermost-first path."""
    return "".join("/" + str(s).replace("~", "~0").replace("/", "~1") for s in path)


def check_depth(value: Any, where: str) -> None:
    """Raise ``ERR_TYPED_FRAME_UNENCODABLE`` when ``value`` nests deeper than :data:`MAX_VALUE_DEPTH`;
    ``where`` names the value in the message (``"--input order"``, ``"the payload"``). The error's path is the
    empty pointer, as the frame writer's own depth refusal: the pointer would be hundreds of segments long."""
    if too_deep(value) is not None:
        raise too_deep_error(where)


def too_deep_error(where: str, limit: int = MAX_VALUE_DEPTH) -> TypedFrameUnencodable:
    return TypedFrameUnencodable(f"{where} is nested deeper than {limit} levels", path="", hint=HINT)


def load_json(text: str, where: str) -> Any:
    """``json.loads`` for text from outside (a CLI option, a form field), refused past the nesting limit.

    ``json.loads`` itself recurses in C and raises ``RecursionError`` on text nested about a thousand deep;
    both that and a shallower value past :data:`MAX_VALUE_DEPTH` become :func:`too_deep_error`. Text that
    is not JSON raises ``ValueError`` as ``json.loads`` does."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise too_deep_error(where) from None
    check_depth(value, where)
    return value
