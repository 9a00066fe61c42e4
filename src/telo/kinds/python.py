"""``Python.Function``: an ordinary Python callable as a step target (issue: built-in kinds).

``function: "package.module:attr"`` names a sync or async callable. It is called with the step's inputs as
one dict, plus a :class:`~telo.runtime.resource.StepContext` (run id, step path, attempt, idempotency key)
when it accepts a second parameter. Sync callables run in a worker thread so a slow effect never blocks the
event loop. A result outside the CEL value domain is refused at once (``ERR_DURABLE_UNJOURNALABLE_VALUE``),
in or out of a durable run, so a function that works undurably cannot break only once journaled.
"""

from __future__ import annotations

import asyncio
import difflib
import importlib
import inspect
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from telo.durable.effects import NOT_FOUND, PARK, REDRIVE, EffectPolicy
from telo.errors import Code, TeloError, TypedFrameUnencodable
from telo.manifest import Diagnostic, Manifest
from telo.runtime.contracts import contract_for
from telo.runtime.resource import Resource, StepContext
from telo.values.fastwrite import check_frame

if TYPE_CHECKING:
    from telo.runtime.resource import Host


def import_callable(spec: str, *, search: Path | None = None, where: str = "") -> Callable[..., Any]:
    """Import ``package.module:attr`` (``attr`` may be dotted); the manifest's directory is importable."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise TeloError(Code.PYTHON_FUNCTION_INVALID, f"{where}: `function` must look like 'package.module:attr', "
                        f"got {spec!r}", hint="e.g. function: shop.payments:charge")
    if search is not None and str(search) not in sys.path:
        sys.path.insert(0, str(search))
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise TeloError(Code.PYTHON_FUNCTION_NOT_FOUND, f"{where}: cannot import module {module_name!r}: {exc}",
                        hint="the module must be importable from the manifest's directory or the environment") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            close = difflib.get_close_matches(part, [n for n in dir(obj) if not n.startswith("_")], n=1)
            raise TeloError(Code.PYTHON_FUNCTION_NOT_FOUND, f"{where}: module {module_name!r} has no {attr!r}",
                            hint=f"did you mean {close[0]!r}?" if close else "check the name the module defines")
        obj = getattr(obj, part)
    if not callable(obj):
        raise TeloError(Code.PYTHON_FUNCTION_INVALID, f"{where}: {spec!r} is not callable")
    return obj  # type: ignore[no-any-return]


def function_checks(manifest: Manifest) -> list[Diagnostic]:
    """``telo check``: a ``function``/``lookup`` of a ``Python.Function`` that does not import, or is not
    callable, is an error at its own position — found before a run starts, not when the application boots
    (which imports them the same way, from the manifest's directory)."""
    found: list[Diagnostic] = []
    search = Path(manifest.source).resolve().parent
    for decl in manifest.resources.values():
        if decl.spec.canonical != PythonFunction.kind:
            continue
        for field in ("function", "lookup"):
            spec = decl.config.get(field)
            if not isinstance(spec, str):
                continue
            try:
                import_callable(spec, search=search, where=f"Python.Function {decl.name!r} `{field}`")
            except TeloError as exc:
                found.append(Diagnostic(exc.code, exc.message, decl.position(f"/{field}"), hint=exc.hint))
            except Exception as exc:
                found.append(Diagnostic(
                    Code.PYTHON_FUNCTION_NOT_FOUND,
                    f"Python.Function {decl.name!r} `{field}`: importing {spec!r} raised {type(exc).__name__}: {exc}",
                    decl.position(f"/{field}"), hint="fix the error the module raises when it is imported"))
    return found


def accepts_context(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


class PythonFunction(Resource):
    kind = "Python.Function"

    def __init__(self, app: Host, name: str, config: Mapping[str, Any], module: str | None) -> None:
        super().__init__(app, name, config, module)
        self.contract = contract_for(app, config)  # inputType / outputType, checked at the dispatch chokepoint
        self.fn: Callable[..., Any] | None = None
        self.idempotent = bool(config.get("idempotent", False))
        self.key_consuming = bool(config.get("keyConsuming", False))
        self.on_unconfirmed = config.get("onUnconfirmed")
        self._lookup: Callable[..., Any] | None = None

    async def init(self) -> None:
        self.fn = import_callable(str(self.config["function"]), search=self.app.base_dir,
                                  where=f"Python.Function {self.name!r}")
        self._with_context = accepts_context(self.fn)
        self._is_async = inspect.iscoroutinefunction(self.fn)
        if self.config.get("lookup"):
            self._lookup = import_callable(str(self.config["lookup"]), search=self.app.base_dir,
                                           where=f"Python.Function {self.name!r} lookup")
        elif callable(getattr(self.fn, "lookup", None)):
            self._lookup = self.fn.lookup  # type: ignore[attr-defined]

    def effect_policy(self) -> EffectPolicy:
        """Event-log §2: what recovery does when this function's effect has an intent and no receipt."""
        return function_effect_policy(self.on_unconfirmed, idempotent=self.idempotent,
                                      key_consuming=self.key_consuming, lookup=self._lookup,
                                      where=f"Python.Function {self.name!r}")

    async def invoke(self, inputs: Any) -> Any:
        if self.fn is None:
            await self.init()
        assert self.fn is not None
        args: tuple[Any, ...] = (inputs, StepContext.current()) if self._with_context else (inputs,)
        if self._is_async:
            result = await self.fn(*args)
        else:
            result = await asyncio.to_thread(self.fn, *args)
            if inspect.isawaitable(result):
                result = await result
        check_domain(result, f"Python.Function {self.name!r}", current_step=True)
        return result


def check_domain(value: Any, where: str, ctx: StepContext | None = None, *, current_step: bool = False) -> None:
    """Refuse a value outside the CEL domain; inside a durable run the error names the run and the step's path
    as the journal's own refusal does (reference §4: data {run, path, valuePath}). ``current_step`` names the
    current step's context, read only when the value is refused (every step's result passes through here)."""
    try:
        check_frame(value)
    except TypedFrameUnencodable as exc:
        if current_step:
            ctx = StepContext.current()
        data: dict[str, Any] = {"valuePath": exc.path}
        if ctx is not None and ctx.run_id:
            data = {"run": ctx.run_id, "path": ctx.step_path, "valuePath": exc.path}
        raise TeloError(
            Code.DURABLE_UNJOURNALABLE_VALUE,
            f"{where} returned a value outside the CEL value domain: {exc.message}",
            hint="return None, bool, int, float, str, bytes, list, dict, or telo.values types; not objects or tuples",
            data=data,
        ) from exc


def function_effect_policy(on_unconfirmed: str | None, *, idempotent: bool, key_consuming: bool,
                           lookup: Callable[..., Any] | None, where: str) -> EffectPolicy:
    """The unconfirmed-effect policy of a Python callable (event-log §2): its own ``onUnconfirmed``, else
    redrive when it is idempotent or consumes the idempotency key, else park; a ``lookup(key)`` hook (sync or
    async, returning a result or ``NOT_FOUND``) asks the outside system first."""
    mode = on_unconfirmed or (REDRIVE if idempotent or key_consuming else PARK)
    if lookup is None:
        return EffectPolicy(mode)

    async def ask(key: str) -> Any:
        result = lookup(key)
        if inspect.isawaitable(result):
            result = await result
        if result is not NOT_FOUND:
            check_domain(result, f"{where} lookup")
        return result

    return EffectPolicy(mode, ask)
