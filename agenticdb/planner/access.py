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

from dataclasses import dataclass

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
SHARE_BAND = 0.05
"""Half-width of the borderline band around :data:`SCAN_SHARE` (shares from 0.85 to 0.95). Judgement: a short
window (``agenticdb advise`` watches 5 s by default) holds few statements, so one statement more or less of a
kind moves the share; inside the band a call is neither class, and two windows of one workload on either side
of the line no longer name two classes."""
ROWS_BAND = 2.0
"""Factor of the borderline band around :data:`SCAN_ROWS_PER_STATEMENT` (5 000 to 20 000 rows per statement).
Judgement, as :data:`SHARE_BAND`: in a short window a few long statements decide the mean, and PostgreSQL counts
a statement's rows when its backend flushes its statistics (at transaction end, at most once a second:
PGSTAT_MIN_INTERVAL in PostgreSQL 15's src/backend/utils/activity/pgstat.c), so one window may hold a scan's
rows and the next not."""


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


@dataclass(frozen=True)
class ClassCall:
    """The workload class a sample supports, with its evidence.

    Attributes:
        cls: the class used ("oltp" | "olap" | "mixed"): ``declared``; "olap" when the sample scans whole tables
            beyond both bands; "mixed" when a figure lies inside its band (borderline between ``declared``
            and "olap") while neither rules scanning out.
        declared: the workload's declared class.
        figures: :func:`scan_figures` of the sample (share, rows per statement), or None.
        borderline: a figure lies inside its band (:data:`SHARE_BAND`, :data:`ROWS_BAND`).
    """

    cls: str
    declared: str
    figures: tuple[float, float] | None
    borderline: bool = False

    def text(self, basis: str = "declared") -> str:
        """One line for a DBA: the class, the evidence with each threshold and the margin to it, and the
        thresholds' source; ``basis`` says where the non-observed class came from ("declared", or advise's
        "assumed: no workload is known"). E.g. ``workload class olap: 97% of rows read by sequential scans
        (threshold 90%, +7 points), 2,000,000 rows per statement (threshold 10,000, ×200) (…source)``."""
        src = "agenticdb.planner.access SCAN_SHARE / SCAN_ROWS_PER_STATEMENT, bands SHARE_BAND / ROWS_BAND"
        if self.figures is None:
            return f"workload class {self.cls} ({basis}): the window has no row counters to tell scans from lookups"
        share, rows = self.figures
        factor = rows / SCAN_ROWS_PER_STATEMENT
        margin = f"×{factor:,.0f}" if factor >= 10 else f"×{factor:.2g}"
        evidence = (
            f"{share:.0%} of rows read by sequential scans (threshold {SCAN_SHARE:.0%}, "
            f"{(share - SCAN_SHARE) * 100:+.0f} points), {rows:,.0f} rows per statement "
            f"(threshold {SCAN_ROWS_PER_STATEMENT:,.0f}, {margin})"
        )
        if self.declared == "olap":
            head = f"workload class olap ({basis})"
        elif self.borderline:
            head = f"workload class borderline between {self.declared} and olap, treated as {self.cls}"
        else:
            head = f"workload class {self.cls}" + (
                f" ({basis}; no whole-table scans)" if self.cls == self.declared else ""
            )
        return f"{head}: {evidence} ({src})"


def class_call(declared: str, delta: StateDelta | None) -> ClassCall:
    """The class for ``declared`` and the sample ``delta`` (:class:`ClassCall`). Scanning needs both figures
    at or above their thresholds (:func:`observed_class`); a figure within its band of the threshold, when
    the other does not rule scanning out, is borderline and the class "mixed" rather than whichever side of
    the line a short window happened to fall. A declared "olap" stays. Never raises."""
    fig = scan_figures(delta)
    if declared == "olap" or fig is None:
        return ClassCall(declared, declared, fig)
    share, rows = fig
    clear_share = share >= min(SCAN_SHARE + SHARE_BAND, 1.0)
    clear_rows = rows >= SCAN_ROWS_PER_STATEMENT * ROWS_BAND
    ruled_out = share < SCAN_SHARE - SHARE_BAND or rows < SCAN_ROWS_PER_STATEMENT / ROWS_BAND
    if ruled_out:
        return ClassCall(declared, declared, fig)
    if clear_share and clear_rows:
        return ClassCall("olap", declared, fig)
    return ClassCall("mixed", declared, fig, borderline=True)


def workload_class(declared: str, delta: StateDelta | None) -> str:
    """The class the playbook's ``workload_classes`` filters use: the declared one, ``"olap"`` when a
    declared OLTP/mixed workload measurably scans whole tables beyond the bands, "mixed" when borderline
    (:func:`class_call`)."""
    return class_call(declared, delta).cls


def data_bytes(delta: StateDelta | None) -> float | None:
    """The databases' size (bytes) a sample read: PostgreSQL's ``pg_database.size_bytes`` (the sum over
    pg_database), MariaDB's ``data.size_bytes``; None when neither was read (or read as 0)."""
    gauges = delta.gauges if delta is not None else {}
    data = gauges.get("pg_database.size_bytes") or gauges.get("data.size_bytes")
    return float(data) if data else None


CACHE_FIT = 0.40
"""Share of the memory limit beyond which an analytic workload's data is left to the kernel page cache: the
playbook's shared_buffers limit (PostgreSQL 15 manual 20.4.1: more than 40 % of RAM is unlikely to work
better)."""


def page_cache_serves(workload_class: str, data_bytes: float | None, memory_bytes: float, family: str) -> str | None:
    """Why a larger buffer cache is not offered to this workload, or None when it may be.

    An analytic workload (``workload_class`` "olap", as :func:`workload_class` calls it) whose data
    (``data_bytes``, the databases' measured size; None: not measured, no verdict) exceeds :data:`CACHE_FIT` of
    the server's memory limit (``memory_bytes``) is read by scans of tables larger than a quarter of
    shared_buffers, which go through a 256 kB ring (PostgreSQL ``heapam.c`` ``initscan``, buffer manager
    README), so more shared buffers keep none of their pages and take page cache, and a larger
    effective_cache_size prices index fetches as cached when the scans evict the cache. Measured on pg-tpch
    (TPC-H SF 1 under 1 GiB, benchmarks/README.md): shared_buffers 128 → 256 MB alone −23 %; effective_cache_size
    4 GB → 128 MB kept at +96 % [+64 %, +133 %] (2026-12-07). One rule for the opening's limits set
    (``opening_limits``) and the heuristic planner's buffer_cache moves (``move_builders``).

    PostgreSQL only (``family`` "postgresql"; any other: None): InnoDB has no scan ring and since MariaDB 10.6
    reads its data files with O_DIRECT (innodb_flush_method's default, MariaDB KB "InnoDB System Variables";
    the mysql playbook's innodb_flush_method entry), so the page cache serves none of its misses and the
    buffer pool is the only cache a larger one could take from.
    """
    if (
        family != "postgresql"
        or workload_class != "olap"
        or data_bytes is None
        or data_bytes <= CACHE_FIT * memory_bytes
    ):
        return None
    gib = 1024**3
    return (
        f"an analytic workload's data ({data_bytes / gib:.2f} GiB) is larger than 40 % of the memory limit "
        f"({memory_bytes / gib:.2f} GiB): its scans read through the kernel page cache, so a larger buffer cache "
        "takes page cache and prices index fetches as cached (pg-tpch: shared_buffers 128 → 256 MB alone −23 %)"
    )
