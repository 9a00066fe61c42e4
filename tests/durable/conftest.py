"""The store-independent durable suite runs against every journal store (memory, SQLite, file, PostgreSQL)."""

from tests.stores.conftest import clock, harness, reopen, store  # noqa: F401 - fixtures re-exported
