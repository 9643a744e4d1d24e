"""Statement statistics readers for the live workload: one cumulative snapshot per call.

PostgreSQL: ``pg_stat_statements`` (manual F.32 "pg_stat_statements": ``calls``, ``total_exec_time``
in ms, ``rows``, ``shared_blks_hit``/``shared_blks_read``, ``temp_blks_read``/``temp_blks_written`` in
8 kB blocks, per ``queryid``; the ``query`` text is normalised, constants replaced by ``$n``) and
``pg_stat_database`` (manual 28.2.16: ``xact_commit``, ``xact_rollback``, ``temp_bytes``, ``sessions``).

MariaDB/MySQL: ``performance_schema.events_statements_summary_by_digest`` (MariaDB KB
"Performance Schema events_statements_summary_by_digest Table": ``COUNT_STAR``, ``SUM_TIMER_WAIT`` in
picoseconds, ``SUM_ROWS_SENT``, ``SUM_ERRORS``, ``SUM_CREATED_TMP_DISK_TABLES``,
``SUM_SORT_MERGE_PASSES``, ``DIGEST_TEXT`` with literals replaced by ``?``) and global status
(``Com_commit``, ``Com_rollback``, ``Connections``).

Both readers leave out the statements agenticdb itself sends (catalog and statistics reads, settings
changes): they touch ``pg_*`` / ``performance_schema`` / ``information_schema`` objects or are
utility statements, so a monitoring read can never become a "top query".

Set-up checks (``check``) raise :class:`LiveSetupError` with one line saying what the DBA must change;
agenticdb never changes ``shared_preload_libraries`` or ``performance_schema`` itself (both are
start-up settings).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import psycopg
import pymysql

from agenticdb.units.text import clip
from agenticdb.workloads.base import Connection, WorkloadError
from agenticdb.workloads.common import my_params, pg_params

PG_BLOCK_BYTES = 8192
"""PostgreSQL block size assumed for ``*_blks_*`` counters (the default BLCKSZ, manual 19.15 "block_size")."""

_OWN_STATEMENT = re.compile(
    r"\b(pg_catalog|pg_stat\w*|pg_settings|pg_database|pg_class|pg_namespace|pg_extension|pg_reload_conf|"
    r"pg_postmaster\w*|pg_is_in_recovery|pg_control\w*|pg_ls_\w+|pg_file_settings|pg_roles|pg_locks|"
    r"pg_current_wal\w*|pg_wal\w*|information_schema|performance_schema|sys\.)",
    re.I,
)
_UTILITY = re.compile(
    r"^\s*(set|show|alter|begin|commit|rollback|start|end|create|drop|vacuum|analyze|checkpoint|discard|"
    r"reset|flush|use|select\s+(version|@@|1\b|current_setting|now\(\)))",
    re.I,
)


class LiveSetupError(WorkloadError):
    """The server does not expose the statement statistics live mode reads (message: what to change)."""


@dataclass(frozen=True)
class QueryStat:
    """Cumulative counters of one normalised statement (since the statistics were last reset).

    ``total_ms`` execution time in ms; ``temp_bytes`` and ``read_bytes`` bytes spilled to temporary
    files / read from outside the buffer cache; ``errors`` failed executions (MariaDB only).
    """

    calls: int
    total_ms: float
    rows: int = 0
    hit_blocks: int = 0
    read_blocks: int = 0
    temp_bytes: int = 0
    errors: int = 0
    text: str = ""


@dataclass
class StatSnapshot:
    """Statement counters by query id and server-wide counters, taken at ``taken_at`` (epoch s)."""

    queries: dict[str, QueryStat]
    xacts: int
    rollbacks: int
    temp_bytes: int
    sessions: int = 0  # sessions (connections) opened since the statistics began, cumulative
    taken_at: float = field(default_factory=time.time)


def is_own_statement(text: str) -> bool:
    """True for statements live mode leaves out: catalog/statistics reads and utility statements."""
    return bool(_OWN_STATEMENT.search(text) or _UTILITY.match(text))


def short_text(text: str, limit: int = 80) -> str:
    """A statement's normalised text on one line, at most ``limit`` characters (literals are already
    ``$n`` / ``?`` in the statistics views)."""
    return clip(text, limit)


def counters_went_down(a: StatSnapshot, b: StatSnapshot) -> str:
    """What went down between two snapshots of one window ('' when nothing did): cumulative counters only
    go down when someone resets them (``pg_stat_statements_reset``, ``pg_stat_reset``, ``TRUNCATE`` of a
    performance_schema summary, ``FLUSH STATUS``), a statement is evicted (pg_stat_statements.max) or the
    server restarts; the window's difference is then no longer what happened in it (issue 38)."""
    down = [q for q, s in b.queries.items() if q in a.queries and s.calls < a.queries[q].calls]
    parts = []
    if down:
        parts.append(f"the counters of {len(down)} statement(s) went down (statistics reset or eviction)")
    if b.xacts < a.xacts:
        parts.append(f"the transaction counter went down ({a.xacts} → {b.xacts}: statistics reset or restart)")
    return "; ".join(parts)


class StatReader(Protocol):
    """What the live workload needs from a DBMS: a set-up check and cumulative snapshots."""

    def check(self) -> None: ...

    def snapshot(self) -> StatSnapshot: ...

    def sessions(self) -> set[str] | None:
        """The application's open sessions (ids), or None when a settings change reaches open sessions
        too and no turnover is needed."""
        ...


class PgStatReader:
    """Reads ``pg_stat_statements`` + ``pg_stat_database`` of one PostgreSQL database.

    Args:
        conn: the target connection; ``database`` (None = the target DSN's database) is where the
            extension must exist and whose statements are observed.
    """

    def __init__(self, conn: Connection, database: str | None = None) -> None:
        self.conn = conn
        self.database = database
        self._db: psycopg.Connection[Any] | None = None
        self.watched = f"database {database}" if database else ""
        """Where statements are observed, for messages ('' until ``check`` read the DSN's database)."""

    def _connect(self) -> psycopg.Connection[Any]:
        if self._db is None or self._db.closed:
            try:
                if self.database is None and self.conn.admin_dsn:
                    self._db = psycopg.connect(self.conn.admin_dsn, autocommit=True, connect_timeout=10)
                else:
                    self._db = psycopg.connect(**pg_params(self.conn, self.database), autocommit=True)
            except psycopg.Error as exc:
                raise WorkloadError(f"live: cannot connect to PostgreSQL to read pg_stat_statements: {exc}") from None
        return self._db

    def check(self) -> None:
        """Raise unless pg_stat_statements is preloaded and created in the observed database.

        Raises:
            LiveSetupError: one line naming ``shared_preload_libraries`` and ``CREATE EXTENSION
                pg_stat_statements`` (manual F.32: the module must be loaded by adding it to
                shared_preload_libraries, which needs a server restart).
        """
        db = self._connect()
        libs = str(db.execute("SHOW shared_preload_libraries").fetchone()[0])  # type: ignore[index]
        dbname = str(db.execute("SELECT current_database()").fetchone()[0])  # type: ignore[index]
        created = db.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'").fetchone()
        loaded = "pg_stat_statements" in [s.strip() for s in libs.split(",")]
        self.watched = f"database {dbname} (live.database = {self.database or 'unset: the database of target.dsn'})"
        if loaded and created:
            return
        missing = []
        if not loaded:
            missing.append(f"shared_preload_libraries = '{libs}' does not include pg_stat_statements")
        if not created:
            missing.append(f"the extension is not created in database {dbname}")
        raise LiveSetupError(
            "workload live needs the pg_stat_statements extension: "
            + "; ".join(missing)
            + ". Add pg_stat_statements to shared_preload_libraries (then restart PostgreSQL) and run "
            f"CREATE EXTENSION pg_stat_statements in database {dbname}; agenticdb never changes "
            "shared_preload_libraries itself"
        )

    def snapshot(self) -> StatSnapshot:
        """Cumulative counters of the observed database's statements (agenticdb's own left out).

        Raises:
            WorkloadError: the statistics could not be read.
        """
        db = self._connect()
        try:
            rows = db.execute(
                "SELECT s.queryid::text, sum(s.calls)::bigint, sum(s.total_exec_time), sum(s.rows)::bigint, "
                "sum(s.shared_blks_hit)::bigint, sum(s.shared_blks_read)::bigint, sum(s.temp_blks_written)::bigint, "
                "min(s.query) FROM pg_stat_statements s WHERE s.dbid = "
                "(SELECT oid FROM pg_database WHERE datname = current_database()) AND s.queryid IS NOT NULL "
                "GROUP BY s.queryid"
            ).fetchall()
            d = db.execute(
                "SELECT xact_commit, xact_rollback, temp_bytes, sessions FROM pg_stat_database "
                "WHERE datname = current_database()"
            ).fetchone()
        except psycopg.Error as exc:
            raise WorkloadError(f"live: reading pg_stat_statements failed: {exc}") from None
        queries = {
            str(r[0]): QueryStat(
                calls=int(r[1]),
                total_ms=float(r[2]),
                rows=int(r[3]),
                hit_blocks=int(r[4]),
                read_blocks=int(r[5]),
                temp_bytes=int(r[6]) * PG_BLOCK_BYTES,
                text=str(r[7]),
            )
            for r in rows
            if not is_own_statement(str(r[7]))
        }
        assert d is not None
        return StatSnapshot(
            queries, xacts=int(d[0]) + int(d[1]), rollbacks=int(d[1]), temp_bytes=int(d[2]), sessions=int(d[3])
        )

    def sessions(self) -> None:
        """None: no turnover is needed on PostgreSQL. A reload (``pg_reload_conf``) is propagated to every
        running server process, "so that existing sessions also adopt the new values" after their
        current command (manual 20.1.2 "Parameter Interaction via the Configuration File"); a restart
        closes every session anyway."""
        return None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()


class MyStatReader:
    """Reads ``performance_schema.events_statements_summary_by_digest`` of one MariaDB/MySQL schema.

    Args:
        conn: the target connection; ``database`` (None = every schema) filters ``SCHEMA_NAME``.
    """

    def __init__(self, conn: Connection, database: str | None = None) -> None:
        self.conn = conn
        self.database = database
        self._db: Any = None
        self.watched = f"schema {database}" if database else "every schema (live.database unset)"

    def _connect(self) -> Any:
        if self._db is None or not self._db.open:
            try:  # an observer loads nothing: no LOAD DATA LOCAL
                self._db = pymysql.connect(**{**my_params(self.conn, None), "local_infile": False})
            except pymysql.MySQLError as exc:
                raise WorkloadError(f"live: cannot connect to MariaDB to read performance_schema: {exc}") from None
        return self._db

    def _scalar(self, query: str) -> Any:
        cur = self._connect().cursor()
        cur.execute(query)
        row = cur.fetchone()
        return row[1] if row and len(row) > 1 else (row[0] if row else None)

    def check(self) -> None:
        """Raise unless performance_schema is ON and the statements_digest consumer is enabled.

        Raises:
            LiveSetupError: one line naming ``performance_schema`` (a start-up setting, MariaDB KB
                "performance_schema") and the ``statements_digest`` consumer.
        """
        on = str(self._scalar("SHOW GLOBAL VARIABLES LIKE 'performance_schema'") or "OFF").upper()
        digest = None
        if on == "ON":
            digest = self._scalar(
                "SELECT ENABLED FROM performance_schema.setup_consumers WHERE NAME = 'statements_digest'"
            )
        if on == "ON" and str(digest).upper() == "YES":
            return
        raise LiveSetupError(
            f"workload live needs performance_schema statement digests: performance_schema = {on}, "
            f"consumer statements_digest = {digest or 'unknown'}. Start the server with performance_schema=ON "
            "(and performance-schema-consumer-statements-digest=ON); agenticdb never changes start-up "
            "settings itself"
        )

    def snapshot(self) -> StatSnapshot:
        """Cumulative counters of the observed schema's digests (agenticdb's own left out).

        Raises:
            WorkloadError: the statistics could not be read.
        """
        cur = self._connect().cursor()
        where = "WHERE DIGEST IS NOT NULL" + (" AND SCHEMA_NAME = %s" if self.database else "")
        try:
            cur.execute(
                "SELECT DIGEST, COUNT_STAR, SUM_TIMER_WAIT, SUM_ROWS_SENT, SUM_ERRORS, "
                "SUM_CREATED_TMP_DISK_TABLES, SUM_SORT_MERGE_PASSES, SUM_NO_INDEX_USED, DIGEST_TEXT "
                f"FROM performance_schema.events_statements_summary_by_digest {where}",
                (self.database,) if self.database else None,
            )
            rows = cur.fetchall()
            cur.execute(
                "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                "WHERE VARIABLE_NAME IN ('COM_COMMIT', 'COM_ROLLBACK', 'CREATED_TMP_DISK_TABLES', 'CONNECTIONS')"
            )
            status = {str(k).upper(): int(v) for k, v in cur.fetchall()}
        except pymysql.MySQLError as exc:
            raise WorkloadError(f"live: reading performance_schema digests failed: {exc}") from None
        queries = {
            str(r[0]): QueryStat(
                calls=int(r[1]),
                total_ms=int(r[2]) / 1e9,  # picoseconds → ms
                rows=int(r[3]),
                errors=int(r[4]),
                # a disk temporary table or a sort merge pass: counted as one spill (no byte count here)
                temp_bytes=int(r[5]) + int(r[6]),
                text=str(r[8] or ""),
            )
            for r in rows
            if not is_own_statement(str(r[8] or ""))
        }
        commits, rollbacks = status.get("COM_COMMIT", 0), status.get("COM_ROLLBACK", 0)
        return StatSnapshot(
            queries,
            xacts=commits + rollbacks,
            rollbacks=rollbacks,
            temp_bytes=status.get("CREATED_TMP_DISK_TABLES", 0),
            sessions=status.get("CONNECTIONS", 0),
        )

    def sessions(self) -> set[str]:
        """Ids of the application's open sessions: user sessions of ``information_schema.PROCESSLIST``
        (in schema ``database`` when set), without agenticdb's own — those whose ``_pid`` connection
        attribute (sent by PyMySQL; ``performance_schema.session_connect_attrs``) is this process.

        ``SET GLOBAL`` of a variable with session scope (sort_buffer_size, tmp_table_size, join_buffer_size,
        …) "affects all new sessions. It does not affect any currently open sessions" (MariaDB KB "SET",
        "GLOBAL / SESSION"): the live workload waits for these sessions to close.

        Raises:
            WorkloadError: the process list could not be read.
        """
        cur = self._connect().cursor()
        where = " AND p.DB = %s" if self.database else ""
        try:
            cur.execute(
                "SELECT p.ID FROM information_schema.PROCESSLIST p WHERE p.ID <> CONNECTION_ID() "
                "AND p.COMMAND NOT IN ('Daemon', 'Binlog Dump') AND p.USER NOT IN ('system user', 'event_scheduler') "
                "AND p.ID NOT IN (SELECT a.PROCESSLIST_ID FROM performance_schema.session_connect_attrs a "
                f"WHERE a.ATTR_NAME = '_pid' AND a.ATTR_VALUE = %s){where}",
                (str(os.getpid()), self.database) if self.database else (str(os.getpid()),),
            )
            return {str(r[0]) for r in cur.fetchall()}
        except pymysql.MySQLError as exc:
            raise WorkloadError(f"live: reading the process list failed: {exc}") from None

    def close(self) -> None:
        if self._db is not None and self._db.open:
            self._db.close()


def stat_reader(conn: Connection, database: str | None) -> PgStatReader | MyStatReader:
    """The reader for ``conn.kind`` ("postgresql" or "mysql")."""
    if conn.kind == "postgresql":
        return PgStatReader(conn, database)
    return MyStatReader(conn, database)
