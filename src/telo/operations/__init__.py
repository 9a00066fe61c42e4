"""Operations: what an operator or a program does to runs, written once for every front end (docs/design.md
"Operations and the front ends").

* :mod:`.journals` — opening a journal by name, with the one not-found rule;
* :mod:`.runs` — a run's status (with its unconfirmed effects), result, a page of runs, events, checkpoints;
* :mod:`.actions` — deliver, cancel, resume, resolve, fork, restore;
* :mod:`.starting` — naming a workflow, admitting a scheduled run;
* :mod:`.queues` — a manifest's queues, what holds their slots and waits in them, why a queued run waits;
* :mod:`.worker` — ``telo worker``'s loop over a manifest's resumers.

The Python API, the CLI and the dashboard call these and only format the answer; the rules the addressing
kinds share with them live one layer down, in :mod:`telo.durable.operator`.
"""
