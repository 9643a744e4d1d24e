"""PostgreSQL runtime statistics for bottleneck diagnosis: one query over the cumulative statistics views.

Sources: PostgreSQL 15 manual, 28.2 The Cumulative Statistics System (pg_stat_database, pg_stat_bgwriter,
pg_stat_wal, pg_stat_activity, pg_locks); PostgreSQL 16 manual 28.2.13 pg_stat_io; PostgreSQL 17 release
notes (pg_stat_checkpointer).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from agenticdb.connfault import describe_fault
from agenticdb.host import pgss
from agenticdb.models import RuntimeState
from agenticdb.units.text import clip

_DB_COUNTERS = (
    "xact_commit",
    "xact_rollback",
    "blks_read",
    "blks_hit",
    "tup_returned",
    "tup_fetched",
    "tup_inserted",
    "tup_updated",
    "tup_deleted",
    "temp_files",
    "temp_bytes",
    "deadlocks",
    "blk_read_time",
    "blk_write_time",
)
_BGWRITER_COUNTERS = (
    "checkpoints_timed",
    "checkpoints_req",
    "checkpoint_write_time",
    "checkpoint_sync_time",
    "buffers_checkpoint",
    "buffers_clean",
    "maxwritten_clean",
    "buffers_backend",
    "buffers_backend_fsync",
    "buffers_alloc",
)
_WAL_COUNTERS = (
    "wal_records",
    "wal_fpi",
    "wal_bytes",
    "wal_buffers_full",
    "wal_write",
    "wal_sync",
    "wal_write_time",
    "wal_sync_time",
)
# One-row statistics views: (view, first major that has it, counter prefix, {view column: counter}).
# PostgreSQL 17 moved the checkpoint columns of pg_stat_bgwriter to pg_stat_checkpointer (17 release
# notes); they keep their pg_stat_bgwriter.* names so deltas compare across versions. pg_stat_wal is
# PG14+ (PostgreSQL 14 manual, 28.2.12 pg_stat_wal). Columns a version lacks are skipped.
_STAT_VIEWS: tuple[tuple[str, int, str, dict[str, str]], ...] = (
    ("pg_stat_bgwriter", 0, "pg_stat_bgwriter", {c: c for c in _BGWRITER_COUNTERS}),
    (
        "pg_stat_checkpointer",
        17,
        "pg_stat_bgwriter",
        {
            "num_timed": "checkpoints_timed",
            "num_requested": "checkpoints_req",
            "write_time": "checkpoint_write_time",
            "sync_time": "checkpoint_sync_time",
            "buffers_written": "buffers_checkpoint",
        },
    ),
    ("pg_stat_wal", 14, "pg_stat_wal", {c: c for c in _WAL_COUNTERS}),
)
_PG_STAT_IO_SINCE = 16  # PostgreSQL 16 manual, 28.2.13 pg_stat_io
_IO_KEYS = ("backend_type", "object", "context", "op_bytes")


def state_query(major: int) -> tuple[str, list[tuple[str, dict[str, str]]]]:
    """The statistics query for server major version ``major`` and the (prefix, columns) of the one-row
    views it reads, in the order their rows follow the fixed columns."""
    views = [(prefix, cols) for view, since, prefix, cols in _STAT_VIEWS if major >= since]
    parts = [
        "(SELECT to_jsonb(d) FROM (SELECT "
        + ", ".join(f"sum({c})::float8 AS {c}" for c in _DB_COUNTERS)
        + " FROM pg_stat_database) d)",
        "(SELECT jsonb_agg(to_jsonb(i)) FROM pg_stat_io i)" if major >= _PG_STAT_IO_SINCE else "NULL::jsonb",
        # Client sessions other than ours; idle_in_transaction includes "(aborted)".
        "(SELECT jsonb_build_object('total', count(*), "
        "'active', count(*) FILTER (WHERE state = 'active'), "
        "'idle_in_transaction', count(*) FILTER (WHERE state LIKE 'idle in transaction%')) "
        "FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid())",
        "(SELECT jsonb_build_object('waiting', count(*) FILTER (WHERE NOT granted), 'total', count(*)) "
        "FROM pg_locks WHERE pid IS DISTINCT FROM pg_backend_pid())",
        "(SELECT sum(pg_database_size(oid))::float8 FROM pg_database)",
        "current_setting('max_connections')::float8",
        "(SELECT setting::float8 * current_setting('block_size')::float8 FROM pg_settings "
        "WHERE name = 'shared_buffers')",
        # Waits of busy sessions and background workers; idle loops (Activity) and idle clients
        # (Client:ClientRead while state = idle) say nothing about a bottleneck.
        "(SELECT jsonb_object_agg(k, n) FROM (SELECT wait_event_type || ':' || wait_event AS k, "
        "count(*) AS n FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND wait_event IS NOT NULL "
        "AND wait_event_type <> 'Activity' AND coalesce(state, '') <> 'idle' GROUP BY 1) x)",
        # what capacity settings must keep room for (validators/postgresql.toml [[capacity]])
        "jsonb_build_object('pg_prepared_xacts', (SELECT count(*) FROM pg_prepared_xacts), "
        "'pg_replication_slots', (SELECT count(*) FROM pg_replication_slots), "
        "'pg_replication_slots.logical', (SELECT count(*) FROM pg_replication_slots WHERE slot_type = 'logical'), "
        "'pg_stat_replication', (SELECT count(*) FROM pg_stat_replication))",
        # the main shared memory area the server allocated (PostgreSQL 15+, MB; manual 20.15 Preset Options)
        "(SELECT setting::float8 * 1048576 FROM pg_settings WHERE name = 'shared_memory_size')",
        *(f"(SELECT to_jsonb(v) FROM {view} v)" for view, since, _, _ in _STAT_VIEWS if major >= since),
    ]
    return "SELECT " + ",\n  ".join(parts), views


# JIT time per statement: pg_stat_statements has jit_*_time columns since PostgreSQL 15 (manual F.32,
# "jit_generation_time … jit_emission_time: total time spent by the statement on …"; times in ms). The
# view is cluster-wide: read in the workload's database it is filtered to that database's statements, so
# agenticdb's own statistics queries (in the target DSN's database) do not dilute the workload's JIT share.
_PGSS_JIT_SINCE = 15
PGSS_JIT_QUERY = (
    "SELECT coalesce(sum(jit_generation_time + jit_inlining_time + jit_optimization_time + jit_emission_time), 0)"
    "::float8, coalesce(sum(total_exec_time), 0)::float8, coalesce(sum(jit_functions), 0)::float8 "
    "FROM pg_stat_statements"
)
_OWN_DATABASE = " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"


def pgss_jit_counters(conn: Any, major: int, own_database: bool = False) -> tuple[dict[str, float], str]:
    """``pg_stat_statements.{jit_time, total_exec_time}`` (ms) and ``.jit_functions`` (count) summed over
    the view (``own_database``: over the connected database's statements only), and "" — or {} and why they
    were not measured: a server older than 15, or the extension not preloaded, not created in the connected
    database or not readable there (``agenticdb.host.pgss.unreadable``)."""
    if major < _PGSS_JIT_SINCE:
        return {}, f"PostgreSQL {major} has no JIT times in pg_stat_statements (15 and later)"
    try:
        with conn.transaction():
            got = conn.execute(PGSS_JIT_QUERY + (_OWN_DATABASE if own_database else "")).fetchone()
    except psycopg.Error as exc:
        # why only when it failed: runtime_state samples this during measured runs, and the diagnosis is
        # three more queries per sample
        return {}, pgss.unreadable(conn) or f"not readable: {clip(exc, 200)}"
    jit, total, functions = got
    return {
        "pg_stat_statements.jit_time": float(jit),
        "pg_stat_statements.total_exec_time": float(total),
        "pg_stat_statements.jit_functions": float(functions),
    }, ""


def statement_counters(conn: Any, major: int, dsn: str, database: str | None) -> tuple[dict[str, float], str]:
    """:func:`pgss_jit_counters` of the workload's ``database``, read there (its statements only) through a
    connection of its own made from ``dsn``; without ``database``, on ``conn`` (the whole view). Returns the
    counters and "", or {} and why they were not measured (the database not reachable included)."""
    if database is None:
        return pgss_jit_counters(conn, major)
    try:
        with psycopg.connect(make_conninfo(dsn, dbname=database), autocommit=True, connect_timeout=5) as db:
            return pgss_jit_counters(db, major, own_database=True)
    except psycopg.Error as exc:
        return {}, f"not readable: database {database} not reachable: {describe_fault(exc)}"


def parse_state(row: tuple[Any, ...], views: list[tuple[str, dict[str, str]]]) -> RuntimeState:
    """RuntimeState from one row of :func:`state_query` (names as in ``PostgresTarget.runtime_state``)."""
    db, io, act, locks, size, max_conn, sb, waits, usage, shm, *view_rows = row
    counters = {f"pg_stat_database.{c}": float((db or {}).get(c) or 0.0) for c in _DB_COUNTERS}
    for (prefix, cols), data in zip(views, view_rows, strict=True):
        counters.update(
            {f"{prefix}.{name}": float(data[col]) for col, name in cols.items() if data and data.get(col) is not None}
        )
    for entry in io or []:
        key = ".".join(str(entry.get(k)) for k in _IO_KEYS[:3])
        counters.update(
            {
                f"pg_stat_io.{key}.{col}": float(val)
                for col, val in entry.items()
                if col not in _IO_KEYS and type(val) in (int, float)
            }
        )
    gauges = {f"pg_stat_activity.{k}": float(act[k]) for k in ("total", "active", "idle_in_transaction")}
    gauges |= {f"pg_locks.{k}": float(locks[k]) for k in ("waiting", "total")}
    gauges |= {
        "settings.max_connections": float(max_conn),
        "pg_database.size_bytes": float(size or 0.0),
        "settings.shared_buffers_bytes": float(sb or 0.0),
    }
    gauges |= {(view if "." in view else f"{view}.total"): float(n) for view, n in (usage or {}).items()}
    if shm is not None:
        gauges["settings.shared_memory_size_bytes"] = float(shm)
    return RuntimeState(counters=counters, gauges=gauges, wait_events={k: int(v) for k, v in (waits or {}).items()})
