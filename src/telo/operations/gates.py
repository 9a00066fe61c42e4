"""``telo check`` on version gates (issue 17; docs/changing-workflows.md "Retiring the old branch"): when no
live run needs a ``Durable.Patched`` gate's old branch any more, say so — the gate can be deprecated.

A live run needs the old branch when it started before the gate existed: the digest it recorded at its start
(``@digest``, spec §5.2: every resource its body could reach, by name) does not name the gate. Runs that
settled need nothing; runs that recorded the gate replay their own decision whatever the gate becomes. The
check reads the manifest's journal when it can be opened — never created — and says nothing when it cannot (a
manifest checked before it ever ran has nothing in flight).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from telo.durable.digest import DIGEST_PATH, reachable
from telo.errors import TeloError
from telo.journal.model import RunFilter
from telo.journal.store import Store
from telo.manifest import Diagnostic, Manifest, ResourceDecl

GATE_KIND: Final = "Durable.Patched"
WORKFLOW_KIND: Final = "DurableLocal.Workflow"
WARN_GATE_DEPRECATABLE: Final = "GATE_DEPRECATABLE"
LIVE: Final = ("scheduled", "running", "parked")
_PAGE: Final = 500


def gate_checks(manifest: Manifest) -> list[Diagnostic]:
    """One warning per gate no live run needs the old branch of (none when the journal cannot be read)."""
    gates = [d for d in manifest.resources.values() if d.spec.canonical == GATE_KIND
             and d.config.get("deprecated") is not True]
    if not gates:
        return []
    from telo.operations.journals import open_manifest_journal

    try:
        store = open_manifest_journal(str(manifest.source))
    except TeloError:
        return []
    try:
        return [d for gate in gates if (d := _check(manifest, store, gate)) is not None]
    finally:
        store.close()


def _check(manifest: Manifest, store: Store, gate: ResourceDecl) -> Diagnostic | None:
    workflows = [d.name for d in manifest.resources.values() if d.spec.canonical == WORKFLOW_KIND
                 and gate.name in reachable(manifest, d.name)]
    for workflow in workflows:
        for run in _live_runs(store, workflow):
            if gate.name not in _recorded_resources(store, run):
                return None  # started before the gate: it still needs the old branch
    patch = gate.config.get("patch")
    return Diagnostic(WARN_GATE_DEPRECATABLE,
                      f"no live run of {', '.join(map(repr, workflows)) or 'any workflow'} started before the "
                      f"version gate {gate.name!r} (patch {patch!r}): none needs its old branch any more",
                      gate.pos, severity="warning",
                      hint="set `deprecated: true` on the gate and deploy; then delete the gate and the old branch "
                           "(docs/changing-workflows.md)")


def _live_runs(store: Store, workflow: str) -> Iterator[str]:
    for status in LIVE:
        after: str | None = None
        while True:
            page = store.list_runs(RunFilter(status=status, workflow=workflow, limit=_PAGE, after=after))
            yield from (r.run for r in page.runs)
            if page.next is None:
                break
            after = page.next


def _recorded_resources(store: Store, run: str) -> frozenset[str]:
    """The resource names the run's ``@digest`` recorded (empty when it recorded none)."""
    for entry in store.read_entries(run):
        if entry.path == DIGEST_PATH:
            value = entry.decode(run)
            resources = value.get("resources") if isinstance(value, dict) else None
            return frozenset(resources) if isinstance(resources, dict) else frozenset()
    return frozenset()
