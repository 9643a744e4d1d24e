"""What the MariaDB detectors read (MariaDB 10.11): statement digests, InnoDB table statistics, the
history list length, transactions and lock waits.

Sources (MariaDB KB): "Performance Schema events_statements_summary_by_digest Table" (SUM_NO_INDEX_USED,
SUM_ROWS_EXAMINED), "Information Schema INNODB_SYS_TABLESTATS Table" (MODIFIED_COUNTER, NUM_ROWS),
"Information Schema INNODB_METRICS Table" (trx_rseg_history_len), "Information Schema INNODB_TRX Table"
and "INNODB_LOCK_WAITS Table", "InnoDB Persistent Statistics" (innodb_stats_auto_recalc).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import pymysql
import structlog

from agenticdb.dialect import parse_mysql_dsn
from agenticdb.rootcause.watch import Watch
from agenticdb.units.text import clip

log = structlog.get_logger(__name__)

DIGESTS_SQL = """
SELECT coalesce(SCHEMA_NAME, ''), DIGEST, DIGEST_TEXT, COUNT_STAR, SUM_TIMER_WAIT, SUM_NO_INDEX_USED,
       SUM_NO_GOOD_INDEX_USED, SUM_ROWS_EXAMINED
FROM performance_schema.events_statements_summary_by_digest WHERE DIGEST IS NOT NULL
"""

TABLESTATS_SQL = """
SELECT s.NAME, s.NUM_ROWS, s.MODIFIED_COUNTER, coalesce(t.CREATE_OPTIONS, '')
FROM information_schema.INNODB_SYS_TABLESTATS s
LEFT JOIN information_schema.TABLES t ON concat(t.TABLE_SCHEMA, '/', t.TABLE_NAME) = s.NAME
WHERE s.NAME NOT LIKE 'mysql/%%' AND s.NAME NOT LIKE 'sys/%%'
  AND (DATABASE() IS NULL OR substring_index(s.NAME, '/', 1) = DATABASE())
"""

TRX_SQL = """
SELECT t.trx_id, t.trx_mysql_thread_id, t.trx_state, TIMESTAMPDIFF(SECOND, t.trx_started, NOW()),
       coalesce(p.COMMAND, ''), coalesce(p.TIME, 0), left(coalesce(t.trx_query, p.INFO, ''), 300),
       t.trx_rows_locked, t.trx_tables_locked
FROM information_schema.INNODB_TRX t LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
WHERE t.trx_mysql_thread_id <> CONNECTION_ID()
ORDER BY t.trx_started
"""

WAITS_SQL = """
SELECT w.requesting_trx_id, w.blocking_trx_id FROM information_schema.INNODB_LOCK_WAITS w
"""


_MONITORING = re.compile(r"\b(information_schema|performance_schema)`?\s*\.|^\s*show\b", re.I)


def is_monitoring(text: str) -> bool:
    """True for a digest that reads the server's catalogs (information_schema, performance_schema, SHOW):
    this watcher's own reads (its TABLESTATS join opens every table, slow on a server holding many) and any
    other monitor's. They are not the workload, so they stay out of a window's statement time: on a busy
    host they took 45 % of a 1-s window and halved a missing-index share (CI, 2026-12-06)."""
    return bool(_MONITORING.search(text))


@dataclass(frozen=True)
class Digest:
    """One statement digest's cumulative counters (timer in picoseconds)."""

    schema: str
    text: str
    count: int
    timer_ps: int
    no_index: int
    no_good_index: int
    rows_examined: int


@dataclass(frozen=True)
class TableStat:
    """INNODB_SYS_TABLESTATS of one table (``name``: db/table)."""

    name: str
    rows: int
    modified: int
    auto_recalc_off: bool


@dataclass
class Snapshot:
    """Digests and table statistics at one moment (``at``: time.monotonic())."""

    digests: dict[str, Digest]
    tables: dict[str, TableStat]
    settings: dict[str, str]
    at: float


@dataclass(frozen=True)
class Trx:
    """An InnoDB transaction with its connection: idle ("Sleep") or running, ages in seconds."""

    trx_id: str
    thread: int
    state: str
    age_s: float
    command: str
    idle_s: float
    query: str
    rows_locked: int
    tables_locked: int

    def describe(self) -> str:
        """One line: thread, state, age, statement."""
        idle = f"idle (Sleep) for {self.idle_s:,.0f} s in it" if self.command == "Sleep" else f"running {self.command}"
        q = f", statement {clip(self.query, 120)!r}" if self.query else ""
        return (
            f"thread {self.thread}: transaction {self.trx_id} open {self.age_s:,.0f} s, {idle}, "
            f"{self.rows_locked:,} row lock(s) on {self.tables_locked} table(s){q}"
        )


def connect(dsn: str, database: str | None) -> pymysql.connections.Connection:
    """An autocommit PyMySQL connection from a ``mysql://`` DSN (``database`` replaces its database)."""
    kwargs: dict[str, Any] = parse_mysql_dsn(dsn)
    if database:
        kwargs["database"] = database
    return pymysql.connect(**kwargs, connect_timeout=5, autocommit=True)


def current_database(conn: pymysql.connections.Connection) -> str:
    """The connection's default schema ("" without one: the detectors then read every schema)."""
    rows = _rows(conn, "SELECT DATABASE()")
    return str(rows[0][0] or "") if rows else ""


def first_row(dsn: str, database: str | None, query: str) -> dict[str, Any] | None:
    """The first row of a read-only ``query`` run with ``database`` as the default schema (None: the DSN's),
    by column name, plus ``database``: the default schema it ran with; None when it returns no row.

    Raises:
        pymysql.MySQLError: the server does not connect or the query fails.
    """
    conn = connect(dsn, database)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION TRANSACTION READ ONLY")  # evidence only: the query may change nothing
            cur.execute(query)
            row = cur.fetchone()
            if row is None or cur.description is None:
                return None
            out = {d[0]: v for d, v in zip(cur.description, row, strict=True)}
        return {"database": current_database(conn), **out}
    finally:
        conn.close()


def _rows(conn: pymysql.connections.Connection, query: str, args: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(query, args)
        return list(cur.fetchall())


def snapshot(conn: pymysql.connections.Connection) -> Snapshot:
    """Digests of every schema (empty when performance_schema is off), settings, and the InnoDB table
    statistics of the connection's default database (every schema's when it has none) now.

    Table statistics are scoped like PostgreSQL's, which are per database: a table of another schema is not
    this workload's stale table (in the suite, another test's freshly loaded table, not yet recalculated by
    the background thread, was reported in a window on rc_test — CI, 2-core host, 2026-12-06)."""
    digests: dict[str, Digest] = {}
    try:
        for schema, dig, text, n, timer, noidx, nogood, rows in _rows(conn, DIGESTS_SQL):
            digests[f"{schema}/{dig}"] = Digest(
                str(schema), str(text or ""), int(n), int(timer), int(noidx), int(nogood), int(rows)
            )
    except pymysql.MySQLError as exc:
        log.info("rootcause.digests_unreadable", error=str(exc)[:200])
    tables = {}
    for name, rows, modified, opts in _rows(conn, TABLESTATS_SQL):
        tables[str(name)] = TableStat(str(name), int(rows), int(modified), "stats_auto_recalc=0" in str(opts).lower())
    names = ("performance_schema", "innodb_stats_auto_recalc", "innodb_stats_persistent")
    settings = {
        str(k).lower(): str(v) for k, v in _rows(conn, "SHOW GLOBAL VARIABLES WHERE Variable_name IN %s", (names,))
    }
    return Snapshot(digests, tables, settings, time.monotonic())


def history_length(conn: pymysql.connections.Connection) -> int | None:
    """trx_rseg_history_len (INNODB_METRICS), None when the counter is disabled or missing."""
    rows = _rows(
        conn, "SELECT COUNT, ENABLED FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len'"
    )
    if not rows or not int(rows[0][1]):
        return None
    return int(rows[0][0])


def transactions(conn: pymysql.connections.Connection) -> list[Trx]:
    """Open InnoDB transactions of other connections, oldest first."""
    return [
        Trx(str(a), int(b), str(c), float(d or 0), str(e), float(f or 0), str(g), int(h or 0), int(i or 0))
        for a, b, c, d, e, f, g, h, i in _rows(conn, TRX_SQL)
    ]


@dataclass
class LockSample:
    """One look at INNODB_LOCK_WAITS: waiting transactions and the root blockers (trx id → Trx)."""

    waiters: int
    roots: dict[str, Trx]


def lock_sample(conn: pymysql.connections.Connection) -> LockSample:
    """Who waits on whom now; a root blocker waits on nobody."""
    pairs = [(str(a), str(b)) for a, b in _rows(conn, WAITS_SQL)]
    if not pairs:
        return LockSample(0, {})
    waiting = {a for a, _ in pairs}
    roots = {b for _, b in pairs} - waiting
    trx = {x.trx_id: x for x in transactions(conn)}
    return LockSample(len(waiting), {r: trx[r] for r in roots if r in trx})


MyWatch = Watch[pymysql.connections.Connection, Snapshot, LockSample]
"""A MariaDB window: ``before`` is a :class:`Snapshot`, ``samples`` are :class:`LockSample`."""


def watch(dsn: str, database: str | None, interval_s: float = 1.0) -> MyWatch:
    """A (not yet started) :class:`~agenticdb.rootcause.watch.Watch` of the server: :func:`snapshot`
    before, :func:`lock_sample` every ``interval_s``; ``pymysql.MySQLError`` ends a read."""
    return Watch(lambda: connect(dsn, database), snapshot, lock_sample, pymysql.MySQLError, interval_s)


def real_table_name(conn: pymysql.connections.Connection, schema: str, table: str) -> str:
    """The table's name as stored: digest texts upper-case names that are also keywords (``EVENTS``), and
    table names are case-sensitive on Linux."""
    rows = _rows(
        conn,
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND lower(TABLE_NAME) = lower(%s)",
        (schema, table),
    )
    return str(rows[0][0]) if rows else table


def leading_index_columns(conn: pymysql.connections.Connection, schema: str, table: str) -> dict[str, str]:
    """Leading column → index name of every index of ``schema.table``."""
    rows = _rows(
        conn,
        "SELECT lower(COLUMN_NAME), INDEX_NAME FROM information_schema.STATISTICS "
        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND SEQ_IN_INDEX = 1",
        (schema, table),
    )
    return {str(c): str(n) for c, n in rows}


def _walk(node: object, stmt: str, out: dict[str, tuple[float, float, float, str]]) -> None:
    if isinstance(node, dict):
        name, est, act = node.get("table_name"), node.get("rows"), node.get("r_rows")
        if name and isinstance(est, int | float) and isinstance(act, int | float):
            # rows passing the condition: estimated rows x filtered %, read rows x r_filtered %
            est = est * float(node.get("filtered", 100) or 100) / 100
            act = act * float(node.get("r_filtered", 100) or 100) / 100
            factor = max(float(act), 1.0) / max(float(est), 1.0)
            factor = max(factor, 1.0 / factor)
            if factor > out.get(str(name), (0.0, 0.0, 0.0, ""))[0]:
                out[str(name)] = (factor, float(est), float(act), stmt)
        for v in node.values():
            _walk(v, stmt, out)
    elif isinstance(node, list):
        for v in node:
            _walk(v, stmt, out)


def plan_errors(
    conn: pymysql.connections.Connection, statements: list[str], timeout_s: float
) -> tuple[dict[str, tuple[float, float, float, str]], list[str], int]:
    """``ANALYZE FORMAT=JSON`` (MariaDB KB "ANALYZE Statement": executes it, reports ``rows`` estimated and
    ``r_rows`` read per table) of each SELECT in ``statements`` (``{r}`` → 1) with ``max_statement_time``:
    table → (worst factor, estimated, actual, statement), problems, statements analysed."""
    import json  # lazy: only with statements

    out: dict[str, tuple[float, float, float, str]] = {}
    problems: list[str] = []
    done = 0
    for raw in statements:
        stmt = raw.replace("{r}", "1").strip().rstrip(";")
        if not stmt.lower().startswith("select"):
            problems.append(f"not analysed (not a SELECT): {clip(stmt, 80)!r}")
            continue
        try:
            rows = _rows(conn, f"SET STATEMENT max_statement_time = {timeout_s:g} FOR ANALYZE FORMAT=JSON {stmt}")
        except pymysql.MySQLError as exc:
            problems.append(f"ANALYZE FORMAT=JSON failed ({clip(exc, 80)}): {clip(stmt, 80)!r}")
            continue
        _walk(json.loads(rows[0][0]), clip(stmt, 120), out)
        done += 1
    return out, problems, done


def plan_of(conn: pymysql.connections.Connection, statement: str) -> str:
    """``EXPLAIN`` of ``statement`` (``{r}`` → 1) as text rows: the plan before/after a remedy."""
    rows = _rows(conn, "EXPLAIN " + statement.replace("{r}", "1").strip().rstrip(";"))
    return "\n".join(" | ".join(str(x) for x in r) for r in rows)
