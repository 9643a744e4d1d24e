"""Bottleneck attribution from runtime-state deltas (docs/architecture.md "Roles"; issue 6).

Every hypothesis of :class:`~agenticdb.models.Bottleneck` that belongs to the stage is scored in
[0, 1] from *signals*: counters normalised per transaction or per second, ratios and gauges. A signal
is ``weight × ramp(value, lo, hi)``: 0 at or below ``lo``, ``weight`` at or above ``hi``, linear in
between. A hypothesis scores the strongest of its signals, so it wins on its own evidence only; a
hypothesis whose counters are missing scores 0 and says so. Thresholds are engineering judgement
anchored on the manuals cited per signal; they are meant to separate the hypotheses, not to measure
anything absolutely.

The DBMS signals are data: :data:`PG_SIGNALS` and :data:`MY_SIGNALS` are tables of rules (hypothesis,
reader of the value and its evidence line, ramp ``lo``/``hi``, weight, manual source); a table's order is
the order its evidence is listed. Host signals (I/O, CPU, writeback, reclaim) are shared functions.

Counter names follow the target helpers: ``pg_stat_database.*``, ``pg_stat_bgwriter.*``,
``pg_stat_wal.*``, ``global_status.*``, ``host.*`` (CPU seconds), ``diskstats.<dev>.*``,
``vmstat.*``, ``psi.<res>.some_total_us``; wait events are sampled as ``{"<type>:<event>": count}``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import structlog
from pydantic import BaseModel, Field

from agenticdb.dialect import flavor_of_text
from agenticdb.models import Bottleneck, Layer, Measurement, RuntimeProfile, StateDelta

log = structlog.get_logger(__name__)

RULED_OUT_BELOW = 0.25
"""A hypothesis scoring below this is reported as ruled out, with the reason."""

PAGE_BYTES = 4096
"""Linux page size assumed for ``vmstat.nr_dirty`` / ``nr_writeback`` (x86-64 and most arm64 kernels)."""

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
OS_HYPOTHESES = (Bottleneck.io_queue, Bottleneck.writeback, Bottleneck.memory_reclaim, Bottleneck.cpu)

# Wait-event types that say nothing about server work (idle backends, background loops, the client).
_IDLE_WAIT_TYPES = ("Activity", "Client", "Extension")


class Hypothesis(BaseModel):
    """One scored bottleneck hypothesis.

    ``score`` in [0, 1]; ``evidence`` holds one line with numbers per signal that was available;
    ``ruled_out`` says why the hypothesis was dismissed (None when ``score >= RULED_OUT_BELOW``).
    """

    bottleneck: Bottleneck
    layer: Layer
    score: float = Field(ge=0.0, le=1.0)
    evidence: list[str] = Field(default_factory=list)
    ruled_out: str | None = None

    @property
    def plausible(self) -> bool:
        return self.ruled_out is None


@dataclass(frozen=True)
class _Signal:
    text: str
    value: float
    lo: float
    hi: float
    weight: float = 1.0
    gate: float = 1.0  # volume gate in [0, 1]: a high ratio over a handful of events means little

    @property
    def contribution(self) -> float:
        return min(self.weight * max(0.0, min(1.0, self.gate)), self.strength)

    @property
    def strength(self) -> float:
        """The contribution before it is capped at the signal's ``hi`` (how far beyond certainty the
        reading goes): it orders hypotheses whose scores are equal at the cap."""
        if self.hi <= self.lo:
            return 0.0
        x = (self.value - self.lo) / (self.hi - self.lo)
        return self.weight * max(0.0, min(1.0, self.gate)) * max(0.0, x)


def _fmt(x: float) -> str:
    """Numbers for evidence lines: 3 significant digits, no exponent for everyday magnitudes."""
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}"


class _View:
    """Read access to a StateDelta: totals, rates, gauges and wait-event shares."""

    def __init__(self, delta: StateDelta) -> None:
        self.d = delta
        self.seconds = delta.seconds if delta.seconds > 0 else 1.0

    def total(self, name: str) -> float | None:
        if name in self.d.totals:
            return self.d.totals[name]
        if name in self.d.per_second:
            return self.d.per_second[name] * self.seconds
        return None

    def rate(self, name: str) -> float | None:
        if name in self.d.per_second:
            return self.d.per_second[name]
        t = self.d.totals.get(name)
        return None if t is None else t / self.seconds

    def gauge(self, name: str) -> float | None:
        return self.d.gauges.get(name)

    def sum_totals(self, names: Iterable[str]) -> float | None:
        vals = [v for v in (self.total(n) for n in names) if v is not None]
        return sum(vals) if vals else None

    def wait_share(self, match: Callable[[str], bool]) -> tuple[float, int, int] | None:
        """(share, matching samples, busy samples) of busy wait-event samples matching ``match``."""
        busy = {k: n for k, n in self.d.wait_events.items() if k.split(":", 1)[0] not in _IDLE_WAIT_TYPES}
        # Targets may sample only sessions that wait (no on-CPU entries): never divide by fewer than the
        # active sessions, or one waiting backend would look like 100 % of the work.
        denom = max(sum(busy.values()), int(self.d.gauges.get("pg_stat_activity.active", 0)))
        if denom <= 0:
            return None
        hit = sum(n for k, n in busy.items() if match(k))
        return hit / denom, hit, denom

    @property
    def over(self) -> str:
        return f"over {self.seconds:.1f} s"


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def _transactions(v: _View, family: str, measurement: Measurement | None) -> float | None:
    """Transactions in the sample: DBMS commit counters, else the workload's own count."""
    if family == "postgresql":
        tx = v.sum_totals(["pg_stat_database.xact_commit", "pg_stat_database.xact_rollback"])
    else:
        tx = v.sum_totals(["global_status.Com_commit", "global_status.Com_rollback"])
    if tx:
        return tx
    if measurement is not None:
        if measurement.transactions:
            return float(measurement.transactions)
        if measurement.tps:
            return measurement.tps * v.seconds
    return None


# --------------------------------------------------------------------------------------- host signals


def _host_cpu(v: _View) -> list[_Signal]:
    sigs: list[_Signal] = []
    user, system = v.total("host.cpu_user"), v.total("host.cpu_system")
    rest = [v.total(f"host.cpu_{k}") for k in ("idle", "iowait", "steal")]
    if user is not None and system is not None:
        all_s = user + system + sum(x for x in rest if x is not None)
        if all_s > 0:
            util = (user + system) / all_s
            sigs.append(_Signal(f"host CPU busy (user+system)/all = {util:.2f} {v.over}", util, 0.75, 0.97))
    psi = v.total("psi.cpu.some_total_us")
    if psi is not None:
        frac = psi / (v.seconds * 1e6)
        sigs.append(_Signal(f"psi.cpu some = {frac:.2f} of wall time {v.over}", frac, 0.3, 0.8, 0.8))
    return sigs


def _disk_devices(v: _View) -> list[str]:
    devs = {k.split(".")[1] for k in (*v.d.totals, *v.d.per_second) if k.startswith("diskstats.")}
    return sorted(devs)


def _host_io(v: _View, device: str | None) -> list[_Signal]:
    sigs: list[_Signal] = []
    devs = _disk_devices(v)
    if device and device in devs:
        devs = [device]
    ms = v.seconds * 1000.0
    for dev in devs:
        p = f"diskstats.{dev}."
        ticks, weighted = v.total(p + "io_ticks_ms"), v.total(p + "weighted_ms")
        ios = v.sum_totals([p + "reads", p + "writes"])
        busy_ms = v.sum_totals([p + "time_reading_ms", p + "time_writing_ms"])
        if ticks is not None:
            util = ticks / ms
            sigs.append(_Signal(f"{dev} utilisation io_ticks/elapsed = {util:.2f} {v.over}", util, 0.6, 0.95))
        if weighted is not None:
            aqu = weighted / ms
            sigs.append(_Signal(f"{dev} average queue depth weighted_ms/elapsed = {aqu:.2f} {v.over}", aqu, 2.0, 16.0))
        if ios and busy_ms is not None:
            await_ms = busy_ms / ios
            iops = ios / v.seconds
            sigs.append(
                _Signal(
                    f"{dev} await = {await_ms:.2f} ms per I/O at {_fmt(iops)} IOPS",
                    await_ms,
                    5.0,
                    50.0,
                    gate=iops / 20.0,
                )
            )
    iowait = v.total("host.cpu_iowait")
    cpu_all = v.sum_totals([f"host.cpu_{k}" for k in ("user", "system", "idle", "iowait", "steal")])
    if iowait is not None and cpu_all:
        frac = iowait / cpu_all
        sigs.append(_Signal(f"host iowait share = {frac:.2f} of CPU time {v.over}", frac, 0.1, 0.4))
    psi = v.total("psi.io.some_total_us")
    if psi is not None:
        frac = psi / (v.seconds * 1e6)
        sigs.append(_Signal(f"psi.io some = {frac:.2f} of wall time {v.over}", frac, 0.15, 0.5))
    return sigs


def _os_writeback(v: _View, profile: RuntimeProfile, device: str | None) -> list[_Signal]:
    sigs: list[_Signal] = []
    mem = profile.hardware.memory_limit_bytes or profile.hardware.memory_bytes
    dirty, wb = v.gauge("vmstat.nr_dirty"), v.gauge("vmstat.nr_writeback")
    if dirty is not None and mem:
        frac = dirty * PAGE_BYTES / mem
        sigs.append(_Signal(f"vmstat.nr_dirty = {_fmt(dirty)} pages ({frac:.3f} of memory)", frac, 0.04, 0.12))
    if wb is not None and mem:
        frac = wb * PAGE_BYTES / mem
        sigs.append(_Signal(f"vmstat.nr_writeback = {_fmt(wb)} pages ({frac:.4f} of memory)", frac, 0.002, 0.02, 0.9))
    devs = _disk_devices(v)
    if device and device in devs:
        devs = [device]
    for dev in devs:
        p = f"diskstats.{dev}."
        tr, tw, ticks = (
            v.total(p + "time_reading_ms"),
            v.total(p + "time_writing_ms"),
            v.total(p + "io_ticks_ms"),
        )
        if tr is not None and tw is not None and ticks is not None and tr + tw > 0:
            write_busy = tw / (tr + tw) * ticks / (v.seconds * 1000.0)
            sigs.append(
                _Signal(
                    f"{dev} write share of busy time × utilisation = {write_busy:.2f} {v.over}",
                    write_busy,
                    0.5,
                    0.9,
                    0.8,
                )
            )
    return sigs


def _os_reclaim(v: _View) -> list[_Signal]:
    sigs: list[_Signal] = []
    direct = v.rate("vmstat.pgscan_direct")
    if direct is not None:
        sigs.append(_Signal(f"vmstat.pgscan_direct = {_fmt(direct)} pages/s {v.over}", direct, 50, 5000))
    kswapd = v.rate("vmstat.pgscan_kswapd")
    if kswapd is not None:
        sigs.append(_Signal(f"vmstat.pgscan_kswapd = {_fmt(kswapd)} pages/s", kswapd, 1000, 50000, 0.6))
    swap = [v.rate("vmstat.pswpin"), v.rate("vmstat.pswpout")]
    if any(s is not None for s in swap):
        s = sum(x for x in swap if x is not None)
        sigs.append(_Signal(f"vmstat.pswpin+pswpout = {_fmt(s)} pages/s", s, 10, 500))
    stalls = [k for k in (*v.d.totals, *v.d.per_second) if k.startswith("vmstat.allocstall")]
    if stalls:
        s = sum(v.rate(k) or 0.0 for k in set(stalls))
        sigs.append(_Signal(f"vmstat.allocstall* = {_fmt(s)}/s", s, 1, 50))
    psi = v.total("psi.memory.some_total_us")
    if psi is not None:
        frac = psi / (v.seconds * 1e6)
        sigs.append(_Signal(f"psi.memory some = {frac:.3f} of wall time {v.over}", frac, 0.02, 0.2))
    return sigs


# ------------------------------------------------------------------------------------- signal tables

_Reading = tuple[float, str, float]
"""What a signal read from the sample: (value, evidence line, volume gate)."""


@dataclass(frozen=True)
class _Sample:
    """What every reader gets: the delta's view, transactions in the sample, the profile."""

    v: _View
    tx: float | None
    profile: RuntimeProfile

    def per_ktx(self, count: float) -> float:
        assert self.tx
        return count / self.tx * 1000.0


@dataclass(frozen=True)
class _Rule:
    """One row of a signal table: which hypothesis a signal supports, where its value comes from
    (``read``: None when the counters are missing), its ramp ``lo``/``hi`` and weight (see the module
    docstring), and the manual page the threshold is anchored on."""

    bottleneck: Bottleneck
    read: Callable[[_Sample], _Reading | None]
    lo: float
    hi: float
    weight: float = 1.0
    source: str = ""


def _signals(rules: Iterable[_Rule], s: _Sample) -> dict[Bottleneck, list[_Signal]]:
    """The signals of every DBMS hypothesis from one table, in the table's order."""
    out: dict[Bottleneck, list[_Signal]] = {b: [] for b in DBMS_HYPOTHESES}
    for rule in rules:
        got = rule.read(s)
        if got is not None:
            value, text, gate = got
            out[rule.bottleneck].append(_Signal(text, value, rule.lo, rule.hi, rule.weight, gate))
    return out


def _wait(label: str, match: Callable[[str], bool]) -> Callable[[_Sample], _Reading | None]:
    """Share of busy wait-event samples matching ``match``."""

    def read(s: _Sample) -> _Reading | None:
        got = s.v.wait_share(match)
        if got is None:
            return None
        share, hit, denom = got
        return share, f"{label} wait events = {hit}/{denom} busy samples ({share:.2f})", 1.0

    return read


def _per_ktx(counter: str, label: str) -> Callable[[_Sample], _Reading | None]:
    """``counter`` per 1000 transactions of the sample."""

    def read(s: _Sample) -> _Reading | None:
        n = s.v.total(counter)
        if n is None or not s.tx:
            return None
        k = s.per_ktx(n)
        return k, f"{label} = {k:.2f} per 1000 transactions", 1.0

    return read


def _rate(counter: str, text: str) -> Callable[[_Sample], _Reading | None]:
    """``counter`` per second; ``text`` formats ``x`` (the rate) and ``f`` (the rate by ``_fmt``)."""

    def read(s: _Sample) -> _Reading | None:
        x = s.v.rate(counter)
        return None if x is None else (x, text.format(x=x, f=_fmt(x)), 1.0)

    return read


def _of_limit(label: str, used: str, limit: str) -> Callable[[_Sample], _Reading | None]:
    """Gauge ``used`` against gauge ``limit`` (connections against their maximum)."""

    def read(s: _Sample) -> _Reading | None:
        n, top = s.v.gauge(used), s.v.gauge(limit)
        if n is None or not top:
            return None
        return n / top, f"{label} = {_fmt(n)}/{_fmt(top)} ({n / top:.2f})", 1.0

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


def _pg_miss(s: _Sample) -> _Reading | None:
    v = s.v
    rd, hit = v.total(_DB + "blks_read"), v.total(_DB + "blks_hit")
    if rd is None or hit is None or rd + hit <= 0:
        return None
    miss = rd / (rd + hit)
    text = f"blks_read/(blks_read+blks_hit) = {miss:.3f} {v.over} ({_fmt(rd / v.seconds)} reads/s)"
    return miss, text, (rd / v.seconds) / 200.0


def _pg_backend_writes(s: _Sample) -> _Reading | None:
    writes = s.v.sum_totals([_BG + "buffers_checkpoint", _BG + "buffers_clean", _BG + "buffers_backend"])
    share = _ratio(s.v.total(_BG + "buffers_backend"), writes)
    if share is None or not writes:
        return None
    text = f"buffers_backend/(checkpoint+clean+backend) = {share:.2f} of {_fmt(writes)} buffer writes"
    return share, text, writes / 1000.0


def _pg_sync_time(s: _Sample) -> _Reading | None:
    syncs, sync_ms = s.v.total(_WAL + "wal_sync"), s.v.total(_WAL + "wal_sync_time")
    if not syncs or not sync_ms:
        return None
    avg = sync_ms / syncs
    return avg, f"wal_sync_time/wal_sync = {avg:.2f} ms per WAL fsync ({_fmt(syncs / s.v.seconds)} fsyncs/s)", 1.0


def _pg_commit_delay(s: _Sample) -> _Reading | None:
    try:
        delay = float(s.profile.current_config.get("commit_delay", "0") or 0)
    except ValueError:
        delay = 0.0
    if delay <= 0 or not s.v.total(_DB + "xact_commit"):
        return None
    return 1.0, f"commit_delay = {_fmt(delay)} µs is set (every commit may sleep before its WAL flush)", 1.0


def _pg_checkpoints(s: _Sample) -> tuple[float, float] | None:
    req, timed = s.v.total(_BG + "checkpoints_req"), s.v.total(_BG + "checkpoints_timed")
    return None if req is None or timed is None else (req, timed)


def _pg_requested(s: _Sample) -> _Reading | None:
    got = _pg_checkpoints(s)
    if got is None:
        return None
    req, timed = got
    if req + timed <= 0:
        return 0.0, f"no checkpoint {s.v.over}", 1.0
    n = req + timed
    text = f"checkpoints_req/(req+timed) = {req / n:.2f} ({_fmt(req)} requested, {_fmt(timed)} timed) {s.v.over}"
    return req / n, text, req / 2.0


def _pg_checkpoint_rate(s: _Sample) -> _Reading | None:
    got = _pg_checkpoints(s)
    if got is None or sum(got) <= 0:
        return None
    per_min = (got[0] + got[1]) / (s.v.seconds / 60.0)
    return per_min, f"checkpoints = {per_min:.2f} per minute", 1.0


def _pg_fpi(s: _Sample) -> _Reading | None:
    fpi, recs = s.v.total(_WAL + "wal_fpi"), s.v.total(_WAL + "wal_records")
    if fpi is None or not recs:
        return None
    return fpi / recs, f"wal_fpi/wal_records = {fpi / recs:.2f} full-page images per WAL record", 1.0


def _pg_backend_fsync(s: _Sample) -> _Reading | None:
    bfs = s.v.total(_BG + "buffers_backend_fsync")
    return None if bfs is None else (bfs, f"buffers_backend_fsync = {_fmt(bfs)} {s.v.over}", 1.0)


def _pg_read_time(s: _Sample) -> _Reading | None:
    brt, rd = s.v.total(_DB + "blk_read_time"), s.v.total(_DB + "blks_read")
    if brt is None or not rd:
        return None
    return brt / rd, f"blk_read_time/blks_read = {brt / rd:.2f} ms per read", rd / s.v.seconds / 50


def _pg_temp_bytes(s: _Sample) -> _Reading | None:
    tb = s.v.total(_DB + "temp_bytes")
    if tb is None:
        return None
    mb_s = tb / s.v.seconds / 2**20
    return mb_s, f"temp_bytes = {mb_s:.2f} MiB/s {s.v.over}", 1.0


def _pg_lock_waiters(s: _Sample) -> _Reading | None:
    waiting, active = s.v.gauge("pg_locks.waiting"), s.v.gauge("pg_stat_activity.active")
    if waiting is None or not active:
        return None
    return waiting / active, f"pg_locks waiting/active backends = {_fmt(waiting)}/{_fmt(active)}", 1.0


def _pg_jit_share(s: _Sample) -> _Reading | None:
    """JIT compilation's share of statement execution time (pg_stat_statements, PostgreSQL 15+). Gate:
    statements that ran for at least a fifth of the sample's wall time, so a handful of ms means little."""
    jit, total = s.v.total(_PGSS + "jit_time"), s.v.total(_PGSS + "total_exec_time")
    if jit is None or not total or total <= 0:
        return None
    share = min(jit / total, 1.0)
    gate = total / (s.v.seconds * 1000.0 * 0.2)
    return share, f"JIT compilation = {share:.0%} of statement execution time (pg_stat_statements) {s.v.over}", gate


_MONITORING = "PostgreSQL manual, Monitoring Database Activity (pg_stat_database, pg_stat_bgwriter)"
_WAL_CONFIG = "PostgreSQL manual, WAL Configuration"
_JIT_DOC = "PostgreSQL 15 manual, 32.2 When to JIT?; F.32 pg_stat_statements (jit_*_time, total_exec_time)"
_B = Bottleneck
PG_SIGNALS: tuple[_Rule, ...] = (
    # blks_read: not found in shared buffers
    _Rule(_B.buffer_cache, _pg_miss, 0.02, 0.2, source=_MONITORING),
    # weight < 1: a slow device also shows DataFileRead waits
    _Rule(
        _B.buffer_cache,
        _wait("IO:DataFileRead+LWLock:BufferMapping", lambda k: k in ("IO:DataFileRead", "LWLock:BufferMapping")),
        0.15,
        0.5,
        0.7,
        "PostgreSQL manual, Wait Events (IO:DataFileRead)",
    ),
    # buffers_backend: backends evicting dirty pages themselves
    _Rule(_B.buffer_cache, _pg_backend_writes, 0.3, 0.8, 0.6, _MONITORING),
    # commit waits on WAL flush; wal_buffers_full means wal_buffers too small
    _Rule(_B.wal_fsync, _wait("WAL", lambda k: k in _PG_WAL_WAITS), 0.15, 0.5, source=_WAL_CONFIG),
    _Rule(_B.wal_fsync, _per_ktx(_WAL + "wal_buffers_full", "pg_stat_wal.wal_buffers_full"), 1, 50, source=_WAL_CONFIG),
    _Rule(_B.wal_fsync, _pg_sync_time, 1.0, 10.0, source=_WAL_CONFIG),
    # commit_delay + commit_siblings can cost throughput (docs/measurement.md: −39 %)
    _Rule(_B.wal_fsync, _pg_commit_delay, 0.0, 1.0, 0.6, _WAL_CONFIG),
    # checkpoints_req > checkpoints_timed means max_wal_size is too small
    _Rule(_B.checkpoint, _pg_requested, 0.3, 0.8, source=_WAL_CONFIG),
    _Rule(_B.checkpoint, _pg_checkpoint_rate, 0.5, 2.0, 0.8, _WAL_CONFIG),
    # full-page images follow every checkpoint
    _Rule(_B.checkpoint, _pg_fpi, 0.2, 0.6, 0.7, _WAL_CONFIG),
    # buffers_backend_fsync: the fsync request queue overflowed
    _Rule(_B.checkpoint, _pg_backend_fsync, 0.0, 5.0, 0.8, _WAL_CONFIG),
    # read latency when track_io_timing is on
    _Rule(_B.io_queue, _pg_read_time, 1.0, 10.0, source="PostgreSQL manual, Run-time Statistics (track_io_timing)"),
    # work_mem: sorts and hashes spill to temp files
    _Rule(_B.temp_spill, _pg_temp_bytes, 1.0, 32.0, source="PostgreSQL manual, Resource Consumption (work_mem)"),
    _Rule(_B.temp_spill, _per_ktx(_DB + "temp_files", "temp_files"), 1.0, 50.0, source=_MONITORING),
    _Rule(
        _B.temp_spill,
        _wait("IO:BufFile*", lambda k: k.startswith("IO:BufFile")),
        0.1,
        0.4,
        source="PostgreSQL manual, Wait Events (IO:BufFileRead, IO:BufFileWrite)",
    ),
    # JIT compile time against execution time: the compilation costs more than it saves on short queries
    _Rule(_B.cpu, _pg_jit_share, 0.05, 0.25, source=_JIT_DOC),
    # pg_locks.granted = false; the deadlocks counter
    _Rule(
        _B.lock_contention,
        _wait("Lock:*", lambda k: k.startswith("Lock:") or k == "LWLock:LockManager"),
        0.1,
        0.4,
        source="PostgreSQL manual, Viewing Locks",
    ),
    _Rule(_B.lock_contention, _pg_lock_waiters, 0.1, 0.5, source="PostgreSQL manual, Viewing Locks (pg_locks)"),
    _Rule(_B.lock_contention, _rate(_DB + "deadlocks", "deadlocks = {x:.3f}/s"), 0.01, 0.2, 0.8, _MONITORING),
    _Rule(
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


def _my_miss(s: _Sample) -> _Reading | None:
    v = s.v
    rd, req = v.total(_GS + "Innodb_buffer_pool_reads"), v.total(_GS + "Innodb_buffer_pool_read_requests")
    if rd is None or not req:
        return None
    text = f"Innodb_buffer_pool_reads/read_requests = {rd / req:.4f} {v.over} ({_fmt(rd / v.seconds)} reads/s)"
    return rd / req, text, (rd / v.seconds) / 50.0


def _my_checkpoint_age(s: _Sample) -> _Reading | None:
    age = s.v.gauge("innodb.checkpoint_age_bytes")
    cap = s.v.gauge(_VAR + "innodb_redo_log_capacity") or s.v.gauge(_VAR + "innodb_log_file_size")
    if age is None or not cap:
        return None
    text = f"checkpoint age/redo capacity = {_fmt(age / 2**20)} MiB/{_fmt(cap / 2**20)} MiB ({age / cap:.2f})"
    return age / cap, text, 1.0


def _my_dirty(s: _Sample) -> _Reading | None:
    dirty, pages = s.v.gauge(_GS + "Innodb_buffer_pool_pages_dirty"), s.v.gauge(_GS + "Innodb_buffer_pool_pages_total")
    if dirty is None or not pages:
        return None
    return dirty / pages, f"Innodb_buffer_pool_pages_dirty/total = {dirty / pages:.2f}", 1.0


def _my_lock_time(s: _Sample) -> _Reading | None:
    waits, ms = s.v.total(_GS + "Innodb_row_lock_waits"), s.v.total(_GS + "Innodb_row_lock_time")
    if not waits or ms is None:
        return None
    return ms / waits, f"Innodb_row_lock_time/waits = {ms / waits:.1f} ms per wait", waits / 10.0


def _my_disk_tables(s: _Sample) -> _Reading | None:
    disk = s.v.total(_GS + "Created_tmp_disk_tables")
    if disk is None:
        return None
    return disk / s.v.seconds, f"Created_tmp_disk_tables = {disk / s.v.seconds:.2f}/s", 1.0


def _my_disk_share(s: _Sample) -> _Reading | None:
    disk, tmp = s.v.total(_GS + "Created_tmp_disk_tables"), s.v.total(_GS + "Created_tmp_tables")
    if disk is None or not tmp:
        return None
    return disk / tmp, f"Created_tmp_disk_tables/Created_tmp_tables = {disk / tmp:.2f}", disk / s.v.seconds


def _my_thread_cache(s: _Sample) -> _Reading | None:
    created, conns = s.v.total(_GS + "Threads_created"), s.v.total(_GS + "Connections")
    if created is None or not conns:
        return None
    text = f"Threads_created/Connections = {created / conns:.2f} ({_fmt(conns / s.v.seconds)} connections/s)"
    return created / conns, text, conns / s.v.seconds / 5.0


def _my_table_cache(s: _Sample) -> _Reading | None:
    tcm = s.v.rate(_GS + "Table_open_cache_misses")
    if tcm is None:
        tcm = s.v.rate(_GS + "Opened_tables")
    return None if tcm is None else (tcm, f"table open cache misses = {tcm:.2f}/s", 1.0)


_KB_POOL = "MariaDB KB, InnoDB Buffer Pool"
_KB_STATUS = "MariaDB KB, InnoDB Status Variables"
_KB_SERVER = "MariaDB KB, Server Status Variables"
MY_SIGNALS: tuple[_Rule, ...] = (
    # Innodb_buffer_pool_reads: reads the pool could not satisfy
    _Rule(_B.buffer_cache, _my_miss, 0.005, 0.05, source=_KB_POOL),
    # Innodb_buffer_pool_wait_free: waits for a free page
    _Rule(
        _B.buffer_cache,
        _rate(_GS + "Innodb_buffer_pool_wait_free", "Innodb_buffer_pool_wait_free = {x:.2f}/s"),
        0.1,
        10.0,
        source=_KB_POOL,
    ),
    # Innodb_log_waits: the log buffer is too small
    _Rule(_B.wal_fsync, _per_ktx(_GS + "Innodb_log_waits", "Innodb_log_waits"), 0.5, 20, source=_KB_STATUS),
    _Rule(
        _B.wal_fsync, _rate(_GS + "Innodb_os_log_fsyncs", "Innodb_os_log_fsyncs = {f}/s"), 300, 3000, 0.5, _KB_STATUS
    ),
    # asynchronous flushing starts near 7/8 of the redo capacity
    _Rule(_B.checkpoint, _my_checkpoint_age, 0.5, 0.85, source="MariaDB KB, InnoDB Redo Log"),
    _Rule(_B.checkpoint, _my_dirty, 0.4, 0.8, 0.7, _KB_POOL),
    _Rule(
        _B.lock_contention,
        _per_ktx(_GS + "Innodb_row_lock_waits", "Innodb_row_lock_waits"),
        5,
        100,
        source=_KB_STATUS,
    ),
    _Rule(_B.lock_contention, _my_lock_time, 5, 100, source=_KB_STATUS),
    _Rule(_B.temp_spill, _my_disk_tables, 1.0, 20.0, source="MariaDB KB, tmp_table_size"),
    _Rule(_B.temp_spill, _my_disk_share, 0.1, 0.5, source="MariaDB KB, tmp_table_size"),
    _Rule(
        _B.temp_spill,
        _rate(_GS + "Sort_merge_passes", "Sort_merge_passes = {x:.2f}/s"),
        0.5,
        10.0,
        0.8,
        "MariaDB KB, sort_buffer_size",
    ),
    # connections near the limit, thread cache misses, table cache misses
    _Rule(
        _B.connections,
        _of_limit("Threads_connected/max_connections", _GS + "Threads_connected", _VAR + "max_connections"),
        0.75,
        0.95,
        source=_KB_SERVER,
    ),
    _Rule(_B.connections, _my_thread_cache, 0.2, 0.8, source=_KB_SERVER),
    _Rule(_B.connections, _my_table_cache, 5.0, 100.0, 0.7, _KB_SERVER),
)
"""MySQL/MariaDB's signals, in the order their evidence is listed."""


def _add_live(signals: dict[Bottleneck, list[_Signal]], v: _View, m: Measurement | None) -> None:
    """Signals from the application's own statements (``live.*`` counters of workload live,
    agenticdb/workloads/live.py): the share of its execution time spent in statements that spill to
    temporary files (work_mem / tmp_table_size), and its statements' buffer-cache miss ratio.

    In a live window the host's CPU also serves the application and everything else on the host, so the
    host-wide cpu signals are gated by the database server's share of the busy CPU (``Disturbance``:
    ours / host busy cores; agenticdb runs no load of its own then)."""
    if m is not None and m.workload == "live" and m.disturbance is not None and m.disturbance.host_busy_cores > 0:
        share = min(1.0, m.disturbance.ours_cpu_cores / m.disturbance.host_busy_cores)
        signals[Bottleneck.cpu] = [
            replace(s, text=f"{s.text} (the server used {share:.0%} of the busy CPU)", gate=s.gate * share)
            for s in signals[Bottleneck.cpu]
        ]
    exec_ms, spill_ms = v.total("live.exec_ms"), v.total("live.spill_exec_ms")
    if exec_ms and spill_ms is not None:
        share = spill_ms / exec_ms
        signals[Bottleneck.temp_spill].append(
            _Signal(f"statements that spill to temp files take {share:.0%} of the application's time", share, 0.05, 0.3)
        )
    rd, hit = v.total("live.read_blocks"), v.total("live.hit_blocks")
    if rd is not None and hit is not None and rd + hit > 0:
        signals[Bottleneck.buffer_cache].append(
            _Signal(
                f"application statements read {rd / (rd + hit):.1%} of their blocks from outside the buffer cache",
                rd / (rd + hit),
                0.02,
                0.2,
                gate=rd / v.seconds / 50,
            )
        )


# --------------------------------------------------------------------------------------------- API


def _device(profile: RuntimeProfile) -> str | None:
    dev = profile.hardware.data_device
    return dev.removeprefix("/dev/") if dev else None


def _hypothesis(b: Bottleneck, layer: Layer, signals: list[_Signal]) -> Hypothesis:
    score = round(min(1.0, max((s.contribution for s in signals), default=0.0)), 3)
    # A signal that did not raise the score says so: the score printed beside it comes from another one
    # ("wal_fsync (score 1.00): wal_buffers_full = 0.00 per 1000 transactions" read as a contradiction).
    evidence = [
        s.text if s.contribution > 0 or score == 0 else f"{s.text} (below {_fmt(s.lo)}: not what raised the score)"
        for s in sorted(signals, key=lambda s: -s.contribution)
    ]
    ruled_out = None
    if score < RULED_OUT_BELOW:
        if not signals:
            ruled_out = "no counters for this hypothesis in the sample"
        else:
            ruled_out = "; ".join(f"{s.text} (suspect from {_fmt(s.lo)})" for s in signals[:3])
    return Hypothesis(bottleneck=b, layer=layer, score=score, evidence=evidence, ruled_out=ruled_out)


def diagnose(
    delta: StateDelta,
    profile: RuntimeProfile,
    family: str,
    stage: Layer,
    measurement: Measurement | None = None,
) -> list[Hypothesis]:
    """Score every bottleneck hypothesis of ``stage`` from one runtime-state delta.

    Args:
        delta: counter deltas (``totals`` over ``seconds``) and gauges of the measured run.
        profile: hardware (memory for the dirty-page share, data device) and current config.
        family: ``"postgresql"``, ``"mariadb"`` or ``"mysql"``; ignored for the OS stage.
        stage: ``Layer.dbms`` scores the eight DBMS hypotheses, ``Layer.os`` io_queue, writeback,
            memory_reclaim and cpu.
        measurement: the run's workload result, used for transactions when commit counters are absent.

    Returns:
        Hypotheses sorted by score, highest first; equal scores by how far their strongest signal reads
        beyond its threshold, then in the order of DBMS_HYPOTHESES/OS_HYPOTHESES.

    Raises:
        ValueError: ``family`` is not a known DBMS family for the DBMS stage.
    """
    v = _View(delta)
    dev = _device(profile)
    if stage == Layer.os:
        signals = {
            Bottleneck.io_queue: _host_io(v, dev),
            Bottleneck.writeback: _os_writeback(v, profile, dev),
            Bottleneck.memory_reclaim: _os_reclaim(v),
            Bottleneck.cpu: _host_cpu(v),
        }
        order: tuple[Bottleneck, ...] = OS_HYPOTHESES
    else:
        family = flavor_of_text(family) or family  # accept spellings like "postgresql-15" or "MariaDB"
        tx = _transactions(v, family, measurement)
        if family == "postgresql":
            signals = _signals(PG_SIGNALS, _Sample(v, tx, profile))
        elif family in ("mariadb", "mysql"):
            signals = _signals(MY_SIGNALS, _Sample(v, tx, profile))
        else:
            raise ValueError(f"family={family!r}: expected 'postgresql', 'mariadb' or 'mysql'")
        signals[Bottleneck.io_queue] += _host_io(v, dev)
        signals[Bottleneck.cpu] += _host_cpu(v)
        _add_live(signals, v, measurement)
        order = DBMS_HYPOTHESES
    hyps = [_hypothesis(b, stage, signals[b]) for b in order]
    # Equal scores (most often two hypotheses both at 1.0) are ordered by their strongest signal's
    # reading beyond its certainty threshold: a live window where spilling statements take 80 % of the
    # application's time (3 × that signal's threshold) outranks WAL waits just past theirs.
    strength = {b: max((s.strength for s in signals[b]), default=0.0) for b in order}
    ranked = sorted(hyps, key=lambda h: (-h.score, -strength[h.bottleneck]))
    log.debug(
        "diagnosis.scored",
        stage=stage.value,
        family=family,
        scores={h.bottleneck.value: h.score for h in ranked},
    )
    return ranked
