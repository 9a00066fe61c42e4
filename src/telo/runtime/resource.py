"""Resource instances: what a manifest's resources become at run time, the :class:`Host` they live in, and the
step context Python functions receive (reference §1 boot order; §14 dispatch events).

:class:`Host` is everything a kind may ask of the application that created it — the manifest, shared services
(events, clock, the compiler), other resources, holds and the process's exit code. The runtime's
:class:`~telo.runtime.app.Application` is the one implementation; kinds name the protocol, never the class, so
they depend only on this module.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from telo.clock import Clock
from telo.engine.context import current
from telo.engine.dispatch import Contract, EventBus, Invocable
from telo.engine.interpreter import Services
from telo.engine.steps import Evaluable, StepCompiler
from telo.errors import Code, TeloError
from telo.manifest import Manifest, ResourceDecl

# InvokeContext extra: the `with:`-scoped resources in reach (name -> instance), resolved before module-level ones.
SCOPED_RESOURCES = "with.resources"


class ValueCompiler(StepCompiler, Protocol):
    """The compiler as kinds use it: step bodies (:class:`StepCompiler`) plus what a node's expressions read,
    and values whose expressions see extra names (a projection's ``item``)."""

    def value(self, node: Any, *, where: str, names: Iterable[str] = ()) -> Evaluable: ...

    def reads(self, node: Any, names: Iterable[str]) -> frozenset[str]: ...


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """Where a durable run this process started (or attached to) came to rest, for ``telo run`` to report.

    ``status``: ``completed`` | ``failed`` | ``cancelled`` | ``parked`` | ``running`` (this process stopped
    executing it: it continues wherever it is executed next) | ``elsewhere`` (another process executes it:
    ``holder`` names that process) | ``skipped`` (a live run of its queue's singleton key, issue 16: the start
    admitted nothing). ``result`` is set for ``completed``, ``error`` for ``failed`` and
    ``running``, ``parked`` (:meth:`telo.journal.Parked.to_json`) for ``parked``."""

    run: str
    status: str
    result: Any = None
    has_result: bool = False
    error: Mapping[str, Any] | None = None
    parked: Mapping[str, Any] | None = None
    holder: str | None = None


class Host(Protocol):
    """What a resource may use of the application it lives in (reference §1 boot order)."""

    manifest: Manifest
    clock: Clock
    events: EventBus
    services: Services
    base_dir: Path
    inputs: dict[str, Any]  # `telo run --input k=v`: the targets' inputs
    decls: dict[str, ResourceDecl]
    resources: dict[str, Resource]

    @property
    def compiler(self) -> ValueCompiler: ...

    @property
    def controllers(self) -> Mapping[str, Controller]: ...

    def resource_for(self, ref: Any, *, where: str = "") -> Resource: ...

    def module_scope(self) -> dict[str, Any]: ...

    def hold(self, awaitable: Awaitable[Any]) -> asyncio.Future[Any]: ...

    def request_exit(self, code: int) -> None: ...

    def run_rested(self, outcome: RunOutcome) -> None: ...


@dataclass(frozen=True, slots=True)
class StepContext:
    """Handed to a Python function that accepts a second parameter (event-log §2: the idempotency key is
    ``<run>/<path>``, identical on every attempt and after a crash; in a fork made with ``--keep-keys`` the run
    is the one it was forked from, :mod:`telo.journal.lineage`)."""

    run_id: str | None
    step_path: str | None
    attempt: int
    idempotency_key: str | None

    @classmethod
    def current(cls) -> StepContext:
        ctx = current()
        key = None
        if ctx.run_id and ctx.path:
            key = f"{ctx.handle.key_run if ctx.handle is not None else ctx.run_id}/{ctx.path}"
        return cls(ctx.run_id, ctx.path, ctx.attempt, key)


class Resource:
    """A declared resource, created by its kind's controller. Invocable ones define :meth:`invoke`,
    runnable ones :meth:`run`; :meth:`snapshot` is what ``resources.<name>`` shows in CEL."""

    kind: str
    contract: Contract | None = None

    def __init__(self, app: Host, name: str, config: Mapping[str, Any], module: str | None) -> None:
        self.app = app
        self.name = name
        self.config = config
        self.module = module

    async def init(self) -> None:
        """Called once every resource exists, in reference order."""

    async def teardown(self) -> None:
        """Called when the application stops."""

    def snapshot(self) -> Any:
        return {}

    def field(self, key: str) -> Evaluable | None:
        """A configuration field compiled for evaluation, or None when absent (named in error messages)."""
        node = self.config.get(key)
        return None if node is None else self.app.compiler.value(node, where=f"{self.kind} {self.name!r}.{key}")

    def call_scope(self, inputs: Any) -> dict[str, Any]:
        """What a ``runtime`` field sees (reference §1 ``x-telo-eval``): the module scope plus the call's inputs."""
        return {**self.app.module_scope(), "inputs": inputs if inputs is not None else {}}

    @property
    def invocable(self) -> bool:
        return callable(getattr(self, "invoke", None))

    @property
    def runnable(self) -> bool:
        return callable(getattr(self, "run", None))

    def __repr__(self) -> str:
        return f"<{self.kind} {self.name!r}>"


def as_invocable(resource: Resource) -> Invocable:
    """The resource as a dispatch target; a non-invocable one is refused by name."""
    if not resource.invocable:
        raise TeloError(Code.RESOURCE_NOT_INVOKABLE, f"{resource.kind} {resource.name!r} cannot be invoked",
                        hint="invoke an invocable kind (a function, a sequence, a workflow …)",
                        data={"resource": resource.name})
    return cast(Invocable, resource)


# How a kind's class is called to create a resource: ``(host, name, config, module)``.
Controller = Callable[[Host, str, Mapping[str, Any], str | None], Resource]
