"""The journal provider kinds: ``durable-journal-sqlite`` (the embedded default), ``-file`` and ``-postgres``
(reference §7). Each opens its store once at init and hands it to the workflows that reference it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from telo.errors import Code, TeloError
from telo.journal.claims import DEFAULT_TTL_MS, MIN_TTL_MS
from telo.journal.compat import given_mode
from telo.journal.store import Store
from telo.kinds.sql import Connection
from telo.kinds.sql_drivers import SqlTarget
from telo.runtime.resource import Resource
from telo.values.plain import parse_cel_duration

if TYPE_CHECKING:
    from telo.runtime.resource import Host


def compile_time(app: Host, value: Any, where: str) -> Any:
    """A ``compile`` field (x-telo-eval): evaluated once at load against the module scope."""
    return app.compiler.value(value, where=where).evaluate(app.module_scope())


class Journal(Resource):
    """Base of the journal kinds: ``store`` is the open store."""

    def __init__(self, app: Host, name: str, config: Mapping[str, Any], module: str | None) -> None:
        super().__init__(app, name, config, module)
        self._store: Store | None = None
        self._borrowed = False
        # How its store writes values (telo.journal.compat): set by telo.load(..., journal_compat=…); None leaves
        # the store to the process's mode (TELO_JOURNAL_COMPAT, --journal-compat).
        self.journal_compat: str | None = None

    def use_store(self, store: Store) -> None:
        """Use ``store`` instead of opening the configured journal (``telo.load(..., journal=URL)``). The caller
        keeps ownership: teardown leaves it open."""
        self._store, self._borrowed = store, True
        store.claim_ttl_ms = self.claim_ttl_ms()
        if self.journal_compat is not None:
            given_mode(store, self.journal_compat, f"{self.kind} {self.name!r}")

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = self.open()
            self._store.claim_ttl_ms = self.claim_ttl_ms()
            if self.journal_compat is not None:
                given_mode(self._store, self.journal_compat, f"{self.kind} {self.name!r}")
        return self._store

    def claim_ttl_ms(self) -> int:
        """``claimTtl``: the lease of this journal's claims (telo.journal.claims), 60 s unless configured."""
        raw = self.config.get("claimTtl")
        if raw is None:
            return DEFAULT_TTL_MS
        where = f"{self.kind} {self.name!r}.claimTtl"
        text = compile_time(self.app, raw, where)
        try:  # the schema's duration pattern holds: ms|s|m|h|d
            ttl = parse_cel_duration(str(text), extra_units={"d": 86_400 * 10**9}).total_nanos() // 1_000_000
        except ValueError as exc:
            raise TeloError(Code.JOURNAL_CONFIG_INVALID, f"{where}: {exc}", hint="write e.g. claimTtl: 10s") from exc
        if ttl < MIN_TTL_MS:
            raise TeloError(
                Code.JOURNAL_CONFIG_INVALID,
                f"{where} is {ttl} ms; a claim's lease must be at least {MIN_TTL_MS} ms",
                hint="claims are renewed every third of the lease: a shorter one turns an ordinary pause "
                "(a GC, a loaded machine) into a takeover; write e.g. claimTtl: 10s",
                data={"claimTtl": ttl, "minimum": MIN_TTL_MS},
            )
        return ttl

    def open(self) -> Store:
        raise NotImplementedError

    def local_path(self) -> str | None:
        """The file or directory this journal lives in, for a journal kept on this machine (else None): a
        command that only reads or operates on runs refuses a journal that is not there yet rather than
        creating it (telo.operations.journals)."""
        return None

    async def init(self) -> None:
        _ = self.store

    async def teardown(self) -> None:
        if self._store is not None and not self._borrowed:
            self._store.close()
        self._store, self._borrowed = None, False

    def _path(self, key: str) -> str:
        raw = compile_time(self.app, self.config[key], f"{self.kind} {self.name!r}.{key}")
        path = Path(str(raw)).expanduser()
        return str(path if path.is_absolute() else self.app.base_dir / path)


class SqliteJournal(Journal):
    kind = "DurableJournalSqlite.Journal"

    def open(self) -> Store:
        from telo.journal.sqlite import SqliteStore

        path = self._file()
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return SqliteStore(path, synchronous=str(self.config.get("synchronous", "FULL")), clock=self.app.clock)

    def _file(self) -> str:
        """``path``, or the file of the ``SQLite.Connection`` (or sqlite ``Sql.Connection``) named by ``connection``:
        a ``Sql.Transaction`` on that connection is then journaled per step (same file, spec §8.2)."""
        if self.config.get("connection") is None:
            return self._path("path")
        target = _connection_target(self, "sqlite", "a SQLite.Connection (or a Sql.Connection to a SQLite file)")
        if target.location == ":memory:":
            raise TeloError(Code.JOURNAL_CONFIG_INVALID, f"{self.kind} {self.name!r}.connection: an in-memory "
                            "database cannot hold a journal (it is gone when the process ends)",
                            hint="give the SQLite.Connection a `file`, or the journal a `path`")
        return target.location

    def local_path(self) -> str | None:
        return self._file()

    def snapshot(self) -> Any:
        raw = self.config.get("path")
        if raw is None and self.config.get("connection") is not None:
            return {"path": self._file()}
        return {"path": raw if isinstance(raw, str) else None}


class FileJournal(Journal):
    kind = "DurableJournalFile.Journal"

    def open(self) -> Store:
        from telo.journal.file import FileStore

        return FileStore(self._path("directory"), clock=self.app.clock)

    def local_path(self) -> str | None:
        return self._path("directory")

    def snapshot(self) -> Any:
        return {"directory": self.config.get("directory") if isinstance(self.config.get("directory"), str) else None}


class PostgresJournal(Journal):
    kind = "DurableJournalPostgres.Journal"

    def open(self) -> Store:
        from telo.journal.postgres import PostgresStore

        url = self.config.get("url")
        if url is None and self.config.get("connection") is not None:
            # a Postgres.Connection (or a postgresql:// Sql.Connection): the journal opens its own connections to
            # that database, and a Sql.Transaction on the connection is journaled per step (spec §8.2)
            url = _connection_target(self, "postgres", "a Postgres.Connection").location
        url = compile_time(self.app, url, f"{self.kind} {self.name!r}.url")

        def field(key: str, default: Any) -> Any:  # compile-time fields (kinds/specs/journals.py): CEL allowed
            if key not in self.config:
                return default
            return compile_time(self.app, self.config[key], f"{self.kind} {self.name!r}.{key}")

        channel = field("notifyChannel", None)
        return PostgresStore(str(url), table=str(field("table", "telo_durable")),
                             create_table=bool(field("createTable", True)),
                             notify_channel=None if channel is None else str(channel), clock=self.app.clock)


def _connection_target(journal: Journal, driver: str, wanted: str) -> SqlTarget:
    """The database of the connection ``journal.connection`` names, which must be a ``driver`` one."""
    where = f"{journal.kind} {journal.name!r}.connection"
    resource = journal.app.resource_for(journal.config["connection"], where=where)
    target = resource.target if isinstance(resource, Connection) else None
    if target is None or target.driver != driver:
        raise TeloError(Code.JOURNAL_CONFIG_INVALID, f"{where}: {resource.name!r} ({resource.kind}) is not {wanted}",
                        hint=f"name {wanted} there")
    return target
