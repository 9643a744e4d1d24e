"""The DBMS signal tables of the bottleneck diagnosis: PostgreSQL's and MySQL/MariaDB's rules (split from
diagnosis.py, issue 37).

Each rule names its hypothesis, the reader of its value and evidence line, its ramp ``lo``/``hi``, weight
and manual source. The readers' volume gates are data (catalogs/diagnosis-thresholds.toml).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from agenticdb.models import Bottleneck, RuntimeProfile
from agenticdb.planner.diagnosis_signals import Signal, View, fmt, ratio
from agenticdb.planner.diagnosis_thresholds import t

DBMS_HYPOTHESES = (
    Bottleneck.buffer_cache,
    Bottleneck.wal_fsync,
    Bottleneck.checkpoint,
    Bottleneck.io_queue,
    Bottleneck.cpu,
    Bottleneck.lock_contention,
    Bottleneck.temp_spill,
    Bottleneck.connections,
)


Reading = tuple[float, str, float]
"""What a signal read from the sample: (value, evidence line, volume gate)."""


@dataclass(frozen=True)
class Sample:
    """What every reader gets: the delta's view, transactions in the sample, the profile, and for a query set's
    run the queries it executed (``queries``; 0 for a workload of transactions)."""

    v: View
    tx: float | None
    profile: RuntimeProfile
    queries: int = 0

    def per_ktx(self, count: float) -> float:
        assert self.tx
        return count / self.tx * 1000.0


@dataclass(frozen=True)
class Rule:
    """One row of a signal table: which hypothesis a signal supports, where its value comes from
    (``read``: None when the counters are missing), its ramp ``lo``/``hi`` and weight (see the module
    docstring), and the manual page the threshold is anchored on."""

    bottleneck: Bottleneck
    read: Callable[[Sample], Reading | None]
    lo: float
    hi: float
    weight: float = 1.0
    source: str = ""


def table_signals(rules: Iterable[Rule], s: Sample) -> dict[Bottleneck, list[Signal]]:
    """The signals of every DBMS hypothesis from one table, in the table's order."""
    out: dict[Bottleneck, list[Signal]] = {b: [] for b in DBMS_HYPOTHESES}
    for rule in rules:
        got = rule.read(s)
        if got is not None:
            value, text, gate = got
            out[rule.bottleneck].append(Signal(text, value, rule.lo, rule.hi, rule.weight, gate))
    return out


def _wait(label: str, match: Callable[[str], bool]) -> Callable[[Sample], Reading | None]:
    """Share of busy wait-event samples matching ``match``."""

    def read(s: Sample) -> Reading | None:
        got = s.v.wait_share(match)
        if got is None:
            return None
        share, hit, denom = got
        return share, f"{label} wait events = {hit}/{denom} busy samples ({share:.2f})", 1.0

    return read


def _per_ktx(counter: str, label: str) -> Callable[[Sample], Reading | None]:
    """``counter`` per 1000 transactions of the sample; a query set's run (TPC-H: each query once, autocommitted,
    no transaction of its own) per 1000 of the queries it executed, said so with the count — the same ramp, as each
    of its queries commits as one transaction (MariaDB's Com_commit counts none of them)."""

    def read(s: Sample) -> Reading | None:
        n = s.v.total(counter)
        if n is not None and s.queries:
            k = n / s.queries * 1000.0
            return k, f"{label} = {k:.2f} per 1000 queries ({fmt(n)} in the query set's {s.queries} queries)", 1.0
        if n is None or not s.tx:
            return None
        k = s.per_ktx(n)
        return k, f"{label} = {k:.2f} per 1000 transactions", 1.0

    return read


def _rate(counter: str, text: str) -> Callable[[Sample], Reading | None]:
    """``counter`` per second; ``text`` formats ``x`` (the rate) and ``f`` (the rate by ``fmt``)."""

    def read(s: Sample) -> Reading | None:
        x = s.v.rate(counter)
        return None if x is None else (x, text.format(x=x, f=fmt(x)), 1.0)

    return read


def _of_limit(label: str, used: str, limit: str) -> Callable[[Sample], Reading | None]:
    """Gauge ``used`` against gauge ``limit`` (connections against their maximum)."""

    def read(s: Sample) -> Reading | None:
        n, top = s.v.gauge(used), s.v.gauge(limit)
        if n is None or not top:
            return None
        return n / top, f"{label} = {fmt(n)}/{fmt(top)} ({n / top:.2f})", 1.0

    return read


# -------------------------------------------------------------------------------- PostgreSQL signals

_PG_WAL_WAITS = (
    "IO:WALSync",
    "IO:WALWrite",
    "LWLock:WALWrite",
    "LWLock:WALInsert",
    "IO:WALInitSync",
    "IO:WALInitWrite",
    "LWLock:WALBufMapping",
    "Timeout:CommitDelay",
)
_DB, _BG, _WAL, _PGSS = "pg_stat_database.", "pg_stat_bgwriter.", "pg_stat_wal.", "pg_stat_statements."


def _pg_miss(s: Sample) -> Reading | None:
    v = s.v
    rd, hit = v.total(_DB + "blks_read"), v.total(_DB + "blks_hit")
    if rd is None or hit is None or rd + hit <= 0:
        return None
    miss = rd / (rd + hit)
    text = f"blks_read/(blks_read+blks_hit) = {miss:.3f} {v.over} ({fmt(rd / v.seconds)} reads/s)"
    return miss, text, (rd / v.seconds) / t("pg_miss_gate_reads")


def _pg_backend_writes(s: Sample) -> Reading | None:
    writes = s.v.sum_totals([_BG + "buffers_checkpoint", _BG + "buffers_clean", _BG + "buffers_backend"])
    share = ratio(s.v.total(_BG + "buffers_backend"), writes)
    if share is None or not writes:
        return None
    text = f"buffers_backend/(checkpoint+clean+backend) = {share:.2f} of {fmt(writes)} buffer writes"
    return share, text, writes / t("pg_backend_writes_gate")


def _pg_sync_time(s: Sample) -> Reading | None:
    syncs, sync_ms = s.v.total(_WAL + "wal_sync"), s.v.total(_WAL + "wal_sync_time")
    if not syncs or not sync_ms:
        return None
    avg = sync_ms / syncs
    return avg, f"wal_sync_time/wal_sync = {avg:.2f} ms per WAL fsync ({fmt(syncs / s.v.seconds)} fsyncs/s)", 1.0


def _pg_commit_delay(s: Sample) -> Reading | None:
    try:
        delay = float(s.profile.current_config.get("commit_delay", "0") or 0)
    except ValueError:
        delay = 0.0
    if delay <= 0 or not s.v.total(_DB + "xact_commit"):
        return None
    return 1.0, f"commit_delay = {fmt(delay)} µs is set (every commit may sleep before its WAL flush)", 1.0


def _pg_checkpoints(s: Sample) -> tuple[float, float] | None:
    req, timed = s.v.total(_BG + "checkpoints_req"), s.v.total(_BG + "checkpoints_timed")
    return None if req is None or timed is None else (req, timed)


def _pg_requested(s: Sample) -> Reading | None:
    got = _pg_checkpoints(s)
    if got is None:
        return None
    req, timed = got
    if req + timed <= 0:
        return 0.0, f"no checkpoint {s.v.over}", 1.0
    n = req + timed
    text = f"checkpoints_req/(req+timed) = {req / n:.2f} ({fmt(req)} requested, {fmt(timed)} timed) {s.v.over}"
    return req / n, text, req / t("pg_requested_checkpoints_gate")


def _pg_checkpoint_rate(s: Sample) -> Reading | None:
    got = _pg_checkpoints(s)
    if got is None or sum(got) <= 0:
        return None
    per_min = (got[0] + got[1]) / (s.v.seconds / 60.0)
    return per_min, f"checkpoints = {per_min:.2f} per minute", 1.0


def _pg_fpi(s: Sample) -> Reading | None:
    fpi, recs = s.v.total(_WAL + "wal_fpi"), s.v.total(_WAL + "wal_records")
    if fpi is None or not recs:
        return None
    return fpi / recs, f"wal_fpi/wal_records = {fpi / recs:.2f} full-page images per WAL record", 1.0


def _pg_backend_fsync(s: Sample) -> Reading | None:
    bfs = s.v.total(_BG + "buffers_backend_fsync")
    return None if bfs is None else (bfs, f"buffers_backend_fsync = {fmt(bfs)} {s.v.over}", 1.0)


def _pg_read_time(s: Sample) -> Reading | None:
    brt, rd = s.v.total(_DB + "blk_read_time"), s.v.total(_DB + "blks_read")
    if brt is None or not rd:
        return None
    return (
        brt / rd,
        f"blk_read_time/blks_read = {brt / rd:.2f} ms per read",
        rd / s.v.seconds / t("pg_read_time_gate_reads"),
    )


def _pg_temp_bytes(s: Sample) -> Reading | None:
    tb = s.v.total(_DB + "temp_bytes")
    if tb is None:
        return None
    mb_s = tb / s.v.seconds / 2**20
    return mb_s, f"temp_bytes = {mb_s:.2f} MiB/s {s.v.over}", 1.0


def _pg_lock_waiters(s: Sample) -> Reading | None:
    waiting, active = s.v.gauge("pg_locks.waiting"), s.v.gauge("pg_stat_activity.active")
    if waiting is None or not active:
        return None
    return waiting / active, f"pg_locks waiting/active backends = {fmt(waiting)}/{fmt(active)}", 1.0


def _pg_jit_share(s: Sample) -> Reading | None:
    """JIT compilation's share of statement execution time (pg_stat_statements, PostgreSQL 15+). Gate:
    statements that ran for at least a fifth of the sample's wall time, so a handful of ms means little."""
    jit, total = s.v.total(_PGSS + "jit_time"), s.v.total(_PGSS + "total_exec_time")
    if jit is None or not total or total <= 0:
        return None
    share = min(jit / total, 1.0)
    gate = total / (s.v.seconds * 1000.0 * t("pg_jit_gate_share"))
    return share, f"JIT compilation = {share:.0%} of statement execution time (pg_stat_statements) {s.v.over}", gate


_MONITORING = "PostgreSQL manual, Monitoring Database Activity (pg_stat_database, pg_stat_bgwriter)"
_WAL_CONFIG = "PostgreSQL manual, WAL Configuration"
_JIT_DOC = "PostgreSQL 15 manual, 32.2 When to JIT?; F.32 pg_stat_statements (jit_*_time, total_exec_time)"
_B = Bottleneck
PG_SIGNALS: tuple[Rule, ...] = (
    # blks_read: not found in shared buffers
    Rule(_B.buffer_cache, _pg_miss, 0.02, 0.2, source=_MONITORING),
    # weight < 1: a slow device also shows DataFileRead waits
    Rule(
        _B.buffer_cache,
        _wait("IO:DataFileRead+LWLock:BufferMapping", lambda k: k in ("IO:DataFileRead", "LWLock:BufferMapping")),
        0.15,
        0.5,
        0.7,
        "PostgreSQL manual, Wait Events (IO:DataFileRead)",
    ),
    # buffers_backend: backends evicting dirty pages themselves
    Rule(_B.buffer_cache, _pg_backend_writes, 0.3, 0.8, 0.6, _MONITORING),
    # commit waits on WAL flush; wal_buffers_full means wal_buffers too small
    Rule(_B.wal_fsync, _wait("WAL", lambda k: k in _PG_WAL_WAITS), 0.15, 0.5, source=_WAL_CONFIG),
    Rule(_B.wal_fsync, _per_ktx(_WAL + "wal_buffers_full", "pg_stat_wal.wal_buffers_full"), 1, 50, source=_WAL_CONFIG),
    Rule(_B.wal_fsync, _pg_sync_time, 1.0, 10.0, source=_WAL_CONFIG),
    # commit_delay + commit_siblings can cost throughput (docs/measurement.md: −39 %)
    Rule(_B.wal_fsync, _pg_commit_delay, 0.0, 1.0, 0.6, _WAL_CONFIG),
    # checkpoints_req > checkpoints_timed means max_wal_size is too small
    Rule(_B.checkpoint, _pg_requested, 0.3, 0.8, source=_WAL_CONFIG),
    Rule(_B.checkpoint, _pg_checkpoint_rate, 0.5, 2.0, 0.8, _WAL_CONFIG),
    # full-page images follow every checkpoint
    Rule(_B.checkpoint, _pg_fpi, 0.2, 0.6, 0.7, _WAL_CONFIG),
    # buffers_backend_fsync: the fsync request queue overflowed
    Rule(_B.checkpoint, _pg_backend_fsync, 0.0, 5.0, 0.8, _WAL_CONFIG),
    # read latency when track_io_timing is on
    Rule(_B.io_queue, _pg_read_time, 1.0, 10.0, source="PostgreSQL manual, Run-time Statistics (track_io_timing)"),
    # work_mem: sorts and hashes spill to temp files
    Rule(_B.temp_spill, _pg_temp_bytes, 1.0, 32.0, source="PostgreSQL manual, Resource Consumption (work_mem)"),
    Rule(_B.temp_spill, _per_ktx(_DB + "temp_files", "temp_files"), 1.0, 50.0, source=_MONITORING),
    Rule(
        _B.temp_spill,
        _wait("IO:BufFile*", lambda k: k.startswith("IO:BufFile")),
        0.1,
        0.4,
        source="PostgreSQL manual, Wait Events (IO:BufFileRead, IO:BufFileWrite)",
    ),
    # JIT compile time against execution time: the compilation costs more than it saves on short queries
    Rule(_B.cpu, _pg_jit_share, 0.05, 0.25, source=_JIT_DOC),
    # pg_locks.granted = false; the deadlocks counter
    Rule(
        _B.lock_contention,
        _wait("Lock:*", lambda k: k.startswith("Lock:") or k == "LWLock:LockManager"),
        0.1,
        0.4,
        source="PostgreSQL manual, Viewing Locks",
    ),
    Rule(_B.lock_contention, _pg_lock_waiters, 0.1, 0.5, source="PostgreSQL manual, Viewing Locks (pg_locks)"),
    Rule(_B.lock_contention, _rate(_DB + "deadlocks", "deadlocks = {x:.3f}/s"), 0.01, 0.2, 0.8, _MONITORING),
    Rule(
        _B.connections,
        _of_limit("pg_stat_activity.total/max_connections", "pg_stat_activity.total", "settings.max_connections"),
        0.75,
        0.95,
        source="PostgreSQL manual, Connections and Authentication (max_connections)",
    ),
)
"""PostgreSQL's signals, in the order their evidence is listed."""


# ------------------------------------------------------------------------------ MySQL/MariaDB signals

_GS, _VAR = "global_status.", "variables."


def _my_miss(s: Sample) -> Reading | None:
    v = s.v
    rd, req = v.total(_GS + "Innodb_buffer_pool_reads"), v.total(_GS + "Innodb_buffer_pool_read_requests")
    if rd is None or not req:
        return None
    text = f"Innodb_buffer_pool_reads/read_requests = {rd / req:.4f} {v.over} ({fmt(rd / v.seconds)} reads/s)"
    return rd / req, text, (rd / v.seconds) / t("my_miss_gate_reads")


def _my_checkpoint_age(s: Sample) -> Reading | None:
    age = s.v.gauge("innodb.checkpoint_age_bytes")
    cap = s.v.gauge(_VAR + "innodb_redo_log_capacity") or s.v.gauge(_VAR + "innodb_log_file_size")
    if age is None or not cap:
        return None
    text = f"checkpoint age/redo capacity = {fmt(age / 2**20)} MiB/{fmt(cap / 2**20)} MiB ({age / cap:.2f})"
    return age / cap, text, 1.0


def _my_redo_turns(s: Sample) -> Reading | None:
    """How many times a minute the redo log is written over: the LSN's advance (Innodb_lsn_current, bytes/s)
    against the redo capacity. A tiny redo log is flushed "furiously" before its checkpoint age can build up:
    at innodb_log_file_size 4M under 200-row UPDATEs (scenario mdb-redo-log-tiny, 2026-12-07) the age read 58 % of
    the capacity, below this table's 0.5–0.85 ramp's top, while the log turned over 225 times a minute."""
    rate = s.v.rate(_GS + "Innodb_lsn_current")
    cap = s.v.gauge(_VAR + "innodb_redo_log_capacity") or s.v.gauge(_VAR + "innodb_log_file_size")
    if rate is None or not cap:
        return None
    turns = rate * 60.0 / cap
    text = (
        f"redo written {fmt(rate / 2**20)} MiB/s against a {fmt(cap / 2**20)} MiB redo log: "
        f"written over {turns:.1f} times a minute"
    )
    return turns, text, 1.0


def _my_dirty(s: Sample) -> Reading | None:
    dirty, pages = s.v.gauge(_GS + "Innodb_buffer_pool_pages_dirty"), s.v.gauge(_GS + "Innodb_buffer_pool_pages_total")
    if dirty is None or not pages:
        return None
    return dirty / pages, f"Innodb_buffer_pool_pages_dirty/total = {dirty / pages:.2f}", 1.0


def _my_lock_time(s: Sample) -> Reading | None:
    waits, ms = s.v.total(_GS + "Innodb_row_lock_waits"), s.v.total(_GS + "Innodb_row_lock_time")
    if not waits or ms is None:
        return None
    return (
        ms / waits,
        f"Innodb_row_lock_time/waits = {ms / waits:.1f} ms per wait",
        waits / t("my_lock_time_gate_waits"),
    )


def _my_disk_tables(s: Sample) -> Reading | None:
    disk = s.v.total(_GS + "Created_tmp_disk_tables")
    if disk is None:
        return None
    return disk / s.v.seconds, f"Created_tmp_disk_tables = {disk / s.v.seconds:.2f}/s", 1.0


def _my_disk_share(s: Sample) -> Reading | None:
    disk, tmp = s.v.total(_GS + "Created_tmp_disk_tables"), s.v.total(_GS + "Created_tmp_tables")
    if disk is None or not tmp:
        return None
    return disk / tmp, f"Created_tmp_disk_tables/Created_tmp_tables = {disk / tmp:.2f}", disk / s.v.seconds


def _my_thread_cache(s: Sample) -> Reading | None:
    created, conns = s.v.total(_GS + "Threads_created"), s.v.total(_GS + "Connections")
    if created is None or not conns:
        return None
    text = f"Threads_created/Connections = {created / conns:.2f} ({fmt(conns / s.v.seconds)} connections/s)"
    return created / conns, text, conns / s.v.seconds / t("my_thread_cache_gate_connections")


def _my_table_cache(s: Sample) -> Reading | None:
    tcm = s.v.rate(_GS + "Table_open_cache_misses")
    if tcm is None:
        tcm = s.v.rate(_GS + "Opened_tables")
    return None if tcm is None else (tcm, f"table open cache misses = {tcm:.2f}/s", 1.0)


_KB_POOL = "MariaDB KB, InnoDB Buffer Pool"
_KB_STATUS = "MariaDB KB, InnoDB Status Variables"
_KB_SERVER = "MariaDB KB, Server Status Variables"
MY_SIGNALS: tuple[Rule, ...] = (
    # Innodb_buffer_pool_reads: reads the pool could not satisfy
    Rule(_B.buffer_cache, _my_miss, 0.005, 0.05, source=_KB_POOL),
    # Innodb_buffer_pool_wait_free: waits for a free page
    Rule(
        _B.buffer_cache,
        _rate(_GS + "Innodb_buffer_pool_wait_free", "Innodb_buffer_pool_wait_free = {x:.2f}/s"),
        0.1,
        10.0,
        source=_KB_POOL,
    ),
    # Innodb_log_waits: the log buffer is too small
    Rule(_B.wal_fsync, _per_ktx(_GS + "Innodb_log_waits", "Innodb_log_waits"), 0.5, 20, source=_KB_STATUS),
    Rule(_B.wal_fsync, _rate(_GS + "Innodb_os_log_fsyncs", "Innodb_os_log_fsyncs = {f}/s"), 300, 3000, 0.5, _KB_STATUS),
    # asynchronous flushing starts near 7/8 of the redo capacity
    Rule(_B.checkpoint, _my_checkpoint_age, 0.5, 0.85, source="MariaDB KB, InnoDB Redo Log"),
    # the redo log should hold about an hour of writes (Percona PMM advisor "InnoDB redo log size"; MySQL 8.0
    # manual 10.5.4 "make your redo log files big"); from 10 turns a minute (a checkpoint every 6 s) to one a
    # second the checkpoint drives page flushing (judgement: the default 96 MiB under sysbench write-only here
    # turns a few times a minute)
    Rule(_B.checkpoint, _my_redo_turns, 10.0, 60.0, source="MariaDB KB, InnoDB Redo Log; MySQL 8.0 manual 10.5.4"),
    Rule(_B.checkpoint, _my_dirty, 0.4, 0.8, 0.7, _KB_POOL),
    Rule(
        _B.lock_contention,
        _per_ktx(_GS + "Innodb_row_lock_waits", "Innodb_row_lock_waits"),
        5,
        100,
        source=_KB_STATUS,
    ),
    Rule(_B.lock_contention, _my_lock_time, 5, 100, source=_KB_STATUS),
    Rule(_B.temp_spill, _my_disk_tables, 1.0, 20.0, source="MariaDB KB, tmp_table_size"),
    Rule(_B.temp_spill, _my_disk_share, 0.1, 0.5, source="MariaDB KB, tmp_table_size"),
    Rule(
        _B.temp_spill,
        _rate(_GS + "Sort_merge_passes", "Sort_merge_passes = {x:.2f}/s"),
        0.5,
        10.0,
        0.8,
        "MariaDB KB, sort_buffer_size",
    ),
    # connections near the limit, thread cache misses, table cache misses
    Rule(
        _B.connections,
        _of_limit("Threads_connected/max_connections", _GS + "Threads_connected", _VAR + "max_connections"),
        0.75,
        0.95,
        source=_KB_SERVER,
    ),
    Rule(_B.connections, _my_thread_cache, 0.2, 0.8, source=_KB_SERVER),
    Rule(_B.connections, _my_table_cache, 5.0, 100.0, 0.7, _KB_SERVER),
)
"""MySQL/MariaDB's signals, in the order their evidence is listed."""
