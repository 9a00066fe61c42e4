"""Plain JSON for a reader that predates the typed frame (journal compat ``legacy``; docs/compat.md).

The upstream runtime released before the codec (telo-reference [M]) reads a journal value as plain JSON and
takes it as it stands: a number is a JS number (a CEL double), an object a map of strings — and a frame, which
it does not know, a string. :func:`encode_legacy` writes a value in that form when the form gives the value back
with its CEL type, and REFUSES it otherwise (:class:`~telo.errors.LegacyUnencodable`, with the JSON Pointer of
the node and its type) instead of writing what would read back as something else:

* null, bool, string, list, a map whose keys are strings, and a finite double are plain JSON — as they are in
  the frame itself (a negative zero, which the frame tags, is the JSON number ``-0.0``);
* an int reads back as a double from plain JSON, so it is refused — unless ``bigint``: the upstream SQL stores
  wrote an int as ``{"$bigint": "<digits>"}`` and read it back as an int, as telo's legacy reader does;
* a uint, bytes, timestamp, duration or Telo.Url has no plain JSON form that reads back as itself (each would
  arrive as a number or a string), nor has NaN or an infinity (JSON has none), nor a map with a key that is not
  a string (an object's keys are strings): refused;
* a map whose one member is ``"$bigint"`` holding a string would read back as an int: refused.

The text is derived from the canonical frame (:func:`~telo.values.encode_frame`), so every refusal of the value
domain comes first with its own code, and maps keep the frame's canonical member order — the order a replay of
the frame would give — then re-serialised with Python's ``json``, whose output reads back to the same text (the
file journal keeps a legacy value as JSON inside its line, and checksums its text).
"""

from __future__ import annotations

import json
from typing import Any, Final

from telo.errors import LegacyUnencodable
from telo.values.fastwrite import encode_frame

HINT: Final = ("convert the value where it is produced (string(t), double(n), a map of strings …), or write this "
               "journal with typed frames (no --journal-compat legacy / TELO_JOURNAL_COMPAT): the upstream runtime "
               "that predates the codec cannot carry it")

# Why each tag has no legacy form: what a reader of plain JSON would make of it.
_WHY: Final = {
    "int": "plain JSON reads an int back as a double (this journal has no int form its upstream reader knows)",
    "uint": "the upstream runtime has no uint: plain JSON would read it back as a double",
    "bytes": "plain JSON has no bytes: it would read back as a string",
    "google.protobuf.Timestamp": "plain JSON would carry it as its text, which reads back as a string",
    "google.protobuf.Duration": "plain JSON would carry it as its text, which reads back as a string",
    "Telo.Url": "plain JSON would carry it as its text, which reads back as a string",
    "double": "JSON has no NaN or infinity",
}


def encode_legacy(value: Any, *, bigint: bool = False) -> str:
    """The plain JSON text of ``value`` for a reader that predates the typed frame (module docstring).

    Raises :class:`~telo.errors.TypedFrameUnencodable` for a value outside the CEL domain, and its subclass
    :class:`~telo.errors.LegacyUnencodable` for a CEL value plain JSON cannot carry back (``ints`` are carried
    as ``{"$bigint": …}`` when ``bigint``)."""
    frame = encode_frame(value)
    parsed = json.loads(frame)
    if '"$telo"' in frame or '"$bigint"' in frame:
        parsed = _untag(parsed, bigint)
    return json.dumps(parsed, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _refuse(type_name: str, pointer: str, why: str) -> LegacyUnencodable:
    return LegacyUnencodable(f"journal compat legacy cannot carry this {type_name} value: {why}", path=pointer,
                             type_name=type_name, hint=HINT)


def _segment(key: str | int) -> str:
    return "/" + str(key).replace("~", "~0").replace("/", "~1")


def _untag(root: Any, bigint: bool) -> Any:
    """The parsed frame ``root`` with its tags made plain JSON, or the first refusal in document order."""
    holder = [root]
    stack: list[tuple[Any, Any, str]] = [(holder, 0, "")]
    while stack:
        parent, key, pointer = stack.pop()
        node = parent[key]
        if type(node) is list:
            stack.extend((node, i, pointer + _segment(i)) for i in reversed(range(len(node))))
        elif type(node) is dict:
            if "$telo" in node:  # (in a canonical frame an object with that member is always a tag)
                tag = node["$telo"]
                node = parent[key] = _plain(tag, node["value"], pointer, bigint)
                if tag != "map":
                    continue  # a scalar, or an int as {"$bigint": …}; a map of strings is a plain object now
            elif len(node) == 1 and type(node.get("$bigint")) is str:
                raise _refuse("map", pointer, 'a map whose one member is "$bigint" reads back as an int')
            stack.extend((node, k, pointer + _segment(k)) for k in reversed(list(node)))
    return holder[0]


def _plain(tag: str, payload: Any, pointer: str, bigint: bool) -> Any:
    if tag == "int" and bigint:
        return {"$bigint": payload}
    if tag == "double" and payload == "-0":
        return -0.0
    if tag == "map":
        pairs: list[list[Any]] = payload
        for key, _ in pairs:
            if type(key) is not str:
                shown = "bool" if type(key) is bool else key["$telo"] if type(key) is dict else type(key).__name__
                raise _refuse("map", pointer, f"it has a key of type {shown}, and a JSON object's keys read back "
                              "as strings")
        return {key: item for key, item in pairs}
    raise _refuse(tag, pointer, _WHY.get(tag, "plain JSON has no form for it"))
