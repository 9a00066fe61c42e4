"""JSON Schema validators that never fetch anything (issue 19).

``jsonschema``'s default registry retrieves whatever a ``$ref`` names that the schema does not hold itself —
it opened ``telo://manifest#/$defs/Step`` (a fragment of upstream's manifest grammar, named by the Node
libraries upstream ships) with ``urllib``, and would open any ``http(s)://`` or ``file:`` URL a manifest's
``inputType`` names, at load and at every dispatch. Here a reference reaches only the schema it is written in;
anything else is :class:`Unresolvable`, which callers turn into a diagnostic or an error that names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable

__all__ = ["OFFLINE", "Unresolvable", "offline_validator", "unresolved_ref"]


def _never_fetch(uri: str) -> NoReturn:
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # an attrs class: mypy sees no __init__ fields


OFFLINE: Registry[Any] = Registry(retrieve=_never_fetch)  # type: ignore[call-arg]


def offline_validator(schema: Mapping[str, Any], cls: type[Validator] = Draft202012Validator) -> Validator:
    """A ``cls`` validator for ``schema`` whose references resolve inside ``schema`` only."""
    return cls(schema, registry=OFFLINE)


def unresolved_ref(exc: Unresolvable) -> str:
    """The reference an :class:`Unresolvable` names."""
    return str(getattr(exc, "ref", exc))
