"""telo.journal.postgres_rows.db_errors: driver failures as JournalError, each with a hint that fits it."""
from __future__ import annotations

import psycopg
import pytest

from telo.errors import JournalError
from telo.journal.postgres_rows import db_errors


@pytest.mark.parametrize("failure", [psycopg.errors.DeadlockDetected("deadlock detected"),
                                     psycopg.errors.SerializationFailure("could not serialize access")])
def test_a_rolled_back_transaction_says_to_run_it_again_not_to_check_the_server(failure: Exception) -> None:
    """A deadlock (two senders' transactions locking two runs in opposite orders) told the user to check that
    the server is up."""
    with pytest.raises(JournalError) as raised, db_errors("append a journal entry"):
        raise failure
    err = raised.value
    assert err.code == "ERR_JOURNAL_UNAVAILABLE"  # transient: an execution halts and runs again
    assert "rolled the transaction back" in err.message and "run it again" in (err.hint or "")
    assert "server is up" not in (err.hint or "") and err.data["sqlstate"].startswith("40")


def test_a_lost_connection_still_says_to_check_the_server() -> None:
    with pytest.raises(JournalError) as raised, db_errors("read a run"):
        raise psycopg.OperationalError("connection refused")
    assert "server is up" in (raised.value.hint or "")
