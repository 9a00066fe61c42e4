"""Positions of every YAML node, keyed by JSON Pointer (RFC 6901) inside its document.

Why a side table rather than wrapped values: the configuration handed to ``jsonschema``, the CEL adapter
and the engine stays plain Python data, yet any later stage that knows *where in a resource* something is
(a ``jsonschema`` error path, a step path, the pointer of an inline declaration) can report ``file:line:col``
by asking :meth:`PositionTable.value` or ``ResourceDecl.position``. One table per YAML document; a resource
(or an inline resource) is a ``base`` pointer into its document's table.
"""

from __future__ import annotations

from collections.abc import Iterable

from .nodes import Pos


def escape(segment: str | int) -> str:
    """One JSON Pointer reference token: ``~`` → ``~0``, ``/`` → ``~1``."""
    return str(segment).replace("~", "~0").replace("/", "~1")


def unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def join(base: str, *segments: str | int) -> str:
    """``base`` extended by ``segments`` (``join("", "steps", 0) == "/steps/0"``)."""
    return base + "".join("/" + escape(s) for s in segments)


def from_path(segments: Iterable[str | int]) -> str:
    """The pointer of a ``jsonschema`` error path (or any key/index sequence)."""
    return join("", *segments)


def split(pointer: str) -> list[str]:
    """The unescaped tokens of ``pointer`` (``""`` is the root: no tokens)."""
    if not pointer:
        return []
    if not pointer.startswith("/"):
        raise ValueError(f"a JSON pointer starts with '/': {pointer!r}")
    return [unescape(t) for t in pointer[1:].split("/")]


def parent(pointer: str) -> str | None:
    return None if not pointer else pointer[: pointer.rfind("/")]


class PositionTable:
    """Positions of one document's nodes: where each value starts, and where each mapping key starts."""

    __slots__ = ("_keys", "_values", "file")

    def __init__(self, file: str) -> None:
        self.file = file
        self._values: dict[str, Pos] = {}
        self._keys: dict[str, Pos] = {}

    def add(self, pointer: str, pos: Pos, key: Pos | None = None) -> None:
        self._values[pointer] = pos
        if key is not None:
            self._keys[pointer] = key

    def value(self, pointer: str) -> Pos:
        """Where the value at ``pointer`` starts; for a pointer to nothing (a missing field), the position of
        its nearest existing ancestor, so a "missing required field" points at the mapping that lacks it."""
        current: str | None = pointer
        while current is not None:
            found = self._values.get(current)
            if found is not None:
                return found
            current = parent(current)
        return Pos(self.file, 1, 1)

    def key(self, pointer: str) -> Pos:
        """Where the mapping key naming ``pointer``'s value starts (falls back to :meth:`value`)."""
        return self._keys.get(pointer) or self.value(pointer)

    def exact(self, pointer: str) -> Pos | None:
        """The position recorded for exactly ``pointer``, or ``None``."""
        return self._values.get(pointer)

    def __contains__(self, pointer: object) -> bool:
        return pointer in self._values

    def __len__(self) -> int:
        return len(self._values)
