"""Runs held because their manifest changed, in bulk (issue 15): after a deploy every run parked at
``@manifest[k]`` (spec §9 ``ERR_DURABLE_MANIFEST_CHANGED``) waits for an operator, one ``telo resume RUN
--force`` each. :func:`held_runs` lists them with what changed for each — the ``changed``/``added``/``removed``
resources the hold recorded at ``@held[k]`` — and, given the new manifest, whether accepting it is safe for the
run (issue 17, :mod:`telo.durable.safe_change`); :func:`release` forces them on, one forced resume per run,
exactly as the single-run command records it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from telo import paths
from telo.durable.digest import describe_changes, held_path
from telo.durable.operator import Resumed, is_held, require_run, resume_run
from telo.durable.safe_change import Assessment, assess
from telo.errors import TeloError
from telo.journal import eventlog
from telo.journal.model import RunFilter, RunRecord
from telo.journal.store import Store
from telo.manifest import Manifest

PAGE = 200  # runs read per listing page while looking for held ones
KINDS = ("changed", "added", "removed")


@dataclass(frozen=True, slots=True)
class HeldRun:
    """A held run and what its hold recorded: the resources that differ from the manifest it started with.
    ``changes`` is empty (and ``error`` says why) when the hold's record does not read."""

    run: str
    workflow: str | None
    hold: str  # the park path, ``@manifest[k]``
    changes: Mapping[str, list[str]] = field(default_factory=dict)
    error: str | None = None
    safety: Assessment | None = None  # given the new manifest: is accepting it safe for this run?

    def describe(self) -> str:
        if self.error is not None:
            return f"(what changed is unreadable: {self.error})"
        return describe_changes(self.changes)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run": self.run, "workflow": self.workflow, "hold": self.hold,
                               "changes": {k: list(v) for k, v in self.changes.items()}}
        if self.safety is not None:
            out.update(self.safety.to_json())
        return out if self.error is None else {**out, "error": self.error}


def _parked_runs(store: Store, workflow: str | None) -> Iterator[RunRecord]:
    after: str | None = None
    while True:
        page = store.list_runs(RunFilter(status="parked", workflow=workflow, limit=PAGE, after=after))
        yield from page.runs
        if page.next is None:
            return
        after = page.next


def _changes(store: Store, record: RunRecord, manifest: Manifest | None) -> HeldRun:
    """The hold's own record: ``@manifest[k]`` parks, ``@held[k]`` says what changed (durable.execute); given
    the new ``manifest``, whether accepting it is safe for the run."""
    assert record.parked is not None
    hold = record.parked.path
    index = paths.parse(hold)[-1].index
    try:
        entries = eventlog.recover(store, record.run, record).entries
        entry = entries.get(held_path(index or 0))
        value = entry.decode(record.run) if entry is not None else None
    except TeloError as exc:
        return HeldRun(record.run, record.workflow, hold, error=f"{exc.code}: {exc.message}")
    if not isinstance(value, Mapping):
        return HeldRun(record.run, record.workflow, hold, error="the hold recorded no changes")
    diff = {k: [str(n) for n in value.get(k) or []] for k in KINDS}
    safety = None if manifest is None or record.workflow is None else assess(manifest, record.workflow, entries)
    return HeldRun(record.run, record.workflow, hold, diff, safety=safety)


def held_runs(store: Store, workflow: str | None = None, manifest: Manifest | None = None) -> list[HeldRun]:
    """Every run of ``workflow`` (None: of every workflow) held because its manifest changed, newest first;
    with the new ``manifest``, each assessed (:attr:`HeldRun.safety`)."""
    return [_changes(store, r, manifest) for r in _parked_runs(store, workflow) if is_held(r)]


def release(store: Store, run: str, reason: str, now_ms: int) -> Resumed:
    """Force one held run on, as ``telo resume RUN --force`` does (the acceptance is recorded at its hold). A
    run no longer held — resumed or cancelled since it was listed — is left alone: a forced resume would
    otherwise make a run that is not parked at all due again."""
    record = require_run(store, run)
    if not is_held(record):
        return Resumed(run, False, record.status, reason=f"no longer held (the run is {record.status})")
    return resume_run(store, run, reason, now_ms, force=True)
