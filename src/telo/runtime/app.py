"""An application: a loaded manifest brought to life (reference §1 "Boot order").

Load → static checks (the manifest loader) → create every resource through its kind's controller →
initialise in reference order → run targets sequentially → wait for holds (durable runs, resumers) →
tear down. Every kind instance reaches shared services (events, clock, compiler) through its application, which
it knows only as a :class:`~telo.runtime.resource.Host`. The kinds themselves are not known here: the caller
hands in the controller table (``telo.kinds.controllers.CONTROLLERS``), so the runtime sits below every kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from telo.analysis import cel_checker
from telo.analysis import static_checks as run_static_checks
from telo.clock import SYSTEM_CLOCK, Clock
from telo.engine.context import current
from telo.engine.dispatch import EventBus, dispatch
from telo.engine.interpreter import predicate, run_steps
from telo.engine.services import Services
from telo.engine.steps import compile_steps
from telo.errors import Code, TeloError
from telo.manifest import Cel, LibraryModule, Manifest, ManifestLoadError, Ref, ResourceDecl, Target, load_manifest
from telo.runtime.compiler import Compiler
from telo.runtime.resource import SCOPED_RESOURCES, Controller, Resource, RunOutcome, as_invocable

log = logging.getLogger("telo.runtime")

# The list a `capturing()` block collects holds into: only the capturing task's context sees it.
_CAPTURE: contextvars.ContextVar[list[asyncio.Future[Any]] | None] = contextvars.ContextVar("holds", default=None)


class Application:
    """The one :class:`~telo.runtime.resource.Host`: a manifest's resources, created through ``controllers``.

    ``on_create`` callbacks see each resource as it is created, before any is initialised (the Python API uses
    one to hand every journal resource the store it was given).

    An imported library or application (reference §1, ``!ref Alias.name``) is a module application of its own,
    in ``modules`` by alias: its resources live in its namespace, where its own ``!ref`` names resolve, and its
    module URL stays theirs (a workflow imported by a test manifest keeps the target identity it has when its own
    manifest runs). Modules share the root's clock, events, services, holds and ``on_create`` callbacks; they are
    created and initialised before the root's resources and torn down after them.
    """

    def __init__(self, manifest: Manifest, *, controllers: Mapping[str, Controller], clock: Clock = SYSTEM_CLOCK,
                 services: Services | None = None, root: Application | None = None) -> None:
        self.manifest = manifest
        self._controllers = controllers
        self.root = root or self
        self.on_create: list[Callable[[Resource], None]] = [] if root is None else root.on_create
        self.clock = clock
        self.events: EventBus = EventBus() if root is None else root.events
        self.services = services or Services(events=self.events, clock=clock)
        self.services.events = self.events
        # one module application per imported module, shared by every importer of it (keyed by module URL)
        self._module_apps: dict[str, Application] = {} if root is None else root._module_apps
        self.modules: dict[str, Application] = {}
        self._created = self._initialised = self._closed = False
        self.base_dir = Path(manifest.source).resolve().parent
        self.resources: dict[str, Resource] = {}
        self.decls: dict[str, ResourceDecl] = {}
        self._compiler = Compiler(self)
        self.exit_code = 0
        self.holds: set[asyncio.Future[Any]] = set()
        self.target_results: dict[str, Any] = {}
        self.inputs: dict[str, Any] = {}  # `telo run --input k=v`: the targets' inputs
        # where each durable run this process started or attached to came to rest, in first-seen order
        self.outcomes: dict[str, RunOutcome] = {}

    @classmethod
    def load(cls, source: str | Path, *, controllers: Mapping[str, Controller], text: str | None = None,
             env: Mapping[str, str] | None = None, clock: Clock = SYSTEM_CLOCK,
             static_checks: bool = True) -> Application:
        """Load, then run the same static checks as ``telo check`` (reference §1 boot order): a manifest with
        an error never runs. ``static_checks=False`` skips them, for tests of the runtime guards
        behind them."""
        manifest = load_manifest(source, text=text, env=env, cel_checker=cel_checker)
        if static_checks:
            found = run_static_checks(manifest)
            if any(d.severity == "error" for d in found):
                raise ManifestLoadError(str(source), [*manifest.diagnostics, *found])
        return cls(manifest, controllers=controllers, clock=clock)

    @property
    def compiler(self) -> Compiler:
        return self._compiler

    @property
    def controllers(self) -> Mapping[str, Controller]:
        """The kind table resources are created from (read at each creation: a kind registered later counts)."""
        return self._controllers

    # --- resources ------------------------------------------------------------------------------------

    def create_resources(self) -> None:
        """Create the imported modules' resources (once each), then this manifest's own."""
        if self._created:
            return
        self._created = True
        for alias, imported in self.manifest.application.imports.items():
            if isinstance(imported, LibraryModule) and imported.manifest is not None:
                self.modules[alias] = self._module_app(imported)
        for module in self.modules.values():
            module.create_resources()
        self.create(self.manifest.resources.values())

    def _module_app(self, library: LibraryModule) -> Application:
        found = self._module_apps.get(library.module)
        if found is None:
            assert library.manifest is not None
            found = Application(library.manifest, controllers=self._controllers, clock=self.clock,
                                services=self.services, root=self.root)
            found.inputs = self.root.inputs
            self._module_apps[library.module] = found
        return found

    def every_resource(self) -> list[Resource]:
        """This application's resources, then each imported module's (each module once): what a worker
        continues and what operations look through."""
        seen: dict[int, Resource] = {id(r): r for r in self.resources.values()}
        for module in self._module_apps.values() if self.root is self else ():
            seen.update((id(r), r) for r in module.resources.values())
        return list(seen.values())

    def create(self, decls: Iterable[ResourceDecl]) -> list[Resource]:
        """Create a resource for each declaration through its kind's controller (types and abstract kinds have
        none); ``on_create`` callbacks see each. The caller initialises them."""
        created: list[Resource] = []
        for decl in decls:
            factory = self._controllers.get(decl.kind)
            if factory is None or decl.spec.unimplemented:
                if decl.spec.unimplemented:  # declared so manifests load, refused here too (static checks skipped)
                    raise TeloError(Code.KIND_NOT_IMPLEMENTED, f"{decl.pos}: {decl.alias_kind} {decl.name!r}: "
                                    f"{decl.spec.not_implemented()}", hint=decl.spec.unimplemented_hint or None)
                if decl.spec.capability in ("type", "abstract"):
                    continue
                raise TeloError(Code.KIND_NOT_IMPLEMENTED, f"{decl.pos}: kind {decl.kind} is not implemented by "
                                "telo-python yet", hint="see docs/kinds.md for the kinds telo ships")
            self.decls[decl.name] = decl
            self.resources[decl.name] = resource = factory(self, decl.name, decl.config, decl.module)
            created.append(resource)
        for resource in created:
            for callback in self.on_create:
                callback(resource)
        return created

    async def start(self) -> None:
        self.create_resources()
        await self._init_resources()

    async def _init_resources(self) -> None:
        if self._initialised:
            return
        self._initialised = True
        for module in self.modules.values():
            await module._init_resources()
        for resource in self.resources.values():
            await resource.init()

    def resource_for(self, ref: Any, *, where: str = "") -> Resource:
        if not isinstance(ref, Ref):
            raise TeloError(Code.RESOURCE_NOT_FOUND, f"{where}: expected `!ref <resource>`, got {ref!r}")
        if ref.alias is None:
            scoped = current().extra(SCOPED_RESOURCES)
            if scoped and ref.name in scoped:
                found: Resource = scoped[ref.name]
                return found
        try:
            decl = self.manifest.resolve(ref)
        except KeyError:
            raise TeloError(Code.RESOURCE_NOT_FOUND, f"{where or ref.pos}: no resource {ref.text!r}",
                            hint="declare it, or fix the reference") from None
        module = self if ref.alias is None else self.modules.get(ref.alias)
        resource = None if module is None else module.resources.get(decl.name)
        if resource is None:
            raise TeloError(Code.RESOURCE_NOT_INVOKABLE, f"{where or ref.pos}: {ref.text!r} ({decl.kind}) cannot "
                            "be dispatched", data={"resource": decl.name})
        return resource

    def module_scope(self) -> dict[str, Any]:
        app = self.manifest.application
        return {
            "variables": dict(app.variables),
            "secrets": dict(app.secrets),
            "resources": {n: r.snapshot() for n, r in self.resources.items()},
        }

    # --- targets and holds ----------------------------------------------------------------------------

    def hold(self, awaitable: Awaitable[Any]) -> asyncio.Future[Any]:
        """Keep the process alive until ``awaitable`` settles (a durable run, a resumer)."""
        if self.root is not self:
            return self.root.hold(awaitable)
        fut = asyncio.ensure_future(awaitable)
        self.holds.add(fut)
        fut.add_done_callback(self.holds.discard)
        captured = _CAPTURE.get()
        if captured is not None:
            captured.append(fut)
        return fut

    @contextlib.contextmanager
    def capturing(self) -> Iterator[list[asyncio.Future[Any]]]:
        """Collect the holds made inside this block by this task (and tasks it starts): a caller that started a
        durable run through a dispatch finds the run's body among them."""
        found: list[asyncio.Future[Any]] = []
        token = _CAPTURE.set(found)
        try:
            yield found
        finally:
            _CAPTURE.reset(token)

    async def wait_holds(self) -> None:
        while self.holds:
            await asyncio.gather(*list(self.holds), return_exceptions=True)

    def request_exit(self, code: int) -> None:
        if self.root is not self:
            self.root.request_exit(code)
        self.exit_code = max(self.exit_code, code)

    def run_rested(self, outcome: RunOutcome) -> None:
        """A durable run this process started or attached to came to rest (for now: a run waiting for time
        continues here, and reports again): ``telo run`` reports the last of each run — settled ``failed``, or
        left ``running`` by an execution that stopped (its claim went to another, a journal write failed)
        included."""
        if self.root is not self:
            self.root.run_rested(outcome)
        self.outcomes[outcome.run] = outcome

    async def run_targets(self) -> None:
        scope: dict[str, Any] = {**self.module_scope(), "inputs": self.inputs, "steps": {}}
        for target in self.manifest.application.targets:
            await self._run_target(target, scope)

    async def _run_target(self, target: Target, scope: dict[str, Any]) -> None:
        if target.form == "ref":
            assert target.ref is not None
            if target.when is not None and not self._when(target.when, scope, target):
                return
            resource = self.resource_for(target.ref)
            run = getattr(resource, "run", None)
            if run is not None:
                await run()
            else:
                try:
                    self.target_results[target.name] = await dispatch(as_invocable(resource), self.inputs,
                                                                      events=self.events)
                except TeloError as exc:
                    self._attached_to_failed(target.name, exc)
                    raise
            return
        assert target.step is not None
        steps = compile_steps([dict(target.step, name=target.name)], self.compiler, where=str(target.pos),
                              field_name="targets")
        try:
            await run_steps(steps, scope, self.services, "targets")
        except TeloError as exc:
            self._attached_to_failed(target.name, exc)
            raise
        self.target_results[target.name] = scope["steps"].get(target.name, {}).get("result")

    def failed_attach(self, exc: TeloError) -> str | None:
        """The run a start attached to that had failed, when ``exc`` is that run's own error re-raised
        (Workflow.invoke raises it, reference §Local.Workflow); None for any other error."""
        run = exc.data.get("run") if isinstance(exc.data, Mapping) else None
        outcome = self.outcomes.get(run) if isinstance(run, str) else None
        if outcome is None or outcome.status != "failed" or \
                exc.code != ((outcome.error or {}).get("code") or Code.DURABLE_RUN_FAILED):
            return None
        return run

    def _attached_to_failed(self, target: str, exc: TeloError) -> None:
        """The target's answer to a start that attached to a run which had failed is still the run's, for
        ``telo run --json`` to print with the run's outcome."""
        run = self.failed_attach(exc)
        if run is not None:
            self.target_results[target] = {"runId": run, "attached": True, "status": "failed"}

    def _when(self, when: bool | Cel, scope: Mapping[str, Any], target: Target) -> bool:
        if isinstance(when, bool):
            return when
        return predicate(self.compiler.value(when, where=str(target.pos)), scope, "when")

    async def close(self) -> None:
        """Tear down this manifest's resources (last created first), then the imported modules' (once each)."""
        if self._closed:
            return
        self._closed = True
        for resource in reversed(list(self.resources.values())):
            try:
                await resource.teardown()
            except Exception:
                log.warning("teardown failed", extra={"resource": resource.name}, exc_info=True)
        for module in reversed(list(self.modules.values())):
            await module.close()

    async def main(self) -> int:
        """Boot, run the targets, wait for holds, tear down: what ``telo run`` does."""
        try:
            await self.start()
            await self.run_targets()
            await self.wait_holds()
        finally:
            await self.close()
        return self.exit_code
