"""The evaluation scope: top-level variables converted once, extended step by step (telo-reference §2).

Converting the scope, not evaluating, dominates a step's cost (cel-notes), and a body's ``steps`` map grows
with every step. A :class:`Scope` therefore

* converts each value into the library's form at most once, lazily (a value no expression reads is never
  converted), and keeps the converted form;
* keeps a string-keyed map variable (``steps``, ``inputs``, ``resources``…) as separately converted entries, so
  :meth:`Scope.with_step_result` adds one entry without touching the others, and an expression that only
  selects fields (``steps.charge.result``, ``has(steps.x)``) is handed just those entries — the library then
  converts only what the expression can read (:mod:`telo.cel.analysis` finds the selections);
* is immutable: ``with_*`` return a new scope sharing every converted entry with the old one.

Values must not be mutated once they are in a scope (domain values are treated as immutable; a converted copy
would go stale). A plain ``Mapping`` is accepted wherever a scope is, converted afresh on each evaluation.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from telo.cel.convert import NotCel, is_plain_key, to_lib

__all__ = ["Memo", "Scope", "library_data"]

_UNSET: Final = object()


class _Lazy:
    """One domain value and, once needed, its library form."""

    __slots__ = ("_lib", "value")

    def __init__(self, value: Any) -> None:
        self.value = value
        self._lib: Any = _UNSET

    def lib(self) -> Any:
        if self._lib is _UNSET:
            self._lib = to_lib(self.value)
        return self._lib


class _MapVar:
    """A string-keyed map variable held as separately converted entries."""

    __slots__ = ("_whole", "entries")

    def __init__(self, entries: dict[str, _Lazy]) -> None:
        self.entries = entries
        self._whole: dict[str, Any] | None = None

    def domain(self) -> dict[str, Any]:
        return {k: e.value for k, e in self.entries.items()}

    def whole(self) -> dict[str, Any]:
        if self._whole is None:
            self._whole = {k: _entry_lib(k, e) for k, e in self.entries.items()}
        return self._whole

    def subset(self, keys: frozenset[str]) -> dict[str, Any]:
        entries = self.entries
        return {k: _entry_lib(k, entries[k]) for k in keys if k in entries}


def _entry_lib(key: str, entry: _Lazy) -> Any:
    try:
        return entry.lib()
    except NotCel as e:
        e.path.insert(0, key)
        raise


def _var(value: Any) -> _Lazy | _MapVar:
    # Only keys the library reads as plain str (see telo.cel.convert.to_lib) may be passed as they are.
    if type(value) is dict and all(type(k) is str and is_plain_key(k) for k in value):
        return _MapVar({k: _Lazy(v) for k, v in value.items()})
    return _Lazy(value)


class Scope(Mapping[str, Any]):
    """The top-level variables of one evaluation context (``inputs``, ``steps``, ``item``…), as domain values.

    Reading it as a ``Mapping`` gives the domain values back. Build it once per body and extend it:
    ``scope = scope.with_step_result("charge", result)``; ``scope.with_values(item=x, index=i)``.
    """

    __slots__ = ("_vars",)

    def __init__(self, values: Mapping[str, Any] | None = None, /, **more: Any) -> None:
        self._vars: dict[str, _Lazy | _MapVar] = {}
        for source in (values or {}, more):
            for name, value in source.items():
                self._vars[name] = _var(value)

    @classmethod
    def _of(cls, variables: dict[str, _Lazy | _MapVar]) -> Scope:
        scope = cls.__new__(cls)
        scope._vars = variables
        return scope

    def with_values(self, values: Mapping[str, Any] | None = None, /, **more: Any) -> Scope:
        """A scope with these top-level variables added or replaced (the others shared)."""
        variables = dict(self._vars)
        for source in (values or {}, more):
            for name, value in source.items():
                variables[name] = _var(value)
        return Scope._of(variables)

    def with_entry(self, variable: str, key: str, value: Any) -> Scope:
        """A scope where the map ``variable`` has ``key`` set to ``value`` (created if absent), other entries
        shared with this scope and not converted again."""
        current = self._vars.get(variable)
        if current is None:
            entries: dict[str, _Lazy] = {}
        elif isinstance(current, _MapVar):
            entries = dict(current.entries)
        else:
            raise TypeError(f"the scope variable {variable!r} is not a map with string keys")
        entries[key] = _Lazy(value)
        variables = dict(self._vars)
        variables[variable] = _MapVar(entries)
        return Scope._of(variables)

    def with_step_result(self, name: str, result: Any) -> Scope:
        """A scope where ``steps.<name>.result`` is ``result`` (a later step of one name replaces the earlier
        one: the steps map is flat, telo-reference §2)."""
        return self.with_entry("steps", name, {"result": result})

    # --- Mapping of domain values ------------------------------------------------------------------------------

    def __getitem__(self, name: str) -> Any:
        var = self._vars[name]
        return var.domain() if isinstance(var, _MapVar) else var.value

    def __iter__(self) -> Iterator[str]:
        return iter(self._vars)

    def __len__(self) -> int:
        return len(self._vars)

    def __repr__(self) -> str:
        return f"Scope({sorted(self._vars)!r})"

    # --- the library's form ------------------------------------------------------------------------------------------

    def library_data(self, selects: Mapping[str, frozenset[str] | None]) -> dict[str, Any]:
        """The activation data for an expression reading ``selects`` (see :class:`~telo.cel.analysis.Analysis`).

        Raises :class:`~telo.cel.convert.NotCel` whose ``path`` starts with the variable name.
        """
        data: dict[str, Any] = {}
        for name, fields in selects.items():
            var = self._vars.get(name)
            if var is None:
                continue  # the library reports the unset variable
            try:
                if isinstance(var, _Lazy):
                    data[name] = var.lib()
                elif fields is None:
                    data[name] = var.whole()
                else:
                    data[name] = var.subset(fields)
            except NotCel as e:
                e.path.insert(0, name)
                raise
        return data


#: What the evaluations of several expressions against ONE plain mapping, evaluated back to back while it cannot
#: change (the expression leaves of one template), share of its conversion: keyed by (variable, selected key),
#: or (variable, None) for a variable used whole. Lives no longer than that run of evaluations.
Memo = dict[tuple[str, str | None], Any]


def library_data(scope: Mapping[str, Any], selects: Mapping[str, frozenset[str] | None],
                 memo: Memo | None = None) -> dict[str, Any]:
    """:meth:`Scope.library_data` for any mapping (a plain one is converted afresh, only what is read — once per
    ``memo`` when one is given, see :data:`Memo`)."""
    if isinstance(scope, Scope):
        return scope.library_data(selects)
    data: dict[str, Any] = {}
    for name, fields in selects.items():
        if name not in scope:
            continue
        value = scope[name]
        try:
            if fields is not None and type(value) is dict:
                if memo is None:
                    data[name] = {k: _keyed_lib(k, value[k]) for k in fields if k in value}
                else:
                    data[name] = {k: _memoized(memo, name, k, value[k]) for k in fields if k in value}
            else:
                data[name] = to_lib(value) if memo is None else _memoized(memo, name, None, value)
        except NotCel as e:
            e.path.insert(0, name)
            raise
    return data


def _memoized(memo: Memo, name: str, key: str | None, value: Any) -> Any:
    lib = memo.get((name, key), _UNSET)
    if lib is _UNSET:
        lib = memo[name, key] = to_lib(value) if key is None else _keyed_lib(key, value)
    return lib


def _keyed_lib(key: str, value: Any) -> Any:
    try:
        return to_lib(value)
    except NotCel as e:
        e.path.insert(0, key)
        raise
