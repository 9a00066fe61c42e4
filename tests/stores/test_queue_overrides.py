"""The queue overrides ``telo queues set`` writes (issue 16, "Visibility"): ``Store.set_queue_override``,
``clear_queue_override`` and ``queue_overrides`` keep one row per queue alike on memory, SQLite and PostgreSQL
— a second set changes only the limits it names, 0 is "no limit", the row says who set it and when, and another
store instance over the same journal (another process) reads it. The file journal, which refuses queues, keeps
none. Before this change the stores had no such calls (and SQLite no ``<prefix>_queues`` table)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from telo.errors import TeloError
from telo.journal.queue_overrides import NO_LIMIT, LimitValues, QueueOverride
from telo.journal.store import Store
from tests.stores.conftest import StoreHarness

OVERRIDING_STORES = pytest.mark.parametrize("harness", ["memory", "sqlite", "postgres"], indirect=True)


@OVERRIDING_STORES
def test_an_override_is_one_row_per_queue_changed_field_by_field(store: Store, reopen: Callable[[], Store]) -> None:
    assert dict(store.queue_overrides()) == {}
    first = store.set_queue_override(QueueOverride("q", concurrency=3, set_by="alice", set_at=1_000))
    assert first == QueueOverride("q", concurrency=3, set_by="alice", set_at=1_000)
    second = store.set_queue_override(QueueOverride("q", key_limit=NO_LIMIT, rate_limit=5, rate_period_ms=60_000,
                                                    set_by="bob", set_at=2_000))
    assert second == QueueOverride("q", concurrency=3, key_limit=NO_LIMIT, rate_limit=5, rate_period_ms=60_000,
                                   set_by="bob", set_at=2_000)  # the concurrency kept; who and when replaced
    third = store.set_queue_override(QueueOverride("q", concurrency=NO_LIMIT, rate_limit=NO_LIMIT, set_by="carol",
                                                   set_at=3_000))
    assert (third.concurrency, third.rate_limit, third.rate_period_ms, third.key_limit) == (0, 0, None, 0)
    store.set_queue_override(QueueOverride("other", worker_concurrency=2, set_by="dan", set_at=4_000))
    seen = reopen().queue_overrides()  # another instance over the same journal: what a worker reads
    assert seen == {"q": third, "other": QueueOverride("other", worker_concurrency=2, set_by="dan", set_at=4_000)}
    assert store.clear_queue_override("q") == third
    assert store.clear_queue_override("q") is None
    assert list(reopen().queue_overrides()) == ["other"]


def test_an_override_applies_over_the_manifests_limits() -> None:
    declared = LimitValues(concurrency=2, worker_concurrency=4, key_limit=1, rate_limit=100, rate_period_ms=60_000)
    assert QueueOverride("q").apply(declared) == declared
    assert QueueOverride("q", concurrency=5, key_limit=NO_LIMIT).apply(declared) == LimitValues(5, 4, None, 100,
                                                                                                 60_000)
    assert QueueOverride("q", rate_limit=NO_LIMIT).apply(declared) == LimitValues(2, 4, 1, None, None)
    assert QueueOverride("q", rate_limit=3, rate_period_ms=1_000).apply(LimitValues()) == LimitValues(
        rate_limit=3, rate_period_ms=1_000)


@pytest.mark.parametrize("harness", ["file"], indirect=True)
def test_the_file_journal_keeps_no_override(store: Store) -> None:
    assert dict(store.queue_overrides()) == {}
    with pytest.raises(TeloError) as exc:
        store.set_queue_override(QueueOverride("q", concurrency=3))
    assert exc.value.code == "ERR_JOURNAL_CONFIG_INVALID" and exc.value.hint


@pytest.mark.parametrize("harness", ["postgres"], indirect=True)
def test_postgres_tables_made_without_the_override_table_read_none_and_refuse_a_write(harness: StoreHarness) -> None:
    """Tables created by hand (``create_table=False``) before this table existed: no override was ever set, so
    none is read; a write says what is missing."""
    import psycopg

    from telo.journal.postgres import PostgresStore

    harness.open().close()  # the tables, created
    url, table = harness.location["url"], harness.location["table"]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE {table}_queues")
    store = PostgresStore(url, table=table, create_table=False)
    try:
        assert dict(store.queue_overrides()) == {}
        with pytest.raises(TeloError) as exc:
            store.set_queue_override(QueueOverride("q", concurrency=3))
        assert exc.value.code == "ERR_JOURNAL_SCHEMA_MISSING" and "create_table=True" in (exc.value.hint or "")
    finally:
        store.close()
