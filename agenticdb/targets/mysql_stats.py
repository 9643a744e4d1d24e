"""MySQL/MariaDB runtime statistics for bottleneck diagnosis.

Runtime state names (``read_state``; the heuristic planner reads them):
- counters ``global_status.<Variable_name>`` for every numeric SHOW GLOBAL STATUS value that is not a
  gauge: Innodb_buffer_pool_reads, Innodb_buffer_pool_read_requests, Innodb_buffer_pool_wait_free,
  Innodb_log_waits, Innodb_log_writes, Innodb_os_log_fsyncs, Innodb_data_fsyncs, Innodb_pages_written,
  Innodb_row_lock_waits, Innodb_row_lock_time, Innodb_lsn_current, Created_tmp_disk_tables,
  Created_tmp_tables, Threads_created, Connections, Questions, Com_commit, Handler_*,
  Table_open_cache_misses, Opened_tables, Sort_merge_passes, Select_full_join, …
- gauges ``global_status.<Variable_name>`` for point-in-time values (catalogs/mariadb.toml
  [status_gauges]): Threads_connected, Threads_running, Open_tables, Innodb_buffer_pool_pages_dirty,
  Innodb_buffer_pool_pages_free, Innodb_buffer_pool_pages_total, Innodb_row_lock_current_waits,
  Innodb_checkpoint_age (MariaDB), …
- counters ``innodb_metrics.<name>`` (information_schema.INNODB_METRICS, enabled, TYPE counter or
  status_counter); gauges ``innodb_metrics.<name>`` for TYPE value.
- gauges ``innodb.log_sequence_number``, ``innodb.checkpoint_age_bytes`` (SHOW ENGINE INNODB STATUS, LOG
  section: "Log sequence number" − "Last checkpoint at"), ``variables.max_connections``,
  ``variables.innodb_buffer_pool_size``, ``variables.innodb_log_file_size``,
  ``variables.innodb_redo_log_capacity`` (bytes; MySQL 8.0.30+, else log_file_size × files_in_group).

Read on demand only (``read_memory_tables``, ``MySQLTarget.rule_gauges``; not in a runtime sample: a scan of
information_schema.TABLES opens every table's metadata, slow on a server with many tables):
- gauges ``memory_tables.count`` and ``memory_tables.largest_bytes``: the application's MEMORY-engine
  tables (information_schema.TABLES, system schemas left out) and the largest DATA_LENGTH + INDEX_LENGTH
  among them, in bytes (0 without any); max_heap_table_size caps each such table when it is created,
  altered, truncated or reopened after a restart (MariaDB KB, MEMORY Storage Engine; max_heap_table_size).
  Only the validator rule mysql.max_heap_table_size-memory-tables reads them, when a change lowers it. An
  account without a table privilege on ``*.*`` sees only its own schemas' tables there: the gauges are then
  unknown (``GaugeUnknown``, :func:`unseen_tables`), never an undercount.
- gauges ``data.innodb_bytes_seen`` and ``data.innodb_tables_seen`` (``read_data_size``): the InnoDB data
  this account can see, the sum of DATA_LENGTH + INDEX_LENGTH (bytes) over information_schema.TABLES, system
  schemas left out, and how many tables that is; ``data.innodb_tables`` the application's InnoDB tables the
  data dictionary holds (information_schema.INNODB_SYS_TABLES on MariaDB, INNODB_TABLES on MySQL 8: every
  table whatever the account's grants, PROCESS privilege needed; partitions counted once, left out when not
  readable). information_schema.TABLES lists only the tables the account holds a privilege on (MariaDB KB,
  Information Schema TABLES Table), so the sum is the data size only when the two counts agree. InnoDB's
  DATA_LENGTH is its statistics' page count (as fresh as the last ANALYZE or automatic recalculation).
  The opening reads them to size the buffer pool (``agenticdb.planner.opening_values.with_data_size``).

Sources: MariaDB KB "Server Status Variables", "Information Schema INNODB_METRICS Table", "SHOW ENGINE
INNODB STATUS"; MySQL 8.0 manual 5.1.10 "Server Status Variables".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pymysql
import structlog

from agenticdb.errors import GaugeUnknown
from agenticdb.models import RuntimeState
from agenticdb.targets.base import TargetError
from agenticdb.targets.mysql_catalog import load_data

log = structlog.get_logger(__name__)


def fetch_one(cur: pymysql.cursors.Cursor, sql: str) -> tuple[Any, ...]:
    """Run ``sql`` (a SELECT of server variables or a SHOW that answers one row) and return its row.

    Raises:
        TargetError: the server answered no row.
    """
    cur.execute(sql)
    row = cur.fetchone()
    if row is None:
        raise TargetError(f"{sql!r} returned no row")
    return tuple(row)


_LSN_RE = re.compile(r"^Log sequence number\s+(\d+)", re.M)
_CKPT_RE = re.compile(r"^Last checkpoint at\s+(\d+)", re.M)


def read_state(conn: pymysql.connections.Connection, kind: str, variables: set[str]) -> RuntimeState:
    """One sample of counters and gauges over ``conn``; ``kind`` is "mariadb" or "mysql" and
    ``variables`` the server's known variable names (redo-log capacity is read from whichever exists)."""
    data = load_data()
    state = RuntimeState()
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS")
        status = cur.fetchall()
    for name, value in status:
        try:
            num = float(value)
        except (TypeError, ValueError):
            continue
        (state.gauges if data.is_gauge(name) else state.counters)[f"global_status.{name}"] = num
    enabled = "ENABLED = 1" if kind == "mariadb" else "STATUS = 'enabled'"
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(f"SELECT NAME, TYPE, COUNT FROM information_schema.INNODB_METRICS WHERE {enabled}")
        metrics = list(cur.fetchall())
    for row in metrics:
        bucket = state.gauges if str(row["TYPE"]).lower() == "value" else state.counters
        bucket[f"innodb_metrics.{row['NAME']}"] = float(row["COUNT"] or 0)
    with conn.cursor() as cur:
        text = str(fetch_one(cur, "SHOW ENGINE INNODB STATUS")[2])
    lsn, ckpt = _LSN_RE.search(text), _CKPT_RE.search(text)
    if lsn:
        state.gauges["innodb.log_sequence_number"] = float(lsn.group(1))
        if ckpt:
            state.gauges["innodb.checkpoint_age_bytes"] = float(int(lsn.group(1)) - int(ckpt.group(1)))
    names = ["max_connections", "innodb_buffer_pool_size", "innodb_log_file_size"]
    extra: list[str] = [n for n in ("innodb_redo_log_capacity", "innodb_log_files_in_group") if n in variables]
    with conn.cursor() as cur:
        answer = fetch_one(cur, "SELECT " + ", ".join(f"@@GLOBAL.{n}" for n in names + extra))
        values = dict(zip(names + extra, answer, strict=True))
    for n in names:
        state.gauges[f"variables.{n}"] = float(values[n])
    capacity = values.get("innodb_redo_log_capacity") or (
        float(values["innodb_log_file_size"]) * float(values.get("innodb_log_files_in_group") or 1)
    )
    state.gauges["variables.innodb_redo_log_capacity"] = float(capacity)
    return state


MEMORY_TABLE_GAUGES = ("memory_tables.count", "memory_tables.largest_bytes")
"""The gauges :func:`read_memory_tables` answers (on demand, never in :func:`read_state`)."""


TABLE_PRIVILEGES = frozenset(
    {
        "SELECT",
        "INSERT",
        "UPDATE",
        "DELETE",
        "CREATE",
        "DROP",
        "REFERENCES",
        "INDEX",
        "ALTER",
        "CREATE VIEW",
        "SHOW VIEW",
        "TRIGGER",
        "DELETE HISTORY",
    }
)
"""The table-level privileges (MariaDB KB "GRANT", Table Privileges; mysql.tables_priv.Table_priv): one of them
held on ``*.*`` makes every table visible in information_schema.TABLES, which lists only the tables the account
holds some privilege on (MariaDB KB "Information Schema TABLES Table", "SHOW TABLES")."""


def unseen_tables(conn: pymysql.connections.Connection) -> str:
    """Why information_schema.TABLES may not list every schema's tables to this connection's account ("" when
    it does): the account (CURRENT_USER()) holds no table-level privilege on ``*.*``
    (information_schema.USER_PRIVILEGES: "the database, table and column privileges returned here are the ones
    granted on all databases and tables", MariaDB KB "Information Schema USER_PRIVILEGES Table"). The
    least-privilege role of ``agenticdb setup-role`` holds none (SUPER, PROCESS, … only): another schema's
    tables are invisible to it (MariaDB 10.11.19 here: an application's MEMORY table was not listed).
    Privileges held through a role or on every schema by a wildcard are not counted (the answer is then
    "may not list", never the reverse).

    Raises:
        pymysql.MySQLError: the server refused the query.
    """
    with conn.cursor() as cur:
        user = str(fetch_one(cur, "SELECT CURRENT_USER()")[0])
        name, _, host = user.rpartition("@")
        cur.execute(
            "SELECT PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = %s",
            (f"'{name}'@'{host}'",),
        )
        held = {str(r[0]).upper() for r in cur.fetchall()}
    if held & TABLE_PRIVILEGES:
        return ""
    account = f"'{name}'@'{host}'"
    return (
        f"the account {account} holds no table privilege on *.* (information_schema.USER_PRIVILEGES), and "
        "information_schema.TABLES lists only the tables an account holds a privilege on (MariaDB KB, "
        "Information Schema TABLES Table), so another schema's MEMORY tables are invisible to it; "
        f"GRANT SHOW VIEW ON *.* TO {account} (table metadata and view definitions, no rows) or validate as "
        "an account that holds a table privilege on *.*"
    )


def read_memory_tables(conn: pymysql.connections.Connection) -> dict[str, float]:
    """``memory_tables.count`` and ``memory_tables.largest_bytes`` (bytes) of the application's MEMORY tables
    now (see the module docstring): one query of information_schema.TABLES, made only when the account sees
    every schema's tables (:func:`unseen_tables`).

    Raises:
        GaugeUnknown: the account may not see every schema's tables (a count would undercount; reason
            per gauge, from :func:`unseen_tables`).
        pymysql.MySQLError: the server refused a query.
    """
    why = unseen_tables(conn)
    if why:
        raise GaugeUnknown({n: why for n in MEMORY_TABLE_GAUGES})
    with conn.cursor() as cur:
        count, largest = fetch_one(cur, _MEMORY_TABLES)
    return {"memory_tables.count": float(count or 0), "memory_tables.largest_bytes": float(largest or 0)}


_MEMORY_TABLES = (
    "SELECT COUNT(*), COALESCE(MAX(DATA_LENGTH + INDEX_LENGTH), 0) FROM information_schema.TABLES "
    "WHERE ENGINE = 'MEMORY' AND TABLE_TYPE = 'BASE TABLE' "
    "AND TABLE_SCHEMA NOT IN ('information_schema', 'performance_schema', 'mysql', 'sys')"
)
"""The application's MEMORY tables: how many, and the largest one's data + index bytes."""


DATA_SIZE_GAUGES = ("data.innodb_bytes_seen", "data.innodb_tables_seen", "data.innodb_tables")
"""The gauges :func:`read_data_size` answers (on demand, never in :func:`read_state`)."""

_SYSTEM = "('information_schema', 'performance_schema', 'mysql', 'sys')"
_INNODB_SEEN = (
    "SELECT COALESCE(SUM(DATA_LENGTH + INDEX_LENGTH), 0), COUNT(*) FROM information_schema.TABLES "
    f"WHERE ENGINE = 'InnoDB' AND TABLE_TYPE <> 'TEMPORARY' AND TABLE_SCHEMA NOT IN {_SYSTEM}"
)
"""The InnoDB data and index bytes of the tables this account sees, and how many tables."""


def _dictionary_sql(kind: str) -> str:
    """The application's InnoDB tables in the data dictionary: names ``schema/table``, a partition
    ``schema/table#P#p0`` counted once, internal tables (``#sql`` intermediates, full-text ``FTS_`` auxiliaries)
    and system schemas left out."""
    view = "INNODB_SYS_TABLES" if kind == "mariadb" else "INNODB_TABLES"
    return (
        f"SELECT COUNT(DISTINCT substring_index(NAME, '#', 1)) FROM information_schema.{view} "
        "WHERE NAME LIKE '%/%' AND NAME NOT LIKE '%/#sql%' AND NAME NOT LIKE '%/FTS\\_%' "
        f"AND substring_index(NAME, '/', 1) NOT IN {_SYSTEM}"
    )


def read_data_size(conn: pymysql.connections.Connection, kind: str) -> dict[str, float]:
    """``data.innodb_bytes_seen`` (bytes), ``data.innodb_tables_seen`` and ``data.innodb_tables`` (see the
    module docstring); ``kind`` "mariadb" or "mysql". The dictionary's count is left out when the server
    refuses it (no PROCESS privilege): the caller cannot then tell whether every table was seen.

    Raises:
        pymysql.MySQLError: the server refused the information_schema.TABLES query.
    """
    with conn.cursor() as cur:
        size, seen = fetch_one(cur, _INNODB_SEEN)
    got = {"data.innodb_bytes_seen": float(size or 0), "data.innodb_tables_seen": float(seen or 0)}
    try:
        with conn.cursor() as cur:
            (known,) = fetch_one(cur, _dictionary_sql(kind))
    except pymysql.MySQLError:
        return got
    return got | {"data.innodb_tables": float(known or 0)}


def read_rule_gauges(
    connect: Callable[[], pymysql.connections.Connection], kind: str, names: list[str]
) -> dict[str, float]:
    """The on-demand gauges of ``names`` (``MySQLTarget.rule_gauges``): ``memory_tables.*``
    (:func:`read_memory_tables`) and ``data.innodb_*`` (:func:`read_data_size`) when ``names`` asks for one
    (scans of information_schema.TABLES, too slow on a server with many tables for every runtime sample),
    over ``connect()``; ``kind`` is "mariadb" or "mysql". A read the server refuses or cannot answer adds
    nothing (logged ``target.rule_gauges_unread``; the gauge is then unknown).

    Raises:
        GaugeUnknown: the account may not see every schema's MEMORY tables (:func:`unseen_tables`).
    """
    got: dict[str, float] = {}
    readers: tuple[tuple[tuple[str, ...], Callable[[Any], dict[str, float]]], ...] = (
        (MEMORY_TABLE_GAUGES, read_memory_tables),
        (DATA_SIZE_GAUGES, lambda conn: read_data_size(conn, kind)),
    )
    for gauges, read in readers:
        if not set(names) & set(gauges):
            continue
        try:
            got |= read(connect())
        except pymysql.MySQLError as exc:
            log.warning("target.rule_gauges_unread", names=names, error=str(exc))
    return got
