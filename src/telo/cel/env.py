"""Environments and programs: compile (parse + type-check) at load time, evaluate at run time (telo-reference §2).

* A :class:`CelEnvironment` declares the top-level variables. The library environment behind it — the heavy
  part, ~50 ms for the first one with extensions — is built once per distinct declaration set and shared; the
  extensions are built once per process.
* :meth:`CelEnvironment.compile` parses AND type-checks, so ``1 + 'a'`` or ``url.nosuch`` fail at load with
  :class:`~telo.cel.errors.CelCompileError` at the manifest position. Compiled programs are cached per
  (environment, text); the :class:`Program` handed out carries its own source position.
* :meth:`Program.evaluate` returns a domain value or raises :class:`~telo.cel.errors.CelEvalError`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from telo.cel import _lib
from telo.cel.analysis import Analysis, analyse
from telo.cel.catalog import CLOCK, FUNCTIONS, extension
from telo.cel.convert import (
    EvalFailed,
    KeyCollision,
    NotCel,
    Unrepresentable,
    from_result,
    from_value_rereading,
    pairs_expression,
)
from telo.cel.errors import CelEvalError, SourcePos, compile_error, eval_error
from telo.cel.rewrite import exact_text
from telo.cel.scope import Memo, library_data
from telo.cel.urltype import POOL, URL_CEL_TYPE, URL_TYPE_NAME
from telo.clock import SYSTEM_CLOCK, Clock
from telo.errors import Code

__all__ = ["STANDARD_VARIABLES", "TYPE_NAMES", "CelEnvironment", "Program"]

#: The engine's scope names (telo-reference §2) and their declared types; every environment declares them.
#: Maps keyed by names (steps, resources, …) are ``map(string, dyn)``, so misuse such as ``steps + 1`` fails at
#: load time. ``inputs`` is ``dyn``: call inputs are any CEL map (``{1: 'a'}`` from YAML, a key with a NUL), and
#: the library refuses a non-string top-level key — or the stand-in a NUL key needs — in a declared string map.
STANDARD_VARIABLES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "inputs": "dyn",
        "steps": "map",
        "variables": "map",
        "secrets": "map",
        "resources": "map",
        "module": "map",
        "ports": "map",
        "error": "dyn",  # null in `finally:` after success
        "item": "dyn",
        "index": "dyn",
        "items": "dyn",
        "iteration": "dyn",
        "previous": "dyn",
        "batch": "map",  # Durable.Consume: {index, items, from, to}
    }
)

#: Type names a variable may be declared with. ``map`` is ``map(string, dyn)`` built with the type factory:
#: the library's string form of it would make an opaque type (trap; see :mod:`telo.cel._lib`).
TYPE_NAMES: Final[Mapping[str, _lib.CelType]] = MappingProxyType(
    {
        "dyn": _lib.DYN,
        "map": _lib.MAP_STRING_DYN,
        "list": _lib.LIST_DYN,
        "bool": _lib.BOOL,
        "int": _lib.INT,
        "uint": _lib.UINT,
        "double": _lib.DOUBLE,
        "string": _lib.STRING,
        "bytes": _lib.BYTES,
        "timestamp": _lib.TIMESTAMP,
        "duration": _lib.DURATION,
        URL_TYPE_NAME: URL_CEL_TYPE,
    }
)

_CACHE_LIMIT: Final = 4096  # compiled texts kept per environment (manifests have far fewer)

_NON_DETERMINISTIC: Final = frozenset(name for name, info in FUNCTIONS.items() if not info.deterministic)


@dataclass(frozen=True, slots=True)
class _Compiled:
    expression: _lib.CelExpression  # what runs: the text itself, or its exact rewrite (telo.cel.rewrite)
    eval_text: str
    analysis: Analysis
    deterministic: bool
    result_type: str


class _Core:
    """One library environment (per declaration set) and its compile cache."""

    def __init__(self, declarations: Mapping[str, str]) -> None:
        self.names = frozenset(declarations)
        self.env = _lib.new_env({n: TYPE_NAMES[t] for n, t in declarations.items()}, _extensions(), POOL)
        self.cache: dict[str, _Compiled | str] = {}  # text -> compiled, or the library's error text
        self.derived: dict[str, _lib.CelExpression] = {}
        self._lock = threading.Lock()  # guards eviction (iterating a dict another thread changes would fail)

    def compiled(self, text: str) -> _Compiled | str:
        hit = self.cache.get(text)
        if hit is not None:
            return hit
        result: _Compiled | str
        try:
            expression = self.env.compile(text)
        except RuntimeError as e:
            result = str(e)
        else:
            analysis = analyse(expression.serialize(), self.names)
            eval_text = exact_text(text, analysis.calls, self.env.compile)
            if eval_text != text:
                expression = self.env.compile(eval_text)
            result = _Compiled(
                expression,
                eval_text,
                analysis,
                not (analysis.calls & _NON_DETERMINISTIC),
                expression.return_type().name(),
            )
        with self._lock:
            if len(self.cache) >= _CACHE_LIMIT:
                del self.cache[next(iter(self.cache))]  # oldest first
            self.cache[text] = result
        return result

    def derived_expression(self, text: str) -> _lib.CelExpression:
        """A derived program (never shown to authors: it compiles, or telo has a bug)."""
        expression = self.derived.get(text)
        if expression is None:
            expression = self.env.compile(text)
            with self._lock:
                if len(self.derived) >= _CACHE_LIMIT:
                    del self.derived[next(iter(self.derived))]
                self.derived[text] = expression
        return expression


_EXTENSIONS: list[Any] = []
_CORES: dict[tuple[tuple[str, str], ...], _Core] = {}


def _extensions() -> list[Any]:
    if not _EXTENSIONS:
        _EXTENSIONS.extend([*_lib.standard_extensions(), extension()])
    return _EXTENSIONS


class CelEnvironment:
    """Declares the top-level variables expressions may read: :data:`STANDARD_VARIABLES` plus ``variables``
    (name → a :data:`TYPE_NAMES` key, usually ``"dyn"``; e.g. the binding names of ``Run.Value``/``Run.Choice``).

    Cheap after the first: environments with the same declarations share one library environment and one
    compile cache.
    """

    __slots__ = ("_core", "_declarations")

    def __init__(self, variables: Mapping[str, str] | None = None) -> None:
        declarations = dict(STANDARD_VARIABLES)
        for name, type_name in (variables or {}).items():
            if not name.isidentifier():
                raise ValueError(f"a CEL variable name must be an identifier, not {name!r}")
            if type_name not in TYPE_NAMES:
                raise ValueError(f"unknown CEL type {type_name!r} for {name!r} (one of {', '.join(TYPE_NAMES)})")
            declarations[name] = type_name
        key = tuple(sorted(declarations.items()))
        core = _CORES.get(key)
        if core is None:
            core = _CORES[key] = _Core(declarations)
        self._core = core
        self._declarations: Mapping[str, str] = MappingProxyType(declarations)

    @property
    def variables(self) -> Mapping[str, str]:
        """Every declared name and its type name."""
        return self._declarations

    def compile(
        self, text: str, *, source: str | None = None, line: int | None = None, column: int | None = None
    ) -> Program:
        """Parse and type-check ``text``; ``source``/``line``/``column`` (1-based) say where its first character
        sits in the manifest, so errors point there. Raises :class:`~telo.cel.errors.CelCompileError`."""
        pos = SourcePos(source, line, column)
        compiled = self._core.compiled(text)
        if isinstance(compiled, str):
            raise compile_error(compiled, text, pos)
        return Program(self._core, compiled, text, pos)


class Program:
    """A compiled expression; immutable and safe to share. See :meth:`evaluate`."""

    __slots__ = ("_compiled", "_core", "source_pos", "text")

    def __init__(self, core: _Core, compiled: _Compiled, text: str, pos: SourcePos) -> None:
        self._core = core
        self._compiled = compiled
        self.text = text
        self.source_pos = pos

    def __repr__(self) -> str:
        return f"Program({self.text!r}, {self.source_pos.describe()})"

    @property
    def calls(self) -> frozenset[str]:
        """The names of the functions the expression calls, found in its checked AST (operators and
        macros such as ``has``/``all``/``map`` are not calls; ``math.greatest`` is a macro too)."""
        return self._compiled.analysis.calls

    @property
    def deterministic(self) -> bool:
        """False when it calls a catalog function flagged non-deterministic (``nowMillis()``, ``uuidv4()``…)."""
        return self._compiled.deterministic

    @property
    def result_type(self) -> str:
        """The checked result type as the library names it: ``BOOL``, ``STRING``, ``DYN``, ``LIST<INT>``…"""
        return self._compiled.result_type

    @property
    def variables(self) -> Mapping[str, frozenset[str] | None]:
        """The top-level variables it reads, each with the fields it selects (``None``: used whole)."""
        return MappingProxyType(self._compiled.analysis.selects)

    def evaluate(self, scope: Mapping[str, Any], *, clock: Clock = SYSTEM_CLOCK, memo: Memo | None = None) -> Any:
        """Evaluate against ``scope`` (a :class:`~telo.cel.scope.Scope`, or any mapping of domain values) and
        return the domain value. Time functions read ``clock``; ``memo`` shares the conversion of a plain
        mapping with other evaluations against it (see :data:`~telo.cel.scope.Memo`).

        Raises :class:`~telo.cel.errors.CelEvalError`: ``ERR_CEL_NO_SUCH_KEY`` (missing map key or field),
        ``ERR_CEL_OVERFLOW`` (int/uint/timestamp arithmetic out of range), ``ERR_CEL_EVAL`` otherwise — also when
        the scope holds a value outside the CEL domain or the result has no domain value (an optional, a type).
        """
        compiled = self._compiled
        try:
            data = library_data(scope, compiled.analysis.selects, memo)
        except NotCel as e:
            raise self._error(f"the scope value {e.where()} is {e.message}") from None
        token = None if compiled.deterministic else CLOCK.set(clock)
        try:
            result = compiled.expression.eval(data=data)
            return from_result(result)
        except EvalFailed as e:
            raise eval_error(str(e.args[0]), self.text, self.source_pos) from None
        except KeyCollision as e:
            if not compiled.deterministic:  # re-reading evaluates again: a second nowMillis() would differ
                raise self._error(f"the result is {e}; not re-read, as the expression is not deterministic") from None
            return self._reread(result, data)
        except Unrepresentable as e:
            raise self._error(f"the result is {e}") from None
        except RuntimeError as e:  # the library raises (rather than returns) for a few failures
            raise eval_error(str(e), self.text, self.source_pos) from None
        except RecursionError:
            raise self._error("the value is nested too deeply") from None
        finally:
            if token is not None:
                CLOCK.reset(token)

    def _reread(self, result: _lib.CelValue, data: dict[str, Any]) -> Any:
        text = self._compiled.eval_text
        core = self._core

        def reread(path: str) -> _lib.CelValue:
            return core.derived_expression(pairs_expression(text, path)).eval(data=data)

        try:
            return from_value_rereading(result, reread)
        except Unrepresentable as e:
            raise self._error(f"the result is {e}") from None

    def _error(self, reason: str) -> CelEvalError:
        return eval_error(reason, self.text, self.source_pos, code=Code.CEL_EVAL)

