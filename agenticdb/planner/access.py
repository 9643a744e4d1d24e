"""The workload's access pattern as the server counted it: sequential scans of whole tables or lookups.

A workload declares its class (``Fingerprint.workload_class``: pgbench and sysbench are "oltp", TPC-H is
"olap", a ``command`` workload is "olap" only when scored on total time). A command or live workload that
scans whole tables per statement is analytic in what it asks of the host (read-ahead, parallel scans)
whatever its objective. This module reads that from the last sample's counters:

- PostgreSQL (pg_stat_database): ``tup_returned`` counts live rows fetched by sequential scans plus index
  entries returned by index scans, ``tup_fetched`` the live rows fetched by index scans (PostgreSQL 15
  manual, 28.2.16 pg_stat_database), so ``tup_returned - tup_fetched`` is about the rows read by
  sequential scans. Index-only scans return entries without fetching rows and count on the sequential
  side; bitmap scans of lossy pages can fetch more rows than entries. The denominator is transactions
  (``xact_commit + xact_rollback``): one per statement under autocommit, several statements per
  transaction otherwise, so the figure is per transaction.
- MariaDB / MySQL (SHOW GLOBAL STATUS): ``Handler_read_rnd_next`` counts rows read by table scans;
  ``Handler_read_first`` counts full index scans, which InnoDB uses for ``SELECT count(*)`` and covering
  reads and whose rows are then counted by ``Handler_read_next`` (MariaDB KB, Server Status Variables).
  When most statements start a full index scan, ``Handler_read_next`` rows are scan rows too. The
  denominator is data statements (``Com_select + Com_insert + Com_update + Com_delete``, else
  ``Questions``). On MySQL ``Handler_read_rnd_next`` also counts reads of internal temporary tables.
"""

from __future__ import annotations

from agenticdb.models import StateDelta

SCAN_SHARE = 0.9
"""Share of the rows read that came from sequential scans, at or above which the workload scans."""
SCAN_ROWS_PER_STATEMENT = 10_000.0
"""Rows a statement (PostgreSQL: a transaction) reads by sequential scan on average, at or above which it
reads whole tables rather than a few pages (a 10 000-row table of 100-byte rows is about 1 MB). A sysbench
transaction of 14-18 statements reads a few hundred rows, far below it under either denominator."""
FULL_INDEX_SCANS_PER_STATEMENT = 0.5
"""MariaDB/MySQL: ``Handler_read_first`` per data statement at or above which ``Handler_read_next`` rows
are counted as scan rows (most statements walk a whole index)."""


def scan_figures(delta: StateDelta | None) -> tuple[float, float] | None:
    """``(share, rows_per_statement)`` of sequential-scan reads over the sample, or ``None`` when the
    sample has no row counters (a host-only sample, or no statement ran). ``share`` in [0, 1];
    ``rows_per_statement`` is per transaction on PostgreSQL, per data statement on MariaDB/MySQL."""
    if delta is None:
        return None
    t = delta.totals
    if "pg_stat_database.tup_returned" in t:
        returned = t.get("pg_stat_database.tup_returned", 0.0)
        fetched = t.get("pg_stat_database.tup_fetched", 0.0)
        statements = t.get("pg_stat_database.xact_commit", 0.0) + t.get("pg_stat_database.xact_rollback", 0.0)
        seq, total = max(returned - fetched, 0.0), returned
    elif "global_status.Handler_read_rnd_next" in t:
        g = {k: t.get(f"global_status.Handler_read_{k}", 0.0) for k in ("rnd_next", "first", "key", "next", "prev")}
        statements = sum(t.get(f"global_status.Com_{k}", 0.0) for k in ("select", "insert", "update", "delete"))
        statements = statements or t.get("global_status.Questions", 0.0)
        seq = g["rnd_next"]
        if statements > 0 and g["first"] / statements >= FULL_INDEX_SCANS_PER_STATEMENT:
            seq += g["next"]  # full index scans: InnoDB count(*) and covering reads
        total = g["rnd_next"] + g["key"] + g["next"] + g["prev"]
    else:
        return None
    if total <= 0 or statements <= 0:
        return None
    return seq / total, seq / statements


def observed_class(delta: StateDelta | None) -> str | None:
    """``"olap"`` when the last sample shows a scanning workload (at least :data:`SCAN_SHARE` of rows read
    by sequential scans and :data:`SCAN_ROWS_PER_STATEMENT` of them per statement), else ``None`` (the
    declared class stands)."""
    fig = scan_figures(delta)
    if fig is None:
        return None
    share, per_statement = fig
    return "olap" if share >= SCAN_SHARE and per_statement >= SCAN_ROWS_PER_STATEMENT else None


def workload_class(declared: str, delta: StateDelta | None) -> str:
    """The class the playbook's ``workload_classes`` filters use: the declared one, or ``"olap"`` when a
    declared OLTP/mixed workload measurably scans whole tables (:func:`observed_class`)."""
    if declared == "olap":
        return declared
    return observed_class(delta) or declared
