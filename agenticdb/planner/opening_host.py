"""The opening's host-sized candidate (issue 36): the whole configuration a DBA's sizing tool writes for this
host — PGTune's documented figures for PostgreSQL, MySQLTuner's and the MariaDB Knowledge Base's rules for
MariaDB — with the memory the server may really use (the cgroup limit when there is one), the storage class
measured from the data device (else its kernel flag: ``agenticdb.host.storage_probe``), the DBA's
max_connections and the workload class.

Figures and their sources (facts restated from the tools' documentation and rule tables; no code taken):

PostgreSQL — PGTune (pgtune.leopard.in.ua, le0pard/pgtune, rules as of 830d3bb, 2026-06-09; restated with
each rule's commit in ``benchmarks/harness/pgtune_rules.py``):

- shared_buffers 25 % of memory; effective_cache_size 75 %;
- maintenance_work_mem memory/16 (at most 2 GB: it is counted once per autovacuum worker in the budget,
  so PGTune's dw figure memory/8 is not used — judgement);
- wal_buffers 3 % of shared_buffers, at most 16 MB (16 MB above 14 MB), at least 32 kB;
- checkpoint_completion_target 0.9; default_statistics_target 100, 500 for analytics (PGTune "dw");
- random_page_cost 1.1 on SSD/NVMe; 1.1 on any device when the databases' measured size (the sum over
  pg_database) is below the memory limit — PGTune 3532ca0 ("less than RAM": 1.1 whatever the storage) and the
  PostgreSQL 15 manual, 20.7.2 random_page_cost: when the data "is likely to be completely in cache, such as
  when the database is smaller than the total server memory, decreasing random_page_cost can be
  appropriate" —; else 4 (HDD, or a size not measured);
  effective_io_concurrency follows the device alone, HDD 2, SSD 200, NVMe 1000 (PostgreSQL's maximum): it is
  how many reads the device serves at once for the reads that do reach it. So a measured HDD whose data fits
  pairs random_page_cost 1.1 (random reads are cache hits) with effective_io_concurrency 2, and its sources
  say so; without a measured size an HDD keeps 4;
- with ≥ 4 CPUs: max_worker_processes = max_parallel_workers = CPUs, max_parallel_workers_per_gather =
  max_parallel_maintenance_workers = ceil(CPUs/2), at most 4 (PGTune leaves PostgreSQL's defaults below 4);
- work_mem (memory − shared_buffers) / (3 × max_connections) / the parallel workers per Gather (each worker
  of a parallel plan has its own work_mem), and only up to what the memory budget holds with every allowed
  connection × hash_mem_multiplier (PostgreSQL 15 manual 20.4.1); never lowered below the value in effect;
- min_wal_size / max_wal_size: OLTP 2 GB / 8 GB, analytics 4 GB / 16 GB, mixed 1 GB / 4 GB;
- jit off for OLTP and mixed (PGTune bfbd524: JIT compile time does not pay off on short statements);
- wal_compression lz4 (PostgreSQL ≥ 15), on for 10–14 (PGTune bfbd524);
- huge_pages try when shared_buffers ≥ 2 GB.

MariaDB — MariaDB Knowledge Base and MySQLTuner 1.9.9:

- innodb_buffer_pool_size: "as large as possible … leaving enough memory for other processes", 70–80 % of a
  dedicated server's memory (KB "InnoDB Buffer Pool"): 75 % of memory, no larger than 1.25 × the data when
  its size was read (MySQLTuner's "InnoDB buffer pool / data size" check needs pool ≥ data), and only what
  the memory budget leaves after the global caches and the per-session buffers of every connection in use
  (observed peak × (1 + policy.capacity_headroom), else max_connections);
- innodb_log_file_size 25 % of the buffer pool (MySQLTuner "Ratio InnoDB log file size / InnoDB Buffer
  pool size … should be equal to 25%"), at least the server's default;
- innodb_io_capacity 1000 on SSD/NVMe (KB "InnoDB System Variables": the default 200 suits a spinning
  disk; raise it toward the device's IOPS) — a conservative value named as judgement.
"""

from __future__ import annotations

import math

from agenticdb.config.sections import PolicyConfig
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.opening_types import Candidate
from agenticdb.planner.opening_values import (
    GiB,
    HostView,
    MiB,
    SetBuilder,
    SourceInput,
    SourceOutput,
    budget_bytes,
    current_config,
    delta_of,
    floor_mib,
    per_connection_room,
)
from agenticdb.planner.trade import pool_room_from_unused

PGTUNE = "PGTune (le0pard/pgtune rules as of 830d3bb)"
PG_MANUAL = "PostgreSQL 15 manual"
KB_POOL = "MariaDB KB InnoDB Buffer Pool (70–80 % of a dedicated server's memory)"
MYSQLTUNER = "MySQLTuner 1.9.9"

# (min_wal_size, max_wal_size) in bytes by workload class (PGTune: oltp 2/8 GB, dw 4/16 GB, mixed 1/4 GB)
_WAL_BY_CLASS = {"oltp": (2 * GiB, 8 * GiB), "olap": (4 * GiB, 16 * GiB), "mixed": (1 * GiB, 4 * GiB)}
_IO_CONCURRENCY = {"hdd": 2, "ssd": 200, "nvme": 1000, "unknown": 200}


def host_sized(inp: SourceInput) -> SourceOutput:
    """The host-sized candidate of the server of ``inp.ctx`` (None with why for a family without sizing rules)."""
    ctx, host, policy = inp.ctx, inp.host, inp.policy
    if host.family == "postgresql":
        return SourceOutput(_postgresql(ctx, host, policy, inp.pinned))
    if host.flavor in ("mariadb", "mysql"):
        return SourceOutput(_mariadb(ctx, host, policy, inp.pinned, inp.traded))
    return SourceOutput(None, f"no host-sizing rules for {host.flavor}")


def _postgresql(ctx: PlanningContext, host: HostView, policy: PolicyConfig, pinned: dict[str, str]) -> Candidate:
    b = SetBuilder(ctx, pinned)
    mem, cls = host.memory_bytes, host.workload_class
    mem_text = f"{mem / GiB:.2f} GiB {'cgroup limit' if host.cgroup else 'RAM'}"
    b.put_bytes("shared_buffers", floor_mib(mem / 4), f"{PGTUNE}: 25 % of the memory limit ({mem_text})")
    sb = b.now_bytes("shared_buffers") or floor_mib(mem / 4)  # the set's (a pinned one): what the rest is sized from
    b.put_bytes("effective_cache_size", floor_mib(mem * 3 / 4), f"{PGTUNE}: 75 % of the memory limit ({mem_text})")
    mwm = min(floor_mib(mem / 16), 2 * GiB)
    b.put_bytes("maintenance_work_mem", mwm, f"{PGTUNE}: memory/16, at most 2 GB (once per autovacuum worker)")
    wal = min(sb * 0.03, 16 * MiB)
    wal = 16 * MiB if wal > 14 * MiB else max(wal, 32 * 1024)
    b.put_bytes("wal_buffers", wal, f"{PGTUNE}: 3 % of shared_buffers, at most 16 MB")
    b.put("checkpoint_completion_target", "0.9", f"{PGTUNE}: 0.9 (spread checkpoint writes)")
    b.put(
        "default_statistics_target",
        "500" if cls == "olap" else "100",
        f"{PGTUNE}: 500 for analytics (dw), else 100 (class {cls})",
    )
    flash = host.storage in ("ssd", "nvme")
    cached = not flash and host.data_bytes is not None and host.data_bytes < mem  # 1.1 for the data, not the device
    b.put("random_page_cost", "1.1" if flash or cached else "4", _rpc_source(host, mem_text))
    b.put(
        "effective_io_concurrency",
        str(_IO_CONCURRENCY.get(host.storage, 200)),
        f"{PGTUNE}: HDD 2, SSD 200, NVMe 1000; {host.storage_source}"
        + (
            "; the device's depth for the reads that miss the cache (random_page_cost 1.1 here rests on the data "
            "fitting in memory, not on the device)"
            if cached
            else ""
        ),
    )
    if host.cpus >= 4:
        half = min(math.ceil(host.cpus / 2), 4)
        src = f"{PGTUNE}: with ≥ 4 CPUs ({host.cpus})"
        b.put("max_worker_processes", str(host.cpus), f"{src}: = CPUs")
        b.put("max_parallel_workers", str(host.cpus), f"{src}: = CPUs")
        b.put("max_parallel_workers_per_gather", str(half), f"{src}: ceil(CPUs/2), at most 4")
        b.put("max_parallel_maintenance_workers", str(half), f"{src}: ceil(CPUs/2), at most 4")
    per_gather = max(int(b.now("max_parallel_workers_per_gather") or 1), 1)  # the set's (a pinned one)
    _work_mem(ctx, b, host, policy, sb, per_gather)
    lo, hi = _WAL_BY_CLASS.get(cls, _WAL_BY_CLASS["mixed"])
    b.put_bytes("min_wal_size", lo, f"{PGTUNE}: by class ({cls}: {lo // GiB} GB)")
    b.put_bytes("max_wal_size", hi, f"{PGTUNE}: by class ({cls}: {hi // GiB} GB)")
    if cls in ("oltp", "mixed") and host.major >= 12:
        b.put("jit", "off", f"{PGTUNE}: off for OLTP and mixed workloads (short statements; class {cls})")
    if host.major >= 15:
        b.put("wal_compression", "lz4", f"{PGTUNE}: lz4 on PostgreSQL ≥ 15 (less WAL for full-page writes)")
    if sb >= 2 * GiB:
        b.put("huge_pages", "try", f"{PGTUNE}: try huge pages when shared_buffers ≥ 2 GB")
    rationale = (
        f"PGTune's whole configuration for this host: {mem_text}, {host.cpus} CPUs, {host.max_connections} "
        f"connections (kept), {host.storage} storage, workload class {cls}"
        + (f", data {host.data_bytes / GiB:.2f} GiB" if host.data_bytes else ", data size not measured")
        + "; work_mem only up to what the memory budget holds"
        + (
            f"; random_page_cost 1.1 on {host.storage} storage because the data fits in the memory limit (cached), "
            f"effective_io_concurrency the {host.storage} device's {_IO_CONCURRENCY.get(host.storage, 200)}"
            if cached
            else ""
        )
    )
    return Candidate(
        name="host-sized", changes=dict(b.changes), rationale=rationale, sources=dict(b.sources), kept=dict(b.kept)
    )


PG_RPC = (
    f"{PG_MANUAL}, 20.7.2 random_page_cost: 'if your data is likely to be completely in cache, such as when the "
    "database is smaller than the total server memory, decreasing random_page_cost can be appropriate'; solid-state "
    "drives 'might also be better modeled with a lower value for random_page_cost, e.g., 1.1'"
)
"""The manual's two reasons to lower random_page_cost (cache residency and flash storage), quoted."""


def _rpc_source(host: HostView, mem_text: str) -> str:
    """Why the host-sized set's random_page_cost is 1.1 or 4 on this host (see the module docstring): the
    device, and when the device is not flash, whether the databases' measured size fits in the memory limit."""
    device = host.storage_source
    if host.storage in ("ssd", "nvme"):
        return f"{PGTUNE}: 1.1 on SSD/NVMe; {PG_RPC}; {device}"
    if host.data_bytes is None:
        return f"{PGTUNE}: 4 on {host.storage} storage unless the data fits in RAM; {device}, data size not measured"
    size = f"the databases measured {host.data_bytes / GiB:.2f} GiB (sum over pg_database)"
    if host.data_bytes < host.memory_bytes:
        return (
            f"{PGTUNE}, rule of 3532ca0: 1.1 when the data is smaller than RAM, whatever the storage; {PG_RPC}; "
            f"{device}, but {size} < the memory limit {mem_text}: random reads are likely cache hits, not seeks"
        )
    return (
        f"{PGTUNE}: 4 on {host.storage} storage unless the data fits in RAM; {device}, {size} ≥ the memory limit "
        f"{mem_text}"
    )


def _work_mem(
    ctx: PlanningContext, b: SetBuilder, host: HostView, policy: PolicyConfig, sb: float, per_gather: int
) -> None:
    """work_mem by PGTune's formula, capped by what the budget holds (see the module docstring)."""
    mem = host.memory_bytes
    formula = (mem - sb) / (3 * max(host.max_connections, 1)) / max(per_gather, 1)
    committed = (
        sb
        + (b.now_bytes("wal_buffers") or 0.0)
        + (b.now_bytes("maintenance_work_mem") or 0.0) * (b.now("autovacuum_max_workers") or 3.0)
    )
    mult = b.now("hash_mem_multiplier") or 1.0
    room = per_connection_room(committed, ctx, policy, host.max_connections, mult)
    now = b.now_bytes("work_mem") or 4 * MiB
    want = min(formula, room)
    if want <= now:
        return  # never lowered by sizing: the trade move lowers it when the set must fit
    b.put_bytes(
        "work_mem",
        want,
        f"{PGTUNE}: (memory − shared_buffers)/(3 × {host.max_connections} connections)/{per_gather} workers per "
        f"Gather = {formula / MiB:.1f} MiB, capped by the budget ({budget_bytes(ctx, policy) / MiB:.0f} MiB) with "
        f"every connection × hash_mem_multiplier {mult:g} = {room / MiB:.1f} MiB",
    )


_SESSION_BUFFERS = ("sort_buffer_size", "join_buffer_size", "read_buffer_size", "read_rnd_buffer_size")
_GLOBAL_CACHES = ("key_buffer_size", "aria_pagecache_buffer_size", "innodb_log_buffer_size", "query_cache_size")


def _mariadb(
    ctx: PlanningContext, host: HostView, policy: PolicyConfig, pinned: dict[str, str], traded: bool
) -> Candidate:
    b = SetBuilder(ctx, pinned)
    mem = host.memory_bytes
    mem_text = f"{mem / GiB:.2f} GiB {'cgroup limit' if host.cgroup else 'RAM'}"
    delta = delta_of(ctx)
    gauges = delta.gauges if delta is not None else {}
    peak = gauges.get("global_status.Threads_connected")
    conns = math.ceil(peak * (1 + policy.capacity_headroom)) if peak is not None else host.max_connections
    who = (
        f"observed peak {peak:g} threads × {1 + policy.capacity_headroom:g}" if peak is not None else "max_connections"
    )
    per_session = sum(b.now_bytes(n) or 0.0 for n in _SESSION_BUFFERS) + (b.now_bytes("thread_stack") or 0.0)
    globals_ = sum(b.now_bytes(n) or 0.0 for n in _GLOBAL_CACHES)
    room = budget_bytes(ctx, policy) - globals_ - conns * per_session
    want = mem * 0.75
    why = f"{KB_POOL}: 75 % of the memory limit ({mem_text})"
    if host.data_bytes:
        want = min(want, 1.25 * host.data_bytes)
        why += f", at most 1.25 × the data {host.data_bytes / GiB:.2f} GiB ({MYSQLTUNER}: pool ≥ data size)"
    if room < want and traded:
        freed, said = pool_room_from_unused(ctx, host.flavor, current_config(ctx))
        room, why = room + freed, why + said
    if room < want:
        want = room
        why += (
            f"; capped by the memory budget {budget_bytes(ctx, policy) / MiB:.0f} MiB after global caches "
            f"{globals_ / MiB:.0f} MiB and per-session buffers {per_session / MiB:.1f} MiB × {conns} ({who})"
        )
    now = b.now_bytes("innodb_buffer_pool_size") or 128 * MiB
    if floor_mib(max(want, 0.0)) > now:
        b.put_bytes("innodb_buffer_pool_size", floor_mib(max(want, 0.0)), why)
    pool = b.now_bytes("innodb_buffer_pool_size") or now  # the set's pool (a pinned one): the redo log follows it
    log_now = b.now_bytes("innodb_log_file_size") or 96 * MiB
    b.put_bytes(  # never below the value in effect: then the set keeps it (``kept``)
        "innodb_log_file_size",
        max(floor_mib(pool / 4), log_now),
        f"{MYSQLTUNER}: redo log 25 % of the buffer pool ({pool / MiB:.0f} MiB)"
        + (", not below the value in effect" if pool / 4 <= log_now else ""),
    )
    if host.storage in ("ssd", "nvme"):
        b.put(
            "innodb_io_capacity",
            "1000",
            "MariaDB KB InnoDB System Variables: the default 200 suits one spinning disk; 1000 for flash "
            f"({host.storage_source}; judgement, below a flash device's IOPS)",
        )
    rationale = (
        f"MariaDB KB / MySQLTuner sizing for this host: {mem_text}, {host.cpus} CPUs, {host.max_connections} "
        f"connections (kept), {host.storage} storage, workload class {host.workload_class}: the buffer pool takes "
        "what the memory budget leaves, the redo log a quarter of it"
    )
    return Candidate(
        name="host-sized", changes=dict(b.changes), rationale=rationale, sources=dict(b.sources), kept=dict(b.kept)
    )
