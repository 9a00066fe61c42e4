"""The preamble of a queue test's manifest (issue 16): the application and its imports, the journal ``runs`` and
``Local.Queue`` documents — what tests/faults/test_queue_*.py, tests/api/test_queue_*.py,
tests/api/test_testing_queues.py and tests/cli/test_queue*.py each wrote out by hand. Each test adds its own
kinds and workflows after it.

:func:`header` is the application and its journal (and its queues, if given); :func:`queue` one queue, for a test
that places its queues itself; :func:`fault_header` and :func:`queued_work_flow` what the fault suite's queue
tests share: the journal located by ``tests/faults/support.Payments``' environment and the step of
``tests/faults/workflows/queued_work.py``.

Everything is written in block style, with no brace of its own: a builder given ``{placeholders}`` for its
values returns a ``str.format`` template (``tests/faults/test_queue_workers.MANIFEST``, which
tests/faults/test_queue_override.py formats).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

SQLITE = "durable-journal-sqlite"
POSTGRES = "durable-journal-postgres"


def header(name: str, journal_module: str, location: str, *, version: str | None = "1.0.0",
           imports: Mapping[str, str] | None = None, variables: Mapping[str, str] | None = None,
           start: str | None = None, start_inputs: Sequence[str] = (), claim_ttl: str | None = None,
           queues: Mapping[str, str] | None = None) -> str:
    """The ``Telo.Application`` ``name`` importing ``Local`` (durable-local), ``Journal`` (``journal_module``) and
    ``imports`` (alias: module); ``variables`` (name: the environment variable giving it, a string); a ``start``
    target invoking the workflow ``start`` with ``start_inputs`` passed through; then the ``Journal.Journal``
    ``runs`` at ``location`` (its YAML lines: ``path: …``, or ``url: …`` and ``table: …``) with ``claim_ttl``;
    then a :func:`queue` of each of ``queues`` (name: its rules)."""
    lines = ["kind: Telo.Application", "metadata:", f"  name: {name}"]
    if version is not None:
        lines.append(f"  version: {version}")
    lines.append("imports:")
    lines += [f"  {alias}: {module}" for alias, module in
              {"Local": "durable-local", "Journal": journal_module, **(imports or {})}.items()]
    if variables:
        lines.append("variables:")
        for variable, env in variables.items():
            lines += [f"  {variable}:", f"    env: {env}", "    type: string"]
    if start is not None:
        lines += ["targets:", "  - name: start", f"    invoke: !ref {start}"]
        lines += ["    inputs:", *(f'      {i}: !cel "inputs.{i}"' for i in start_inputs)] if start_inputs else []
    lines += ["---", "kind: Journal.Journal", "metadata:", "  name: runs", location]
    if claim_ttl is not None:
        lines.append(f"claimTtl: {claim_ttl}")
    return "\n".join(lines) + "\n" + "".join(queue(q, rules) for q, rules in (queues or {}).items())


def queue(name: str, rules: str = "", *, journal: str = "runs") -> str:
    """A ``Local.Queue`` document (with its leading ``---``) on ``journal``, with ``rules`` (its YAML lines)."""
    return f"---\nkind: Local.Queue\nmetadata:\n  name: {name}\njournal: !ref {journal}\n" + (
        f"{rules}\n" if rules else "")


def fault_header(name: str, journal_module: str, location: str, *, queues: Mapping[str, str] | None = None,
                 variables: Mapping[str, str] | None = None) -> str:
    """:func:`header` for a fault test's ``telo`` processes: the journal where ``tests/faults/support.Payments``
    puts it (``FAULT_JOURNAL``, ``FAULT_TABLE``; ``journal_module`` and ``location`` from its ``JOURNALS``) with
    ``claimTtl: 30s``, more ``variables`` if given, the ``queues``, and the ``Py.Function`` ``step`` of
    ``tests/faults/workflows/queued_work.py`` (idempotent), which :func:`queued_work_flow` invokes."""
    return (header(name, journal_module, location, imports={"Py": "python"}, claim_ttl="30s", queues=queues,
                   variables={"journal": "FAULT_JOURNAL", "table": "FAULT_TABLE", **(variables or {})})
            + "---\nkind: Py.Function\nmetadata:\n  name: step\nfunction: queued_work:work\nidempotent: true\n")


def queued_work_flow(name: str, queue: str, *, run_id: bool = True) -> str:
    """A ``Local.Workflow`` ``name`` on ``queue`` taking ``id`` and ``tenant``, whose one step ``work`` invokes the
    :func:`fault_header`'s ``step`` with them; ``run_id``: the run's id is its input ``id``."""
    ids = ['runId: !cel "inputs.id"'] if run_id else []
    pass_on = ['id: !cel "inputs.id"', 'tenant: !cel "inputs.tenant"']
    lines = ["---", "kind: Local.Workflow", "metadata:", f"  name: {name}", "journal: !ref runs",
             f"queue: !ref {queue}", *ids, "inputs:", *(f"  {p}" for p in pass_on),
             "steps:", "  - name: work", "    invoke: !ref step", "    inputs:", *(f"      {p}" for p in pass_on)]
    return "\n".join(lines) + "\n"
