"""``@telo.kind``: a Python function as a manifest kind, used like a built-in one (issue 7).

::

    @telo.kind("Shop.Charge", inputs=ChargeIn, outputs=ChargeOut, key_consuming=True)
    def charge(inputs: ChargeIn, ctx: telo.StepContext) -> ChargeOut: ...

registers the kind ``Shop.Charge`` in the module whose import name and canonical name are both ``Shop``: a
manifest loaded in the same process imports it as ``imports: { Shop: Shop }`` (any alias works) and declares
``kind: Shop.Charge`` resources, or invokes it inline (``invoke: { kind: Shop.Charge }``). The function is
called like a ``Python.Function``'s: with the step's inputs, plus a :class:`~telo.runtime.resource.StepContext`
when it takes a second parameter; sync functions run in a worker thread.

``inputs``/``outputs`` are the kind's call contract, validated at the dispatch chokepoint: a JSON schema
dict, or a type — a ``TypedDict`` or a simple type (``str``, ``int``, ``float``, ``bool``, ``None``,
``list[...]``, ``dict[str, ...]``, ``X | Y``, ``Literal[...]``, ``Any``). Left out, they are taken from the
function's annotations when those are such types (else the kind has no contract on that side).
``idempotent`` / ``key_consuming`` / ``lookup`` / ``on_unconfirmed`` say what recovery may do with a call whose
outcome a crash left unknown, exactly as the same fields of ``Python.Function`` (event-log spec §2).
The decorator returns the function unchanged, so it stays callable (and unit-testable) as before.
"""

from __future__ import annotations

import asyncio
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, is_typeddict

from telo.builder import KIND_ATTRIBUTE
from telo.errors import Code
from telo.runtime.resource import Resource

if TYPE_CHECKING:
    from telo.durable.effects import EffectPolicy
    from telo.runtime.resource import Host
    from telo.specs import KindSpec

F = TypeVar("F", bound=Callable[..., Any])
ATTRIBUTE = KIND_ATTRIBUTE  # where the decorator leaves the KindDef on the function (telo.builder reads it)
_POLICIES = ("redrive", "park", "fail")
_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


@dataclass(frozen=True, slots=True)
class KindDef:
    """What ``@telo.kind`` registered: the kind's canonical name, its function, contract and effect policy."""

    canonical: str
    fn: Callable[..., Any]
    inputs: Mapping[str, Any] | None
    outputs: Mapping[str, Any] | None
    idempotent: bool = False
    key_consuming: bool = False
    lookup: Callable[[str], Any] | None = None
    on_unconfirmed: str | None = None

    @property
    def module(self) -> str:
        return self.canonical.partition(".")[0]

    @property
    def name(self) -> str:
        return self.canonical.partition(".")[2]


_MODULES: dict[str, dict[str, KindDef]] = {}  # module (= kind prefix) -> kind name -> definition


def kind(
    name: str,
    *,
    inputs: Any = None,
    outputs: Any = None,
    idempotent: bool = False,
    key_consuming: bool = False,
    lookup: Callable[[str], Any] | None = None,
    on_unconfirmed: str | None = None,
) -> Callable[[F], F]:
    """Register the decorated function as the kind ``name`` (``Module.Kind``); see the module docstring."""
    import re

    module, _, short = name.partition(".")
    if not re.fullmatch(_NAME, module) or not re.fullmatch(_NAME, short):
        raise ValueError(f"kind name {name!r} must look like Module.Kind (each part a name: {_NAME})")
    if on_unconfirmed is not None and on_unconfirmed not in _POLICIES:
        raise ValueError(f"on_unconfirmed must be one of {', '.join(_POLICIES)}, got {on_unconfirmed!r}")

    def register(fn: F) -> F:
        if not callable(fn):
            raise TypeError(f"@telo.kind({name!r}) decorates a function, got {fn!r}")
        hints = _hints(fn)
        first = _first_parameter(fn)
        definition = KindDef(
            name, fn,
            _contract(inputs, hints.get(first) if first else None, explicit=inputs is not None, side="inputs",
                      kind=name),
            _contract(outputs, hints.get("return"), explicit=outputs is not None, side="outputs", kind=name),
            idempotent, key_consuming, lookup, on_unconfirmed,
        )
        _install(definition)
        setattr(fn, ATTRIBUTE, definition)
        return fn

    return register


def definition_of(obj: Any) -> KindDef | None:
    """The :class:`KindDef` of a decorated function (or a KindDef itself); ``None`` for anything else."""
    if isinstance(obj, KindDef):
        return obj
    found = getattr(obj, ATTRIBUTE, None)
    return found if isinstance(found, KindDef) else None


def _install(definition: KindDef) -> None:
    """Put the kind in the loader's module table and the runtime's controller table."""
    from telo.kinds.controllers import register_controller
    from telo.specs import register_module
    from telo.specs.model import module as module_spec

    kinds = dict(_MODULES.get(definition.module, {}))
    kinds[definition.name] = definition
    register_module(module_spec(definition.module, definition.module, *(_spec(d) for d in kinds.values())))
    _MODULES[definition.module] = kinds
    register_controller(definition.canonical, _controller(definition))


def _spec(definition: KindDef) -> KindSpec:
    from telo.specs import KindSpec

    schema = {
        "type": "object",
        # A resource may still override how recovery treats an unconfirmed call (as on Python.Function).
        "properties": {"onUnconfirmed": {"enum": list(_POLICIES)}},
        "additionalProperties": False,
    }
    return KindSpec(definition.module, definition.name, schema, "invocable", input_schema=definition.inputs,
                    output_schema=definition.outputs)


def _controller(definition: KindDef) -> Callable[[Host, str, Mapping[str, Any], str | None], Any]:
    def create(app: Host, name: str, config: Mapping[str, Any], module: str | None) -> FunctionKind:
        return FunctionKind(app, name, config, module, definition)

    return create


class FunctionKind(Resource):
    """A resource of a ``@telo.kind`` kind: calls the function through the dispatch chokepoint's contract."""

    def __init__(self, app: Host, name: str, config: Mapping[str, Any], module: str | None,
                 definition: KindDef) -> None:
        from telo.engine.dispatch import Contract
        from telo.kinds.python import accepts_context
        from telo.runtime.contracts import SchemaValidator

        super().__init__(app, name, config, module)
        self.kind = definition.canonical
        self.definition = definition
        self.on_unconfirmed = config.get("onUnconfirmed") or definition.on_unconfirmed
        d = definition
        if d.inputs is not None or d.outputs is not None:
            self.contract = Contract(SchemaValidator(d.inputs, Code.INPUT_INVALID) if d.inputs is not None else None,
                                     SchemaValidator(d.outputs, Code.OUTPUT_INVALID) if d.outputs is not None
                                     else None)
        self._with_context = accepts_context(d.fn)
        self._is_async = inspect.iscoroutinefunction(d.fn)

    def effect_policy(self) -> EffectPolicy:
        """Event-log §2, as ``Python.Function``: redrive what is idempotent or key-consuming, else park."""
        from telo.kinds.python import function_effect_policy

        d = self.definition
        return function_effect_policy(self.on_unconfirmed, idempotent=d.idempotent, key_consuming=d.key_consuming,
                                      lookup=d.lookup, where=f"{self.kind} {self.name!r}")

    async def invoke(self, inputs: Any) -> Any:
        from telo.kinds.python import check_domain
        from telo.runtime.resource import StepContext

        fn = self.definition.fn
        args: tuple[Any, ...] = (inputs, StepContext.current()) if self._with_context else (inputs,)
        if self._is_async:
            result = await fn(*args)
        else:
            result = await asyncio.to_thread(fn, *args)
            if inspect.isawaitable(result):
                result = await result
        check_domain(result, f"{self.kind} {self.name!r}")
        return result


# --- type hints -> JSON schema ---------------------------------------------------------------------------


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception:  # unresolvable annotations (a forward reference to a local class): no inference
        return {}


def _first_parameter(fn: Callable[..., Any]) -> str | None:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    return params[0].name if params else None


def _contract(given: Any, hint: Any, *, explicit: bool, side: str, kind: str) -> Mapping[str, Any] | None:
    """The schema for one side of the contract: ``given`` (a schema dict or a type), else the annotation when
    it is a type this module can describe; an explicit type it cannot describe is an error."""
    if isinstance(given, Mapping):
        return dict(given)
    if explicit:
        try:
            return schema_of_type(given)
        except TypeError as exc:
            raise TypeError(f"@telo.kind({kind!r}) {side}: {exc}; pass a JSON schema dict instead") from None
    if hint is None or hint is inspect.Parameter.empty:
        return None
    try:
        schema = schema_of_type(hint)
    except TypeError:
        return None
    return None if schema == {} else schema  # `Any` says nothing: no contract


def schema_of_type(tp: Any) -> dict[str, Any]:
    """A JSON schema (draft 2020-12) for a TypedDict or a simple type; ``TypeError`` for anything else."""
    if tp is Any or tp is object:
        return {}
    if tp is None or tp is type(None):
        return {"type": "null"}
    if tp is bool:  # before int: bool is an int subclass
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    if is_typeddict(tp):
        hints = typing.get_type_hints(tp)
        required_keys = set(getattr(tp, "__required_keys__", ()))
        # Under `from __future__ import annotations` Python 3.11 misses NotRequired[...] in __required_keys__:
        # the markers, read from the resolved annotations, decide.
        for key, hint in typing.get_type_hints(tp, include_extras=True).items():
            marker = typing.get_origin(hint)
            if marker is typing.NotRequired:
                required_keys.discard(key)
            elif marker is typing.Required:
                required_keys.add(key)
        required = sorted(required_keys)
        out: dict[str, Any] = {"type": "object", "properties": {k: schema_of_type(v) for k, v in hints.items()}}
        if required:
            out["required"] = required
        return out
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin is typing.Union or origin is types.UnionType:
        return {"anyOf": [schema_of_type(a) for a in args]}
    if origin is typing.Annotated:
        return schema_of_type(args[0])
    if tp in (list, tuple) or origin in (list, typing.Sequence, _abc("Sequence")):
        return {"type": "array", **({"items": schema_of_type(args[0])} if args else {})}
    if tp is dict or origin in (dict, typing.Mapping, _abc("Mapping")):
        if args and args[0] is not str:
            raise TypeError(f"{tp!r}: mapping keys must be str")
        return {"type": "object", **({"additionalProperties": schema_of_type(args[1])} if args else {})}
    raise TypeError(f"cannot describe {tp!r} as a JSON schema")


def _abc(name: str) -> Any:
    import collections.abc

    return getattr(collections.abc, name)
