"""The ONE import of the CEL library (``cel-expr-python``, Google's cel-cpp) and of protobuf (ARCHITECTURE §2-3).

Everything else in :mod:`telo.cel` talks to the library through the typed names here, so a fallback library
would replace this module and :mod:`telo.cel.convert` only.

Typing: the library ships ``.pyi`` stubs but no ``py.typed`` marker, so mypy does not read them, and protobuf
ships no stubs at all (``types-protobuf`` is not a dependency). The Protocols below restate the subset of the
library's stubs telo uses; the untyped modules are imported once, here, with a narrow ignore.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol, cast

from cel_expr_python import cel as _cel  # type: ignore[import-untyped]  # stubs without a py.typed marker
from cel_expr_python.ext import (  # type: ignore[import-untyped]  # same package
    ext_bindings,
    ext_encoders,
    ext_math,
    ext_optional,
    ext_strings,
)
from google.protobuf import (  # type: ignore[import-untyped]  # protobuf ships no stubs
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    message_factory,
    timestamp_pb2,
    wrappers_pb2,
)

__all__ = [
    "CelEnv",
    "CelExpression",
    "CelType",
    "CelValue",
    "Duration",
    "Timestamp",
    "UInt64Value",
    "descriptor_pb2",
    "function_decl",
    "message_class",
    "new_descriptor_pool",
    "new_env",
    "standard_extensions",
    "telo_extension",
]


class CelType(Protocol):
    """``cel.Type``: compared with ``==``; ``name()`` is ``INT``, ``LIST<DYN>``, ``Telo.Url``…"""

    def name(self) -> str: ...


class CelValue(Protocol):
    """``cel.Value`` (and the item accessors of its lists and maps)."""

    def type(self) -> CelType: ...

    def value(self) -> Any: ...

    def plain_value(self) -> Any: ...


class CelExpression(Protocol):
    """``cel.Expression``: a parsed and type-checked program."""

    def eval(self, activation: Any = ..., data: Mapping[str, Any] | None = ...) -> CelValue: ...

    def return_type(self) -> CelType: ...

    def serialize(self) -> bytes: ...


class CelEnv(Protocol):
    """``cel.Env``: declarations plus the compiler."""

    def compile(self, expression: str) -> CelExpression: ...


DYN: Final = cast(CelType, _cel.Type.DYN)
BOOL: Final = cast(CelType, _cel.Type.BOOL)
INT: Final = cast(CelType, _cel.Type.INT)
UINT: Final = cast(CelType, _cel.Type.UINT)
DOUBLE: Final = cast(CelType, _cel.Type.DOUBLE)
STRING: Final = cast(CelType, _cel.Type.STRING)
BYTES: Final = cast(CelType, _cel.Type.BYTES)
NULL: Final = cast(CelType, _cel.Type.NULL)
TIMESTAMP: Final = cast(CelType, _cel.Type.TIMESTAMP)
DURATION: Final = cast(CelType, _cel.Type.DURATION)
ERROR: Final = cast(CelType, _cel.Type.ERROR)
#: ``map(string, dyn)`` built with the factory: the string form ``cel.Type('map(string, dyn)')`` silently makes
#: an opaque type that no select (``m.a``) type-checks against (cel-notes: the opaque-map trap).
MAP_STRING_DYN: Final = cast(CelType, _cel.Type.Map(_cel.Type.STRING, _cel.Type.DYN))
LIST_DYN: Final = cast(CelType, _cel.Type.List(_cel.Type.DYN))

#: The class of the type values a ``type(x)`` expression produces (not part of the value domain).
TYPE_CLASS: Final[type] = _cel.Type

Timestamp: Final[Callable[..., Any]] = timestamp_pb2.Timestamp
Duration: Final[Callable[..., Any]] = duration_pb2.Duration
UInt64Value: Final[Callable[..., Any]] = wrappers_pb2.UInt64Value
Int64Value: Final[Callable[..., Any]] = wrappers_pb2.Int64Value
BoolValue: Final[Callable[..., Any]] = wrappers_pb2.BoolValue
StringValue: Final[Callable[..., Any]] = wrappers_pb2.StringValue
STRING_DESCRIPTOR: Final[Any] = wrappers_pb2.StringValue.DESCRIPTOR
UINT64_DESCRIPTOR: Final[Any] = wrappers_pb2.UInt64Value.DESCRIPTOR
BOOL_DESCRIPTOR: Final[Any] = wrappers_pb2.BoolValue.DESCRIPTOR


def message_type(full_name: str) -> CelType:
    """The CEL type of a message declared in the environment's descriptor pool (``Telo.Url``)."""
    return cast(CelType, _cel.Type(full_name))


def new_descriptor_pool() -> Any:
    return descriptor_pool.DescriptorPool()


def message_class(descriptor: Any) -> Callable[..., Any]:
    return cast(Callable[..., Any], message_factory.GetMessageClass(descriptor))


def function_decl(name: str, overloads: Sequence[tuple[str, CelType, Sequence[CelType], Callable[..., Any]]]) -> Any:
    """A ``cel.FunctionDecl`` of ``(overload id, result type, parameter types, impl)`` overloads."""
    return _cel.FunctionDecl(
        name,
        [_cel.Overload(oid, result, list(params), impl=impl) for oid, result, params, impl in overloads],
    )


def telo_extension(decls: Sequence[Any]) -> Any:
    """Our functions as a ``cel.CelExtension``.

    Trap (cel-notes): a function with ``dyn`` parameters only dispatches at run time when it is declared
    through ``cel.CelExtension``; declared through ``NewEnv(functions=…)`` or a late-bound ``cel.Function`` it
    type-checks but never matches.
    """
    return _cel.CelExtension("telo", list(decls))


def standard_extensions() -> list[Any]:
    """The CEL extensions the library offers: strings, math, optional, encoders, bindings (cel.bind)."""
    return [
        ext_strings.ExtStrings(),
        ext_math.ExtMath(),
        ext_optional.ExtOptional(),
        ext_encoders.ExtEncoders(),
        ext_bindings.ExtBindings(),
    ]


def new_env(variables: Mapping[str, CelType], extensions: Sequence[Any], pool: Any) -> CelEnv:
    return cast(CelEnv, _cel.NewEnv(descriptor_pool=pool, variables=dict(variables), extensions=list(extensions)))
