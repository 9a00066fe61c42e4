"""Inputs given on the command line (``--input k=v``, ``--input-json k=JSON``), typed by the schema that receives
them (issue 15; docs/cli.md "Inputs").

``--input k=v`` is text: ``id=007`` is the string ``"007"``, ``gate=true`` the string ``"true"`` — unless the
input it lands in declares another type. Guessing from the text (the earlier rule: JSON when it parses as JSON)
turned ids, zip codes and version strings into numbers. ``--input-json k=JSON`` is always JSON.

Where the type comes from:

- ``telo schedule MANIFEST W`` (and anything else naming one workflow): ``W``'s ``inputType``, property ``k``;
- ``telo run MANIFEST``: the targets'. The command line's inputs are the targets' ``inputs``, which a target
  maps onto its invocable's call with CEL; an input passed straight through — ``inputs: {k: !cel "inputs.k"}``,
  or ``inputs: !cel "inputs"``, which passes them all — is typed by that invocable's ``inputType`` property
  ``k``. An input that only feeds a computed expression stays text.

The conversions are those of manifest ``variables`` (reference §1): ``integer`` must match ``-?\\d+``,
``boolean`` is ``true`` or ``false``, ``number`` a JSON number, ``object``/``array`` JSON, ``null`` the text
``null``; for a union the non-string members are tried first. Text that fits none is ERR_INPUT_INVALID, a
usage error, before anything runs or is admitted; the whole call is then checked against the ``inputType``
where it is dispatched (telo.runtime.contracts).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from telo.errors import Code, TeloError
from telo.manifest import Cel, Ref
from telo.runtime.contracts import schema_of

if TYPE_CHECKING:
    from telo.runtime.app import Application

# Where an input's type was declared, for the message: ``(resource name, its property schema)``.
Typing = dict[str, tuple[str, Mapping[str, Any]]]

_PASS_THROUGH = re.compile(r"^\s*inputs\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*(['\"])([^'\"]*)\2\s*\])?\s*$")
_INTEGER = re.compile(r"^-?\d+$")


def split_pairs(pairs: Sequence[str], option: str) -> list[tuple[str, str]]:
    """``k=v`` pairs in order; a pair without ``=`` or a key is ERR_INPUT_INVALID naming ``option``."""
    out = []
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise TeloError(Code.INPUT_INVALID, f"{option} {pair!r} is not KEY=VALUE",
                            hint=f"write e.g. {option} id=42")
        out.append((key, raw))
    return out


def command_inputs(texts: Sequence[str], jsons: Sequence[str], typing: Typing) -> dict[str, Any]:
    """The inputs of ``--input`` (typed by ``typing``, else text) and ``--input-json`` (JSON), later ones winning."""
    out: dict[str, Any] = {}
    for key, raw in split_pairs(texts, "--input"):
        declared = typing.get(key)
        out[key] = raw if declared is None else _typed(key, raw, *declared)
    for key, raw in split_pairs(jsons, "--input-json"):
        out[key] = _json(raw, f"--input-json {key}")
    return out


def workflow_typing(app: Application, workflow: str) -> Typing:
    """The input types ``workflow``'s ``inputType`` declares (none: every input is text)."""
    decl = app.manifest.resources.get(workflow)
    return _properties(app, workflow, decl.config.get("inputType")) if decl is not None else {}


def target_typing(app: Application) -> Typing:
    """The input types of inputs the application's targets pass straight to a typed invocable."""
    typing: Typing = {}
    for target in app.manifest.application.targets:
        step = target.step or {}  # (a `!ref` target is run(), without inputs)
        declared = _properties_of(app, step.get("invoke"))
        mapping = step.get("inputs")
        if isinstance(mapping, Cel):
            if _passed(mapping) == "":
                _merge(typing, declared)
        elif isinstance(mapping, Mapping):
            for param, value in mapping.items():
                source = _passed(value) if isinstance(value, Cel) else None
                if source and str(param) in declared:
                    _merge(typing, {source: declared[str(param)]})
    return typing


def _passed(cel: Cel) -> str | None:
    """``"k"`` for ``inputs.k`` / ``inputs["k"]``, ``""`` for ``inputs`` itself, None for anything computed."""
    match = _PASS_THROUGH.match(cel.text)
    if match is None:
        return None
    return match.group(1) or match.group(3) or ""


def _properties_of(app: Application, ref: Any) -> Typing:
    if not isinstance(ref, Ref):
        return {}
    try:
        decl = app.manifest.resolve(ref)
    except KeyError:
        return {}
    return _properties(app, decl.name, decl.config.get("inputType"))


def _properties(app: Application, name: str, node: Any) -> Typing:
    schema = schema_of(app, node)
    props = schema.get("properties") if schema is not None else None
    if not isinstance(props, Mapping):
        return {}
    return {str(k): (name, v) for k, v in props.items() if isinstance(v, Mapping)}


def _merge(into: Typing, more: Typing) -> None:
    for key, declared in more.items():
        into.setdefault(key, declared)  # the first target that types an input decides


def _typed(key: str, raw: str, owner: str, schema: Mapping[str, Any]) -> Any:
    declared = schema.get("type")
    kinds = [declared] if isinstance(declared, str) else [t for t in declared or [] if isinstance(t, str)]
    if not kinds or ("string" in kinds and len(kinds) == 1):
        return raw
    for kind in sorted(kinds, key=lambda k: k == "string"):  # the non-string members first
        value = _as(kind, raw, key)
        if value is not _NO:
            return value
    wanted = " or ".join(kinds)
    raise TeloError(Code.INPUT_INVALID, f"--input {key}={raw!r}: {owner}'s inputType declares {key!r} as {wanted}",
                    hint=f"give {key} as {wanted} (e.g. --input {key}={_EXAMPLES.get(kinds[0], 'x')}), or pass "
                    f"JSON with --input-json {key}=…", data={"input": key, "type": kinds, "resource": owner})


_NO = object()
_EXAMPLES = {"integer": "42", "number": "1.5", "boolean": "true", "object": "'{\"a\": 1}'", "array": "'[1, 2]'",
             "null": "null"}


def _as(kind: str, raw: str, key: str) -> Any:
    if kind == "string":
        return raw
    if kind == "integer":
        return int(raw) if _INTEGER.match(raw) else _NO
    if kind == "boolean":
        return {"true": True, "false": False}.get(raw, _NO)
    if kind == "null":
        return None if raw == "null" else _NO
    try:
        parsed = json.loads(raw)
    except ValueError:
        return _NO
    fits = {"number": (int, float), "object": (dict,), "array": (list,)}.get(kind)
    if fits is None or not isinstance(parsed, fits) or isinstance(parsed, bool):
        return _NO
    return _json(raw, f"--input {key}") if kind in ("object", "array") else parsed


def _json(raw: str, where: str) -> Any:
    """JSON text as a value of the domain; nested past its limit is ERR_TYPED_FRAME_UNENCODABLE, not text."""
    from telo.values import from_plain
    from telo.values.depth import load_json

    try:
        return from_plain(load_json(raw, where), {})
    except ValueError as exc:
        raise TeloError(Code.INPUT_INVALID, f"{where}: not JSON ({exc})",
                        hint="quote the value for your shell, e.g. --input-json items='[1, 2]'") from None
