"""Target identity: where a step's target is declared, and its wire encoding (spec §5.3; reference §1, §10).

A journal records a step's target by declaration site, never by live object: instance identity is
process-local, so a recorded instance would mean nothing to the process reading the journal back. The
identity has three forms:

* module-level — ``(module, kind, name)``;
* ``with:``-scoped — plus ``scope = (owner, site, stepPath)``: the scope RUN distinguishes the instance;
* inline — plus a JSON ``pointer`` to the declaration (a step's inline dispatch target instead gets a
  derived name, :func:`inline_target_name`).

The encoding is canonical JSON (fixed key order, ``v`` = 1) so two runtimes producing the same identity
produce the same bytes. Anything that cannot be written down completely is refused at the SENDER
(``ERR_DURABLE_TARGET_UNENCODABLE``), where the manifest is still in reach; anything malformed or of an
unknown version is refused at the reader (``ERR_DURABLE_TARGET_UNDECODABLE``) rather than resolved to a
resource that merely shares a name.
"""

from __future__ import annotations

import functools
import json
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from telo.errors import TargetUndecodable, TargetUnencodable

ENCODING_VERSION = 1


@dataclass(frozen=True, slots=True)
class Scope:
    """The ``with:`` scope run a scoped instance belongs to (spec §5.3). ``None`` or ``""`` = not known."""

    owner: str | None
    site: str | None
    step_path: str | None


@dataclass(frozen=True, slots=True)
class TargetIdentity:
    """A step target's declaration site (spec §5.3).

    ``scoped`` says the name resolved inside a ``with:`` scope even when the tuple identifying WHICH scope run
    is not known; the spec keeps the two apart, and such an identity is refused by :func:`encode_target`
    instead of being encoded as module-level. A ``scope`` implies scoped, so ``scoped`` is normalised to
    ``True`` whenever ``scope`` is given (a decoded identity therefore compares equal to the one encoded).
    """

    kind: str | None
    name: str | None
    module: str | None = None
    pointer: str | None = None
    scope: Scope | None = None
    scoped: bool = False

    def __post_init__(self) -> None:
        if self.scope is not None and not self.scoped:
            object.__setattr__(self, "scoped", True)

    def describe(self) -> str:
        """``Kind 'name'`` for messages."""
        return f"{self.kind or '<no kind>'} {self.name or '<no name>'!r}"


def module_level(kind: str, name: str, module: str) -> TargetIdentity:
    """A resource declared at module level: ``(module, kind, name)``."""
    return TargetIdentity(kind, name, module)


def scoped(kind: str, name: str, module: str, *, owner: str, site: str, step_path: str) -> TargetIdentity:
    """A resource declared in a ``with:`` scope opened by the step at ``step_path``."""
    return TargetIdentity(kind, name, module, scope=Scope(owner, site, step_path))


def inline(kind: str, name: str, module: str, pointer: str) -> TargetIdentity:
    """An inline-declared resource: its declaring resource's name and a JSON pointer to the declaration."""
    return TargetIdentity(kind, name, module, pointer=pointer)


# --- the inline dispatch target's derived name (spec §5.3, reference §1) ------------------------------------
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+")


def pascal_piece(text: str) -> str:
    """``P(x)``: split on runs outside ``[A-Za-z0-9]``, drop empty pieces, upper-case each piece's first
    character (the rest is kept as written) and join."""
    return "".join(p[0].upper() + p[1:] for p in _NON_ALNUM.split(text) if p)


def inline_target_name(
    owner_kind: str, owner_name: str, path_segments: Iterable[str | int], step_name: str
) -> str:
    """The name of a step's inline dispatch target: ``P(ownerKind) P(ownerName) P(s)… P(stepName)``.

    ``path_segments`` are the body field and step index, then per enclosing branch its key and index
    (``then`` | ``elseif, i, then`` | ``else`` | ``do`` | ``cases, key`` | ``default`` | ``try`` | ``catch``
    | ``finally``). The 2nd step ``start`` of sequence ``test`` is ``SequenceTestSteps1Start``. The result
    is not injective; it identifies a target only as far as it is distinct among the module's names.
    """
    pieces = [owner_kind, owner_name, *(str(s) for s in path_segments), step_name]
    return "".join(pascal_piece(p) for p in pieces)


# --- encoding (sender side) ---------------------------------------------------------------------------------
def _present(value: object) -> bool:
    return isinstance(value, str) and value != ""


def _unencodable(identity: TargetIdentity, why: str, hint: str) -> TargetUnencodable:
    return TargetUnencodable(
        f"cannot encode step target {identity.describe()}: {why}",
        hint=hint,
        data={"kind": identity.kind, "name": identity.name},
    )


def encode_target(identity: TargetIdentity) -> str:
    """The canonical encoding (spec §5.3): keys ``v, kind, name, module, pointer, scope{owner, site,
    stepPath}``, no whitespace. Refusals follow reference §10's order.
    """
    if not (_present(identity.kind) and _present(identity.name)):
        raise _unencodable(identity, "it has no kind or no name",
                           "a target is identified by its kind and resource name; resolve it first")
    if identity.pointer is not None and identity.scoped:
        raise _unencodable(
            identity,
            "it carries both a JSON pointer and a 'with:' scope, so it describes no declaration site",
            "an identity is module-level, scoped or inline, never both scoped and inline",
        )
    if not _present(identity.module):
        raise _unencodable(identity, "it carries no declaring module",
                           "record the module ref that declares the resource; it tells same-named "
                           "resources of two libraries apart")
    out: dict[str, Any] = {
        "v": ENCODING_VERSION, "kind": identity.kind, "name": identity.name, "module": identity.module,
    }
    if identity.pointer is not None:
        if not _present(identity.pointer):
            raise _unencodable(identity, "its JSON pointer is empty",
                               "an inline target's pointer locates its declaration inside the resource")
        out["pointer"] = identity.pointer
    if identity.scoped:
        scope = identity.scope or Scope(None, None, None)
        for field, value in (("owner", scope.owner), ("site", scope.site), ("stepPath", scope.step_path)):
            if not _present(value):
                raise _unencodable(
                    identity, f"it is declared inside a 'with:' scope but records no {field}",
                    "a scoped instance is told apart by its scope run (owner, site, stepPath); encoding it "
                    "without them would resolve a different resource of the same name",
                )
        out["scope"] = {"owner": scope.owner, "site": scope.site, "stepPath": scope.step_path}
    # RFC 8785 string escaping equals json.dumps' with ensure_ascii off; the key order is fixed above.
    text = json.dumps(out, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")  # a lone surrogate has no UTF-8 form, so no other runtime could read it
    except UnicodeEncodeError:
        raise _unencodable(identity, "a field is not valid Unicode (it holds a lone surrogate)",
                           "identity fields are text") from None
    return text


# --- decoding (reader side) ---------------------------------------------------------------------------------
_DECODE_HINT = "the identity was not written by a conforming encoder, or was damaged on the way"


def _undecodable(why: str, hint: str = _DECODE_HINT) -> TargetUndecodable:
    return TargetUndecodable(f"refusing step target: {why}", hint=hint)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            # Two readers could disagree on which copy wins; resolving either is guessing.
            raise _undecodable(f"the key {key!r} appears twice")
        out[key] = value
    return out


def decode_target(text: str | bytes) -> TargetIdentity:
    """Read an encoded identity (spec §5.3), refusing rather than guessing; unknown extra keys are ignored
    (a new optional field does not bump ``v``). A decoded identity is scoped exactly when it has a scope.
    """
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates)
    except TargetUndecodable:
        raise
    except ValueError:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        raise _undecodable("the payload is not valid JSON") from None
    if not isinstance(value, dict):
        raise _undecodable(f"the payload is not an object (got {type(value).__name__})")
    if "v" not in value:
        raise _undecodable(f"it records no encoding version (this runtime reads encoding version "
                           f"{ENCODING_VERSION})")
    v = value["v"]
    if isinstance(v, bool) or not isinstance(v, int | float) or v != ENCODING_VERSION:
        raise _undecodable(
            f"it is in encoding version {json.dumps(v)}, which this runtime does not read",
            hint=f"this runtime reads encoding version {ENCODING_VERSION}; a newer runtime wrote this one",
        )
    for field in ("kind", "name", "module"):
        if not _present(value.get(field)):
            state = "missing" if field not in value else "not a non-empty string"
            raise _undecodable(f"it is without a kind, a name or a module ({field!r} is {state})")
    pointer, scope = value.get("pointer"), value.get("scope")
    if pointer is not None and scope is not None:
        raise _undecodable("it carries both a pointer and a scope, which contradict each other")
    if "pointer" in value and not _present(pointer):
        raise _undecodable("its pointer is not a non-empty string")
    decoded_scope: Scope | None = None
    if "scope" in value:
        if not isinstance(scope, dict):
            raise _undecodable("its scope is not an object")
        for field in ("owner", "site", "stepPath"):
            if not _present(scope.get(field)):
                raise _undecodable(f"its scope records no {field}")
        decoded_scope = Scope(scope["owner"], scope["site"], scope["stepPath"])
    return TargetIdentity(value["kind"], value["name"], value["module"], pointer, decoded_scope)


# --- what a journal entry stores, and replay comparison (reference §4) --------------------------------------
def journal_target(identity: TargetIdentity) -> dict[str, str]:
    """A step entry's ``target``: ``{kind, name, module?}`` (spec §5.2). Scope and pointer are not stored."""
    if not (_present(identity.kind) and _present(identity.name)):
        raise _unencodable(identity, "it has no kind or no name",
                           "a journaled target is identified by its kind and resource name")
    out = {"kind": str(identity.kind), "name": str(identity.name)}
    if _present(identity.module):
        out["module"] = str(identity.module)
    return out


def targets_match(recorded: Mapping[str, Any], reached: Mapping[str, Any]) -> bool:
    """Whether a replay reached the target an entry records: kind and name equal, and module equal when both
    sides have one (an old entry may lack it) — the same module however its ``file://`` URL is spelled
    (:func:`same_module`). A mismatch is ``ERR_JOURNAL_ENTRY_MISMATCH`` (spec §5.3).
    """
    if recorded.get("kind") != reached.get("kind") or recorded.get("name") != reached.get("name"):
        return False
    a, b = recorded.get("module"), reached.get("module")
    return not (_present(a) and _present(b)) or a == b or same_module(str(a), str(b))


# --- a manifest's module URL (docs/compat.md "Module URLs") ----------------------------------------------------
# The bytes Node's url.pathToFileURL leaves as they are on POSIX: its own escape table (node_url.cc: NUL, tab,
# LF, CR, space " # % ? [ \ ] ^ | ~) and then the WHATWG URL parser's path percent-encode set (C0 controls,
# < > ` { } and every byte from 0x7F up) encode every other byte of the path's UTF-8.
_NODE_KEEP: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._!$&'()*+,;=:@/")


def file_url(path: str | os.PathLike[str]) -> str:
    """A manifest's module URL as the Node runtime spells it (``url.pathToFileURL``): the absolute, normalised
    path — symlinks NOT resolved, as Node's ``path.resolve`` leaves them — with every byte of its UTF-8 outside
    ``A-Z a-z 0-9 - . _ ! $ & ' ( ) * + , ; = : @ /`` percent-encoded in upper-case hex. A journal written by
    either runtime for the same file so records the same ``module``, which an upstream replay compares exactly."""
    absolute = os.path.abspath(os.fspath(path))
    if os.name == "nt":  # (Node's Windows rules differ; telo's journals are written on POSIX)
        from pathlib import Path

        return Path(absolute).as_uri()
    if absolute.startswith("//"):  # POSIX normpath keeps a leading "//"; path.resolve does not
        absolute = "/" + absolute.lstrip("/")
    raw = absolute.encode("utf-8", "surrogateescape")
    return "file://" + "".join(chr(b) if b in _NODE_KEEP else f"%{b:02X}" for b in raw)


def same_module(a: str, b: str) -> bool:
    """Whether two module refs name one module: equal, or two ``file://`` URLs of one file however spelled —
    telo's older spelling (symlinks resolved, Python's percent-encoding), Node's, another percent-encoding — so
    a journal recorded under any of them replays without ``ERR_JOURNAL_ENTRY_MISMATCH``."""
    if a == b:
        return True
    real = _real_file(a)
    return real is not None and real == _real_file(b)


@functools.lru_cache(maxsize=256)
def _real_file(url: str) -> str | None:
    """The file a ``file:`` URL names, percent-decoded and with its symlinks resolved; None for another URL."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    return os.path.realpath(urllib.parse.unquote(parts.path, errors="surrogateescape"))
