"""Resource instances: what a manifest's resources become at run time, and the step context Python
functions receive (reference §1 boot order; §14 dispatch events)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from telo.engine.context import current
from telo.engine.dispatch import Contract, Invocable
from telo.engine.steps import Evaluable
from telo.errors import Code

if TYPE_CHECKING:
    from telo.runtime.app import Application


@dataclass(frozen=True, slots=True)
class StepContext:
    """Handed to a Python function that accepts a second parameter (event-log §2: the idempotency key is
    ``<run>/<path>``, identical on every attempt and after a crash)."""

    run_id: str | None
    step_path: str | None
    attempt: int
    idempotency_key: str | None

    @classmethod
    def current(cls) -> StepContext:
        ctx = current()
        key = f"{ctx.run_id}/{ctx.path}" if ctx.run_id and ctx.path else None
        return cls(ctx.run_id, ctx.path, ctx.attempt, key)


class Resource:
    """A declared resource, created by its kind's controller. Invocable ones define :meth:`invoke`,
    runnable ones :meth:`run`; :meth:`snapshot` is what ``resources.<name>`` shows in CEL."""

    kind: str
    contract: Contract | None = None

    def __init__(self, app: Application, name: str, config: Mapping[str, Any], module: str | None) -> None:
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
        from telo.errors import TeloError

        raise TeloError(Code.RESOURCE_NOT_INVOKABLE, f"{resource.kind} {resource.name!r} cannot be invoked",
                        hint="invoke an invocable kind (a function, a sequence, a workflow …)",
                        data={"resource": resource.name})
    return cast(Invocable, resource)
