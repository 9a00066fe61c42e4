"""A journal store's guards against use after close and after ``fork()`` (its writer thread and its
connections belong to the process, and the store instance, that opened them: SQLite, PostgreSQL)."""

from __future__ import annotations

import os

from telo.errors import Code, JournalError


def closed_error(database: str = "SQLite") -> JournalError:
    return JournalError(
        Code.JOURNAL_CLOSED,
        f"this {database} journal store was closed",
        hint="open a new store (or keep the store open while runs use it)",
    )


class _Forks:
    """Counts fork()s into this process, so a store can tell it was inherited (without a syscall per call)."""

    generation = 0


def _forked() -> None:
    _Forks.generation += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def fork_generation() -> int:
    return _Forks.generation


def check_process(generation: int, database: str = "SQLite") -> None:
    """Refuse use in a forked child: the writer thread did not survive the fork, and database connections
    must not cross one."""
    if _Forks.generation != generation:
        raise JournalError(
            Code.JOURNAL_FORKED,
            f"this {database} journal store was opened in a parent process and cannot be used after fork()",
            hint="open the store in the child process (or use the spawn start method)",
        )
