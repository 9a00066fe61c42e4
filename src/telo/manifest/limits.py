"""The two limits a manifest's YAML is held to before any node is built: alias expansion and nesting.

Both are checked on the parser's EVENT stream — flat, so the scan itself neither recurses nor expands
anything — and a document that breaks one is reported with ONE diagnostic at the offending alias or
container and is not composed or built at all (:func:`telo.manifest.reader.read_documents`):

* **Alias expansion** ("billion laughs"): YAML aliases share nodes, but the manifest's data is plain Python
  data (a tree), so every alias is copied out in full. Nine levels of nine-element lists of aliases are 400
  bytes of text and 9⁹ ≈ 387 million nodes. The scan knows the expanded size of every anchor and adds up what
  each alias expands to; past :data:`MAX_ALIAS_NODES` the document is refused (``ERR_MANIFEST_YAML``).
* **Nesting** past :data:`MAX_MANIFEST_DEPTH` (counted over lists and mappings, aliases expanded): the
  runtime's compiler and interpreter walk manifest data recursively, a few Python frames a level, so data
  nested as deep as the value domain allows (:data:`telo.values.depth.MAX_VALUE_DEPTH`, 499) would end in a
  ``RecursionError`` at ``telo run`` (measured: 250 levels in a step's ``inputs`` ran, 350 did not). Refused
  with the domain's own code, ``ERR_TYPED_FRAME_UNENCODABLE``. Values that arrive at run time (``--input``,
  payloads, step results) keep the domain's limit: they are walked iteratively.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import yaml
from yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)

from telo.errors import Code
from telo.values.depth import MAX_VALUE_DEPTH

from .diagnostics import ERR_MANIFEST_YAML, Diagnostic
from .nodes import Pos

#: Nodes that alias expansion may ADD to one document (the nodes written out in the text are not counted).
#: An ordinary manifest reuses a few small blocks (a retry policy, a schema, shared inputs) a few times:
#: hundreds to a few thousand nodes. 100 000 is two orders of magnitude beyond that, and still cheap to build
#: (well under a second and some tens of MB), while a bomb is refused before it costs anything.
MAX_ALIAS_NODES: Final = 100_000

#: The deepest nesting of a manifest's data (see the module docstring): ample for any hand-written manifest,
#: and with room under Python's recursion limit for the runtime's recursive walks of it.
MAX_MANIFEST_DEPTH: Final = 200
assert MAX_MANIFEST_DEPTH <= MAX_VALUE_DEPTH

_STARTS: Final = (MappingStartEvent, SequenceStartEvent)
_ENDS: Final = (MappingEndEvent, SequenceEndEvent)


@dataclass(frozen=True, slots=True)
class Refusal:
    """The first document (0-based, counting empty ones) that breaks a limit, and why."""

    document: int
    diagnostic: Diagnostic


def scan(loader: Any, file: str) -> Refusal | None:
    """Scan the events of ``loader`` (a fresh PyYAML loader over the text) for the first refusal.

    A syntax error ends the scan with None: the composing pass reports it, with the documents before it."""
    document = -1
    sizes: dict[str, int] = {}  # anchor -> nodes of its (expanded) subtree
    heights: dict[str, int] = {}  # anchor -> containers on its deepest branch (a scalar: 0)
    expanded = 0
    stack: list[list[Any]] = []  # open containers: [anchor, size so far, height so far]
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, DocumentStartEvent):
                document += 1
                sizes.clear()
                heights.clear()
                expanded = 0
                stack.clear()
                continue
            if isinstance(event, _STARTS):
                if len(stack) + 1 > MAX_MANIFEST_DEPTH:
                    return Refusal(document, _too_deep(file, event.start_mark))
                stack.append([event.anchor, 1, 1])
                continue
            if isinstance(event, _ENDS):
                anchor, size, height = stack.pop()
            elif isinstance(event, ScalarEvent):
                anchor, size, height = event.anchor, 1, 0
            elif isinstance(event, AliasEvent):
                anchor = None  # an alias to an anchor still open is a cycle: the builder reports it
                size, height = sizes.get(event.anchor or "", 1), heights.get(event.anchor or "", 0)
                expanded += size
                if expanded > MAX_ALIAS_NODES:
                    return Refusal(document, _bomb(file, event.start_mark))
                if len(stack) + height > MAX_MANIFEST_DEPTH:
                    return Refusal(document, _too_deep(file, event.start_mark))
            else:
                continue
            if anchor:
                sizes[anchor], heights[anchor] = size, height
            if stack:
                parent = stack[-1]
                parent[1] += size
                parent[2] = max(parent[2], height + 1)
    except yaml.YAMLError:
        return None
    return None


def _pos(file: str, mark: Any) -> Pos:
    return Pos(file, mark.line + 1, mark.column + 1) if mark else Pos(file, 1, 1)


def _bomb(file: str, mark: Any) -> Diagnostic:
    return Diagnostic(
        ERR_MANIFEST_YAML,
        f"YAML aliases expand this document to more than {MAX_ALIAS_NODES} nodes beyond its text (this "
        "alias crosses the limit); the document is not read",
        _pos(file, mark),
        hint="anchors and aliases are for reusing small blocks; write the data out, or nest fewer aliases "
        "inside each other",
    )


def _too_deep(file: str, mark: Any) -> Diagnostic:
    return Diagnostic(
        Code.TYPED_FRAME_UNENCODABLE,
        f"the data here is nested deeper than {MAX_MANIFEST_DEPTH} lists or mappings, a manifest's limit "
        f"(values given at run time may nest {MAX_VALUE_DEPTH}); the document is not read",
        _pos(file, mark),
        hint="flatten the data, or pass the deep part at run time (an input, a file the function reads)",
    )
