"""Static checks over a manifest: what ``telo check`` reports (reference §12).

The manifest loader validates structure; this module adds, at each finding's own ``file:line:col``:

* the CEL adapter's compile and type errors (:func:`cel_checker`, also run by every load);
* the zone checks, found by one containment walk from every body slot that provides zone attributes
  (``x-telo-provides-zone``: a workflow's ``replayed``, ``Durable.Idempotent``'s ``idempotent``,
  ``Sql.Transaction``'s ``atomic`` + ``noSuspend``):

  - ``DURABLE_NONDETERMINISM`` (error) — a CEL expression inside an ``idempotent`` region calls a catalog
    function flagged non-deterministic. Found in the compiled expression's calls (:attr:`telo.cel.Program.
    calls`), never by text. A collapsed region records nothing (spec §8.1), so a value drawn in it differs
    on every re-run; a merely ``replayed`` region journals it, and is not checked;
  - ``DURABLE_DETACH_FORBIDDEN`` (error) — a detached slot (``x-telo-use: detached``, ``Run.Detach``) inside
    a ``replayed`` region (spec §7.6);
  - ``ZONE_ATTRIBUTE_VIOLATED`` (error) — a resource declaring ``x-telo-violates-zone: {A: …}`` (``Durable.
    Sleep``/``Await`` violate ``noSuspend``) reached inside a region providing ``A``; and a step inside a
    ``noSuspend`` region whose retry policy's last backoff parks (≥ 30 s, spec §7.9).

**What a region contains.** Its body's steps (every branch), and — transitively, with cycle protection —
the resources those steps ``invoke``, their other runtime fields and their own bodies (a nested region adds
its attributes). The walk stops where a body runs outside the enclosing zones: at a kind extending
``Durable.Run`` (a nested run's body starts outside every zone, spec §7.3; its call-time fields such as
``runId`` are still inside) and at a detached target. Compile-time fields are evaluated once at load, never
in a region. Kinds that require the ``replayed`` zone (``Durable.Value``, ``Sleep``, ``Await``) record their
own evaluations through the run handle even inside a collapsed region (spec §8.1 "a direct decide"), so
their expressions are the cure, not the finding.

Findings are reported for the entry's own module: a cause inside an imported library is reported at the
last place in the entry that reaches it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from telo.cel import FUNCTIONS, CelCompileError, CelEnvironment
from telo.errors import Code
from telo.manifest import (
    Cel,
    CelScope,
    Diagnostic,
    Manifest,
    ManifestLoadError,
    Pos,
    Ref,
    ResourceDecl,
    Template,
    load_manifest,
)
from telo.manifest.diagnostics import Severity, sort_key
from telo.manifest.unimplemented import unimplemented_kinds
from telo.specs import conforms
from telo.specs.durations import duration_ms
from telo.specs.steps import branch_bodies
from telo.step_refs import step_reference_checks
from telo.transaction_checks import transaction_requirement_checks

DURABLE_NONDETERMINISM = "DURABLE_NONDETERMINISM"
DURABLE_DETACH_FORBIDDEN = "DURABLE_DETACH_FORBIDDEN"
ZONE_ATTRIBUTE_VIOLATED = "ZONE_ATTRIBUTE_VIOLATED"

REPLAYED, IDEMPOTENT, NO_SUSPEND = "replayed", "idempotent", "noSuspend"
DURABLE_RUN = "Durable.Run"
SUSPENDING_BACKOFF_MS = 30_000  # a retry backoff this long parks the run (reference §3 "Suspending retry")
_RETRY_DEFAULTS = {"attempts": 0, "initialDelay": 250.0, "factor": 2.0, "maxDelay": 32_000.0}


@cache
def _environment(names: tuple[str, ...]) -> CelEnvironment:
    from telo.cel import STANDARD_VARIABLES

    extra = {n: "dyn" for n in names if n not in STANDARD_VARIABLES}
    return CelEnvironment(extra or None)


def cel_checker(cel: Cel, scope: CelScope) -> Diagnostic | None:
    """Compile one expression for the scope it runs in; a failure becomes a diagnostic at its position."""
    start = cel.locate(1, 1)  # the expression's first character (cel.pos is its `!cel` tag)
    try:
        _environment(tuple(sorted(scope.names))).compile(cel.text, source=start.file, line=start.line,
                                                          column=start.column)
    except CelCompileError as exc:
        at = None
        errors = exc.data.get("errors") or []
        if errors and isinstance(errors[0], dict) and errors[0].get("at"):
            line, column = errors[0]["at"]
            at = cel.locate(int(line), int(column))
        return Diagnostic(exc.code, exc.message, at or cel.pos, "error", exc.hint)
    return None


def check(manifest: str | Path, *, env: Mapping[str, str] | None = None,
          extra: Callable[[Manifest], list[Diagnostic]] | None = None) -> list[Diagnostic]:
    """Every diagnostic of a manifest, sorted by position (errors and warnings).

    The zone checks run only on a manifest that loads: on a broken one their walk would chase references
    the loader already reported as wrong. ``extra`` adds checks of the layers above this one over the loaded
    manifest (``telo check`` passes the kinds' own: whether a ``Python.Function`` imports).
    """
    try:
        loaded = load_manifest(manifest, env=env, cel_checker=cel_checker)
    except ManifestLoadError as exc:
        return exc.diagnostics
    more = extra(loaded) if extra is not None else []
    return sorted([*loaded.diagnostics, *static_checks(loaded), *more], key=sort_key)


def static_checks(manifest: Manifest) -> list[Diagnostic]:
    """The checks over a loaded manifest that every load runs too: the zone checks, the ``steps.<name>``
    references no body declares (:mod:`telo.step_refs`), statements reached outside the transaction they
    require (:mod:`telo.transaction_checks`) and declarations of kinds not implemented yet
    (:mod:`telo.manifest.unimplemented`)."""
    return [*zone_checks(manifest), *step_reference_checks(manifest), *transaction_requirement_checks(manifest),
            *unimplemented_kinds(manifest)]


def zone_checks(manifest: Manifest) -> list[Diagnostic]:
    """The region checks of reference §12 (module docstring), one diagnostic per finding and position."""
    return _Walker(manifest).run()


# --- the walk ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Region:
    """An open region on the walk: who provides it, its attributes (→ declared reason), and where in the
    trail it starts (a finding's path is told from the region it concerns)."""

    decl: ResourceDecl
    attributes: Mapping[str, str]
    at: int

    def describe(self) -> str:
        return f"{self.decl.alias_kind} {self.decl.name!r}"

    def quote(self, attribute: str) -> str:
        own = self.decl.config.get("reason")  # Durable.Idempotent's author-written reason, when there is one
        author = f'; its author says: "{own}"' if isinstance(own, str) and own.strip() else ""
        return f'({attribute}: "{self.attributes[attribute]}"{author})'


@dataclass(frozen=True, slots=True)
class _Path:
    """Where the walk is: the open regions (outermost first), the trail of hops for messages, and the last
    position in the entry module that led here (where a finding in a library is reported)."""

    regions: tuple[_Region, ...]
    trail: tuple[str, ...]
    anchor: Pos | None

    def innermost(self, attribute: str) -> _Region | None:
        for region in reversed(self.regions):
            if attribute in region.attributes:
                return region
        return None

    def attributes(self) -> frozenset[str]:
        return frozenset(a for r in self.regions for a in r.attributes)

    def hop(self, text: str, anchor: Pos | None = None) -> _Path:
        return _Path(self.regions, (*self.trail, text), anchor or self.anchor)

    def enter(self, decl: ResourceDecl, attributes: Mapping[str, str]) -> _Path:
        return _Path((*self.regions, _Region(decl, dict(attributes), len(self.trail) - 1)), self.trail, self.anchor)

    def told_from(self, region: _Region, last: str | None = None) -> str:
        return " → ".join([*self.trail[region.at:], *([last] if last else [])])


@dataclass
class _Walker:
    manifest: Manifest
    found: dict[tuple[str, Pos | None], tuple[int, Diagnostic]] = field(default_factory=dict)
    seen: set[tuple[int, frozenset[str]]] = field(default_factory=set)
    outside: bool = False  # walking from a boot target: no durable run around (_targets)

    def run(self) -> list[Diagnostic]:
        for decl in self.manifest.resources.values():
            for body in decl.spec.body_fields():
                if body.provides_zone:
                    start = _Path((), (_describe(decl),), decl.pos if self._owned(decl) else None)
                    self.seen = set()
                    self._body(decl, body.name, start.enter(decl, body.provides_zone))
        self._targets()
        return sorted((d for _, d in self.found.values()), key=sort_key)

    def _targets(self) -> None:
        """Walk from each boot target, which runs outside every durable run: a kind that journals through the
        run's handle (``x-telo-requires-zone: replayed``) reached there fails with ERR_DURABLE_NO_RUN when it
        runs — a warning here first (the walk stops at a workflow: its body is a run)."""
        self.seen, self.outside = set(), True
        try:
            for target in self.manifest.application.targets:
                ref = target.ref if target.form == "ref" else (target.step or {}).get("invoke")
                reached = self.manifest.resolve_in(ref, None) if isinstance(ref, Ref) else None
                if isinstance(ref, Ref) and reached is not None:
                    start = _Path((), (f"target {target.name!r}", _describe(reached)), ref.pos)
                    self._resource(reached, start, ref)
        finally:
            self.outside = False

    # --- steps ----------------------------------------------------------------------------------------------

    def _body(self, decl: ResourceDecl, field_name: str, at: _Path) -> None:
        self._steps(decl, decl.config.get(field_name), f"/{field_name}", at)

    def _steps(self, decl: ResourceDecl, steps: Any, pointer: str, at: _Path) -> None:
        if not isinstance(steps, list):
            return
        for index, step in enumerate(steps):
            if isinstance(step, Mapping):
                self._step(decl, step, f"{pointer}/{index}", at)

    def _step(self, decl: ResourceDecl, step: Mapping[str, Any], pointer: str, at: _Path) -> None:
        name = step.get("name")
        here = at.hop(f"step {name!r}" if isinstance(name, str) else f"step {pointer}")
        bodies = branch_bodies(step)
        body_keys = {keys[0] for keys, _ in bodies if keys and keys[0] != "elseif"}
        for key, value in step.items():
            if key in body_keys or key == "invoke":
                continue
            for cel in _expressions(value, skip_then=(key == "elseif")):
                self._nondeterminism(decl, cel, here, f"step {name!r}")
        self._retry(decl, step, pointer, here)
        for keys, body in bodies:
            self._steps(decl, body, pointer + "".join(f"/{k}" for k in keys), here)
        target = step.get("invoke")
        if isinstance(target, Ref):
            reached = self._resolve(target, decl)
            if reached is not None:
                anchor = target.pos if self._owned(decl) else None
                self._resource(reached, here.hop(_describe(reached), anchor), target)

    def _retry(self, decl: ResourceDecl, step: Mapping[str, Any], pointer: str, at: _Path) -> None:
        region = at.innermost(NO_SUSPEND)
        retry = step.get("retry")
        if region is None or not isinstance(retry, Mapping):
            return
        last = _last_backoff_ms(retry)
        if last is None or last < SUSPENDING_BACKOFF_MS:
            return
        self._report(
            ZONE_ATTRIBUTE_VIOLATED,
            f"step {step.get('name')!r} retries with a last backoff of {last:g} ms (min(maxDelay, initialDelay × "
            f"factor^(attempts−1))), long enough to park the run (≥ {SUSPENDING_BACKOFF_MS} ms), but it runs "
            f"inside {region.describe()}, which forbids suspending {region.quote(NO_SUSPEND)}; "
            f"reached by: {at.told_from(region)}",
            self._where(decl, decl.position(f"{pointer}/retry"), at),
            at,
            hint="shorten the backoff below 30 s, or move the retrying step out of the region",
        )

    # --- reached resources ----------------------------------------------------------------------------------

    def _resource(self, decl: ResourceDecl, at: _Path, via: Ref) -> None:
        key = (id(decl), at.attributes())
        if key in self.seen:
            return
        self.seen.add(key)
        spec = decl.spec
        for attribute, own_reason in (spec.violates_zone or {}).items():
            region = at.innermost(attribute)
            if region is not None:
                self._report(
                    ZONE_ATTRIBUTE_VIOLATED,
                    f"{_describe(decl)} declares that it violates {attribute} ({own_reason}), but it is reached "
                    f"inside {region.describe()} {region.quote(attribute)}; reached by: {at.told_from(region)}",
                    at.anchor or via.pos,  # the step that places it here, in the entry's own module
                    at,
                    hint=f"move it out of {region.describe()}",
                )
        replayed = at.innermost(REPLAYED)
        for slot in spec.fields.values():
            if slot.use == "detached" and decl.config.get(slot.name) is not None and replayed is not None:
                self._report(
                    DURABLE_DETACH_FORBIDDEN,
                    f"{_describe(decl)} dispatches `{slot.name}` detached inside {replayed.describe()} "
                    f"{replayed.quote(REPLAYED)}: the journal would record the dispatch as done while the work "
                    f"runs on, so a resume skips it and a crash loses it; reached by: {at.told_from(replayed)}",
                    self._where(decl, decl.position(f"/{slot.name}"), at),
                    at,
                    hint="start a nested durable run without awaiting it instead; its run id is journalable",
                )
        pins = REPLAYED in ((spec.requires_zone or {}).get("attributes") or ())
        if pins and self.outside and at.innermost(REPLAYED) is None:
            self._report(
                Code.DURABLE_NO_RUN.value,
                f"{_describe(decl)} journals through a durable run, but a boot target reaches it outside one; "
                f"reached by: {' → '.join(at.trail)}",
                at.anchor or via.pos, at,
                hint="place it inside a durable workflow's steps (e.g. Local.Workflow), and make the workflow "
                "the target",
                severity="warning",  # (a step may catch the error on purpose: tests/manifests/durable/sleep_value)
            )
        new_run = conforms(spec, DURABLE_RUN, self.manifest.canonical_kinds)
        for slot in spec.fields.values():
            if slot.steps or slot.eval == "compile" or slot.ref is not None or pins:
                continue
            for cel in _expressions(decl.config.get(slot.name)):
                self._nondeterminism(decl, cel, at, f"`{slot.name}`")
        if new_run:
            return  # its body starts outside every enclosing zone (spec §7.3)
        for body in spec.body_fields():
            inner = at.enter(decl, body.provides_zone) if body.provides_zone else at
            self._body(decl, body.name, inner)

    # --- findings -------------------------------------------------------------------------------------------

    def _nondeterminism(self, decl: ResourceDecl, cel: Cel, at: _Path, site: str) -> None:
        region = at.innermost(IDEMPOTENT)
        if region is None:
            return
        bindings = decl.config.get("bindings")
        names = tuple(sorted(bindings)) if isinstance(bindings, Mapping) else ()
        try:
            program = _environment(names).compile(cel.text)
        except CelCompileError:
            return  # reported by the loader's CEL check
        if program.deterministic:
            return
        impure = sorted(c for c in program.calls if c in FUNCTIONS and not FUNCTIONS[c].deterministic)
        calls = ", ".join(f"{c}()" for c in impure)
        self._report(
            DURABLE_NONDETERMINISM,
            f"{site} of {_describe(decl)} calls {calls}, which gives a different value every time, inside "
            f"{region.describe()} {region.quote(IDEMPOTENT)}: the region collapses to one entry and records "
            f"nothing inside, so a re-run draws a new value; reached by: {at.told_from(region)}",
            self._where(decl, cel.pos, at),
            at,
            hint="pin the value with a Durable.Value step (it records its own decision, in or out of the region) "
            "and read it from steps.<name>.result",
        )

    def _report(self, code: str, message: str, pos: Pos | None, at: _Path, *, hint: str,
                severity: Severity = "error") -> None:
        # One finding per code and position: the same cause reached by several walks (a transaction inside a
        # workflow is walked from both) keeps the shortest account of how it is reached.
        key = (code, pos)
        depth = len(at.trail)
        previous = self.found.get(key)
        if previous is None or depth < previous[0]:
            self.found[key] = (depth, Diagnostic(code, message, pos, severity, hint))

    def _where(self, decl: ResourceDecl, pos: Pos, at: _Path) -> Pos | None:
        """``pos`` when the entry owns ``decl``, else the last place in the entry that led there."""
        return pos if self._owned(decl) else at.anchor

    def _owned(self, decl: ResourceDecl) -> bool:
        return decl.module == self.manifest.module

    def _resolve(self, ref: Ref, decl: ResourceDecl) -> ResourceDecl | None:
        return self.manifest.resolve_in(ref, decl)


def _describe(decl: ResourceDecl) -> str:
    return f"{decl.alias_kind} {decl.name!r}"


def _expressions(value: Any, *, skip_then: bool = False) -> Iterator[Cel]:
    """The CEL expressions in a config value (``!cel`` and each ``${{ }}`` of a template). ``skip_then``:
    an ``elseif`` list, whose ``then`` bodies are walked as steps."""
    if isinstance(value, Cel):
        yield value
    elif isinstance(value, Template):
        yield from value.expressions
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not (skip_then and key == "then"):
                yield from _expressions(item)
    elif isinstance(value, list):
        for item in value:
            yield from _expressions(item, skip_then=skip_then)


def _last_backoff_ms(retry: Mapping[str, Any]) -> float | None:
    """``min(maxDelay, initialDelay × factor^(attempts−1))``: the longest wait the policy can make; ``None``
    without a re-attempt, or when a field is not a number or duration (the schema reports that). Delays are
    read as the engine reads them (:func:`duration_ms`: ``1s`` is 1000)."""
    values: dict[str, float] = {}
    for name, default in _RETRY_DEFAULTS.items():
        raw = retry.get(name, default)
        if name == "initialDelay" and "initialDelay" not in retry and isinstance(retry.get("delay"), str):
            raw = retry["delay"]  # the deprecated duration spelling (reference §3)
        try:
            values[name] = duration_ms(raw) if name in ("initialDelay", "maxDelay") else _number(raw)
        except ValueError:
            return None
    attempts = int(values["attempts"])
    if attempts < 1:
        return None
    try:
        grown = values["initialDelay"] * values["factor"] ** (attempts - 1)
    except OverflowError:
        grown = float("inf")
    return min(values["maxDelay"], grown)


def _number(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ValueError(f"not a number: {raw!r}")
    return float(raw)


__all__ = ["DURABLE_DETACH_FORBIDDEN", "DURABLE_NONDETERMINISM", "ZONE_ATTRIBUTE_VIOLATED", "cel_checker", "check",
           "zone_checks"]
