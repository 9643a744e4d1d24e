"""The central Memory Book on PostgreSQL (issue 19): experience shared by every agent that points
``storage.memory_url`` at the same database, with the local SQLite book as its cache.

- :class:`PostgresBackend` implements ``backends.ExperienceBackend`` with psycopg 3. The schema
  ``agenticdb`` is created and migrated by agenticdb: the SQL files ``memory/central/NNNN_*.sql`` are
  applied in order, each once, in one transaction under a transaction-level advisory lock (so agents
  starting together do not race), and recorded in ``agenticdb.schema_version``.
- Writes are idempotent: ``INSERT ... ON CONFLICT DO NOTHING`` on the unique keys (host, session_id) of
  experience and (host, session_id, round_no) of rounds, in one transaction per upload — concurrent
  writers lose nothing and a retried upload never duplicates.
- :class:`CentralLink` is what a session uses: retrieval from the central book, pushes of new
  experience; when the central database is unreachable it says so once (structlog warning and a
  ``memory.central_unreachable`` journal event) and the session keeps working on the local cache.
- :func:`sync` uploads everything learned locally and not yet uploaded (``agenticdb memory sync``, the
  daemon's cycle).

Sources: PostgreSQL manual, "INSERT ... ON CONFLICT" (https://www.postgresql.org/docs/15/sql-insert.html)
and "Advisory Locks" (https://www.postgresql.org/docs/15/explicit-locking.html#ADVISORY-LOCKS).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg
import structlog
from psycopg.types.json import Jsonb

from agenticdb.connfault import describe_fault
from agenticdb.models.planning import Experience, Fingerprint
from agenticdb.redaction import redact
from agenticdb.resources import data_dir
from agenticdb.store.memory.backends import (
    ExperienceRecord,
    LocalBook,
    RoundRecord,
    SqliteBackend,
    SyncResult,
    rank,
)
from agenticdb.store.memory.experience import dbms_family

B = TypeVar("B", bound=LocalBook)

log = structlog.get_logger(__name__)

#: Arbitrary constant key of the advisory lock taken while migrating (pg_advisory_xact_lock(bigint)).
MIGRATION_LOCK_KEY = 0x61676E7464620013
CONNECT_TIMEOUT_S = 5


class CentralError(RuntimeError):
    """The central Memory Book could not be reached or refused a statement; the message is one line
    naming the URL (password removed) and the cause (:func:`agenticdb.connfault.describe_fault`)."""


class NewerSchemaError(CentralError):
    """The central book's schema is newer than this agenticdb's migrations: older code never writes
    to it (it may not know a column or constraint the newer code relies on)."""


def fault(url: str, doing: str, exc: BaseException) -> str:
    """``central Memory Book <url>: <doing> failed: <cause>`` in one line (no password)."""
    return f"central Memory Book {safe_url(url)}: {doing} failed: {describe_fault(exc)}"


def safe_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for logs and messages): the one redaction,
    :func:`agenticdb.redaction.redact`."""
    return redact(url)


def migrations() -> list[tuple[int, str, str]]:
    """The shipped migrations ``(version, file name, SQL)`` in version order."""
    folder = data_dir("memory") / "central"
    out = []
    for path in sorted(folder.glob("[0-9][0-9][0-9][0-9]_*.sql")):
        out.append((int(path.name[:4]), path.name, path.read_text()))
    return out


class PostgresBackend:
    """``ExperienceBackend`` on a PostgreSQL database (schema ``agenticdb``, migrated on open).

    Args:
        url: a libpq URL (``postgresql://user:pass@host:port/db``).

    Raises:
        CentralError: connecting or migrating failed.
    """

    name = "postgresql"

    def __init__(self, url: str) -> None:
        self.url = url
        try:
            self.conn = psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S, autocommit=False)
        except psycopg.Error as exc:
            raise CentralError(fault(url, "connect", exc)) from None
        try:
            self.applied = self.migrate()
            self.central_version = self.schema_version()
        except psycopg.Error as exc:
            self.conn.close()
            raise CentralError(fault(url, "migration", exc)) from None
        self.code_version = max((v for v, _, _ in migrations()), default=0)
        self.newer = self.central_version > self.code_version
        """True when the central schema is newer than this code's: read with a warning, never written."""
        if self.newer:
            log.warning(
                "memory.central_schema_newer",
                url=safe_url(url),
                central=self.central_version,
                code=self.code_version,
                reason="read with care, never written: upgrade agenticdb on this host",
            )

    def migrate(self) -> list[int]:
        """Apply the migrations not yet recorded in ``agenticdb.schema_version``; returns their versions."""
        done: list[int] = []
        with self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
            self.conn.execute("CREATE SCHEMA IF NOT EXISTS agenticdb")
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS agenticdb.schema_version ("
                " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            have = {r[0] for r in self.conn.execute("SELECT version FROM agenticdb.schema_version")}
            for version, name, sql in migrations():
                if version in have:
                    continue
                self.conn.execute(sql.encode())
                self.conn.execute(
                    "INSERT INTO agenticdb.schema_version (version, name) VALUES (%s, %s)", (version, name)
                )
                done.append(version)
        if done:
            log.info("memory.central_migrated", url=safe_url(self.url), applied=done)
        return done

    def schema_version(self) -> int:
        """The highest applied migration."""
        row = self.conn.execute("SELECT max(version) FROM agenticdb.schema_version").fetchone()
        self.conn.commit()
        return int(row[0]) if row and row[0] is not None else 0

    def upsert(self, experiences: Sequence[ExperienceRecord], rounds: Sequence[RoundRecord] = ()) -> int:
        """Insert what is new (ON CONFLICT DO NOTHING on the unique keys) in one transaction; returns
        the experience rows inserted.

        Raises:
            NewerSchemaError: the central schema is newer than this code's (nothing is written).
            psycopg.Error: the statement or the connection failed (nothing is committed).
        """
        if self.newer:
            raise NewerSchemaError(
                f"central Memory Book {safe_url(self.url)}: its schema is version {self.central_version}, newer "
                f"than this agenticdb's {self.code_version}: refusing to write (upgrade agenticdb here)"
            )
        added = 0
        with self.conn.transaction():
            for rec in experiences:
                fp = rec.experience.fingerprint
                origin = rec.experience.origin
                cur = self.conn.execute(
                    "INSERT INTO agenticdb.experience (host, session_id, dbms, version_major, benchmark,"
                    " workload_class, family, fingerprint, origin, experience, created_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                    " ON CONFLICT (host, session_id) DO NOTHING",
                    (
                        rec.host,
                        rec.session_id,
                        fp.dbms,
                        fp.version_major,
                        fp.benchmark,
                        fp.workload_class,
                        dbms_family(fp.dbms),
                        Jsonb(fp.model_dump(mode="json")),
                        None if origin is None else Jsonb(origin.model_dump(mode="json")),
                        Jsonb(rec.experience.model_dump(mode="json")),
                        rec.created_at,
                    ),
                )
                added += cur.rowcount
            for rr in rounds:
                self.conn.execute(
                    "INSERT INTO agenticdb.rounds (host, session_id, round_no, decision, kept, outcome)"
                    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (
                        rr.host,
                        rr.session_id,
                        rr.round_no,
                        rr.outcome.decision.value,
                        rr.outcome.kept,
                        Jsonb(rr.outcome.model_dump(mode="json")),
                    ),
                )
        return added

    def records(self, family: str | None = None) -> list[ExperienceRecord]:
        """All experience (of one DBMS family when given), oldest first."""
        sql = "SELECT host, session_id, created_at, experience FROM agenticdb.experience"
        params: tuple[Any, ...] = ()
        if family is not None:
            sql += " WHERE family = %s"
            params = (family,)
        rows = self.conn.execute(sql + " ORDER BY created_at, id", params).fetchall()
        self.conn.commit()
        return [
            ExperienceRecord(
                host=r[0], session_id=r[1], created_at=r[2].isoformat(), experience=Experience.model_validate(r[3])
            )
            for r in rows
        ]

    def count(self, table: str = "experience") -> int:
        """Rows in ``agenticdb.experience`` or ``agenticdb.rounds``."""
        if table not in ("experience", "rounds"):
            raise ValueError(f"table={table!r}: must be 'experience' or 'rounds'")
        row = self.conn.execute(f"SELECT count(*) FROM agenticdb.{table}").fetchone()
        self.conn.commit()
        return int(row[0]) if row else 0

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


def sync(book: LocalBook, central: PostgresBackend) -> SyncResult:
    """Upload the local book's pending experience (``synced_at`` NULL) and its sessions' rounds to the
    central book, then mark them synced. Idempotent: a record the central book already holds is not
    inserted again, so a sync interrupted between upload and marking uploads nothing twice."""
    local = SqliteBackend(book)
    ids, recs, rounds = local.pending()
    if not ids:
        return SyncResult(uploaded=0, already_there=0, rounds=0)
    added = central.upsert(recs, rounds)
    local.mark_synced(ids)
    result = SyncResult(uploaded=added, already_there=len(recs) - added, rounds=len(rounds))
    log.info("memory.synced", url=safe_url(central.url), **result.model_dump())
    return result


class CentralLink:
    """A local Memory Book's link to the central one. Connects lazily; when the central database is
    unreachable it warns once (``on_unreachable`` is called once with the reason, e.g. to journal it)
    and every call falls back to the local cache until :meth:`retry` or a new link.

    Args:
        url: ``storage.memory_url``.
        on_unreachable: callback ``(reason)``, called once per outage.
    """

    def __init__(self, url: str, on_unreachable: Callable[[str], object] | None = None) -> None:
        self.url = url
        self.on_unreachable = on_unreachable
        self.backend: PostgresBackend | None = None
        self.down_reason: str | None = None
        self.warned = False

    def _backend(self) -> PostgresBackend | None:
        if self.down_reason is not None:
            return None
        if self.backend is None:
            try:
                self.backend = PostgresBackend(self.url)
            except CentralError as exc:
                self._down(str(exc))
                return None
            if self.warned:
                log.info("memory.central_back", url=safe_url(self.url))
                self.warned = False
        return self.backend

    def _down(self, reason: str) -> None:
        self.down_reason = reason
        if self.backend is not None:
            self.backend.close()
            self.backend = None
        if self.warned:  # said once per outage; retries stay quiet until the book is back
            log.debug("memory.central_still_unreachable", reason=reason)
            return
        self.warned = True
        log.warning("memory.central_unreachable", url=safe_url(self.url), reason=reason, fallback="local cache")
        if self.on_unreachable is not None:
            self.on_unreachable(reason)

    def retry(self) -> None:
        """Forget a past outage: the next call connects again."""
        self.down_reason = None

    def push(self, book: LocalBook) -> SyncResult | None:
        """Sync the book's pending experience; None when the central book is unreachable."""
        backend = self._backend()
        if backend is None:
            return None
        try:
            return sync(book, backend)
        except NewerSchemaError as exc:
            self._down(f"{exc}; {len(SqliteBackend(book).pending()[0])} experience row(s) stay pending in {book.path}")
            return None
        except psycopg.Error as exc:
            pending = len(SqliteBackend(book).pending()[0])
            self._down(f"{fault(self.url, 'upload', exc)}; {pending} experience row(s) stay pending in {book.path}")
            return None

    def retrieve(
        self, book: LocalBook, fp: Fingerprint, limit: int, threshold: float
    ) -> list[tuple[float, Experience]] | None:
        """Similar experience from the central book plus the local pending rows (learned here while the
        central book was away); None when the central book is unreachable (the caller uses the cache)."""
        backend = self._backend()
        if backend is None:
            return None
        try:
            records = backend.records(dbms_family(fp.dbms))
        except psycopg.Error as exc:
            self._down(fault(self.url, "read", exc))
            return None
        keys = {(r.host, r.session_id) for r in records}
        records += [r for r in SqliteBackend(book).pending()[1] if (r.host, r.session_id) not in keys]
        return [(score, rec.experience) for score, rec in rank(fp, records, limit, threshold)]

    def close(self) -> None:
        """Close the central connection."""
        if self.backend is not None:
            self.backend.close()
            self.backend = None


def attach_central(book: B, url: str | None, on_unreachable: Callable[[str], object] | None = None) -> B:
    """Link ``book`` to the central Memory Book at ``url`` (nothing when ``url`` is None); returns it."""
    if url:
        book.central = CentralLink(url, on_unreachable)
    return book
