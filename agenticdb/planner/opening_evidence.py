"""The opening's evidence-driven candidate (issue 36): what the baseline's own statistics show, and only that.

Each knob is moved because a measured figure of this baseline says so, and its source names the figure.
What a rule needed and could not read becomes a note ("JIT share not measured: …"), never silence.

PostgreSQL (counters of the baseline's ``StateDelta``; plan evidence from
``agenticdb.targets.postgres_plans`` when it was read):

- JIT: compile time's share of execution time, from the plans (leader and workers) or else from
  pg_stat_statements (leader only). At 1 % or more, jit = off (below 1 % it cannot help: the playbook's
  ``absent_below``; PostgreSQL 15 manual 32.2 "When to JIT?");
- parallel query: ≥ 50 % of the time in plans that launched workers → max_parallel_workers_per_gather up to
  the cores the validator allows (manual 20.4.6, 15.1);
- temporary files: the average spill per temp file (pg_stat_database temp_bytes / temp_files) is what one
  sort or hash lacked → work_mem that size, only as far as the budget holds with every allowed connection ×
  hash_mem_multiplier (manual 20.4.1);
- buffer misses (≥ 5 % of block reads) against the data size, by access pattern
  (:mod:`agenticdb.planner.opening_cache`): lookups (OLTP, or index access in the row counters) get
  shared_buffers 1.25 × the data within 40 % of the memory limit, 40 % when the data is larger but fits in
  the limit, the manual's 25 % when it does not (manual 20.4.1); scans (OLAP) keep it when the data exceeds
  40 % of the limit (a scan larger than a quarter of shared_buffers reads through a 256 kB ring; on
  pg-tpch, 1 GiB, shared_buffers 128 → 256 MB alone measured −23 %, benchmarks/README.md) and get 1.25 ×
  the data below; every branch within the memory budget the set validation applies. effective_cache_size
  is brought to 75 % of the memory limit when it claims more (manual 20.7.2). Scans of data beyond the
  whole memory limit lower both: shared_buffers to 1/32 of the limit (at least 32 MiB) and
  effective_cache_size to 4 × that (``opening_cache``: the page cache gets what ring-read scans cannot use,
  and the planner is told how little cache a query's own scans leave). Plans that spend a quarter of the time
  probing indexes inside nested loops, on data that fits the memory limit but not shared_buffers, with
  block reads missing shared buffers (≥ 5 %), get effective_cache_size = shared_buffers
  (``opening_cache.probe_cache``: a probe beyond shared buffers is a read() the planner priced as cached);
- WAL and checkpoints: requested checkpoints ≥ half of all → max_wal_size twice the WAL written per
  checkpoint_timeout (manual 30.5); wal_buffers_full > 0 → wal_buffers 16MB (manual 20.5.1); full-page
  images ≥ 30 % of WAL records → wal_compression (manual 20.5.1).

MariaDB (global_status counters): buffer pool misses → the pool holds the InnoDB data measured
(information_schema.TABLES, when the account sees every table) × 1.25, or without the data size the pool in
effect × max_step_factor; never above what the budget holds after the per-session buffers of the observed
threads (KB "InnoDB Buffer Pool"), the raised in-memory temporary table (min(tmp_table_size,
max_heap_table_size)) among them as in the validator's memory budget; Created_tmp_disk_tables ≥ 10 % of
temporary tables → tmp_table_size and max_heap_table_size × 4, at most 256 MiB (KB "tmp_table_size");
Innodb_log_waits → a 64 MiB log buffer (KB "InnoDB Status Variables"); checkpoint age ≥ half the redo
capacity → twice the redo log (KB "InnoDB Redo Log").
"""

from __future__ import annotations

import math

import structlog

from agenticdb.models import StateDelta
from agenticdb.planner.caps import cpu_cap
from agenticdb.planner.opening_cache import (
    MISS_RATIO,
    SCAN_CACHE_FACTOR,
    access_pattern,
    budget_room,
    probe_cache,
    scan_buffers,
    scans_beyond_memory,
    size_shared_buffers,
)
from agenticdb.planner.opening_types import Candidate
from agenticdb.planner.opening_values import (
    GiB,
    MiB,
    SetBuilder,
    SourceInput,
    SourceOutput,
    budget_bytes,
    current_config,
    delta_of,
    per_connection_room,
)
from agenticdb.planner.trade import pool_room_from_unused

_DB, _BG, _WAL, _PGSS, _GS = (
    "pg_stat_database.",
    "pg_stat_bgwriter.",
    "pg_stat_wal.",
    "pg_stat_statements.",
    "global_status.",
)
log = structlog.get_logger(__name__)
JIT_FLOOR = 0.01
MIN_EXEC_MS_PER_S = 200.0  # the playbook's min_whole_per_s for the JIT rules
PARALLEL_SHARE = 0.5


def _total(d: StateDelta | None, name: str) -> float | None:
    if d is None:
        return None
    if name in d.totals:
        return d.totals[name]
    return d.per_second[name] * d.seconds if name in d.per_second else None


def _miss(d: StateDelta | None) -> float | None:
    """Share of block reads that missed shared buffers in ``d`` (pg_stat_database blks_read / (blks_read +
    blks_hit)); None when not measured or nothing was read."""
    rd, hit = _total(d, _DB + "blks_read"), _total(d, _DB + "blks_hit")
    return rd / (rd + hit) if rd is not None and hit is not None and rd + hit > 0 else None


def evidence_driven(inp: SourceInput) -> SourceOutput:
    """The evidence-driven candidate (rules in the module docstring)."""
    if inp.host.family == "postgresql":
        return _postgresql(inp)
    if inp.host.flavor in ("mariadb", "mysql"):
        return _mariadb(inp)
    return SourceOutput(None, f"no evidence rules for {inp.host.flavor}")


def _done(b: SetBuilder, notes: list[str], what: str) -> SourceOutput:
    if not b.changes:
        return SourceOutput(None, f"the baseline's statistics call for no change ({what})", notes)
    reasons = "; ".join(f"{k}: {v}" for k, v in b.sources.items())
    cand = Candidate(
        name="evidence",
        changes=dict(b.changes),
        rationale=f"what this baseline measured: {reasons}",
        sources=dict(b.sources),
    )
    return SourceOutput(cand, "", notes)


def _postgresql(inp: SourceInput) -> SourceOutput:
    ctx, host = inp.ctx, inp.host
    d = delta_of(ctx)
    b = SetBuilder(ctx)
    notes: list[str] = []
    _jit(inp, b, d, notes)
    _parallel(inp, b, notes)
    _spill(inp, b, d, notes)
    _cache(inp, b, d, notes)
    _probes(inp, b, d, notes)
    _wal(b, d, notes)
    if d is None:
        notes.append("baseline statistics not measured: no runtime-state delta in the context")
    return _done(b, notes, f"{host.workload_class} workload")


def _jit(inp: SourceInput, b: SetBuilder, d: StateDelta | None, notes: list[str]) -> None:
    if (b.current.get("jit") or "on").lower() in ("off", "false", "0"):
        return
    share, where = None, ""
    if inp.plans is not None and inp.plans.jit_share is not None:
        share = inp.plans.jit_share
        n = inp.plans.jit_sampled or inp.plans.statements
        where = f"EXPLAIN ANALYZE of {n} of the workload's statements, leader and workers"
        if inp.plans.jit_borrowed:  # a class took the other's share (opening_plans._sample_jit)
            bound = "a lower" if inp.plans.jit_borrowed == "optimised" else "an upper"
            where += f"; {inp.plans.jit_borrowed} plans not sampled: {bound} bound"
    else:
        jit, total = _total(d, _PGSS + "jit_time"), _total(d, _PGSS + "total_exec_time")
        if jit is not None and total is not None and d is not None and total / max(d.seconds, 1e-6) < MIN_EXEC_MS_PER_S:
            notes.append(
                f"JIT share not measured: statements ran {total:.0f} ms in {d.seconds:.0f} s, under "
                f"{MIN_EXEC_MS_PER_S:.0f} ms a second (the playbook's volume gate)"
            )
            return
        if jit is not None and total:
            share, where = min(jit / total, 1.0), "pg_stat_statements jit_*_time / total_exec_time (leader only)"
    if share is None:
        planned = inp.plans.jit_planned_share if inp.plans is not None else None
        why = (d.unread.get("pg_stat_statements") if d is not None else None) or "no counters in the baseline"
        notes.append(
            f"JIT share not measured: pg_stat_statements {why}; and no executed plans"
            + (f"; {planned:.0%} of the time is in plans that JIT-compile (EXPLAIN)" if planned is not None else "")
        )
        return
    if share < JIT_FLOOR:
        notes.append(f"JIT share measured {share:.1%} of execution time ({where}): below 1 %, jit kept")
        return
    b.put("jit", "off", f"measured: JIT compilation {share:.1%} of execution time ({where}); manual 32.2")


def _parallel(inp: SourceInput, b: SetBuilder, notes: list[str]) -> None:
    plans = inp.plans
    if plans is None or plans.parallel_share is None:
        notes.append(
            "parallel-query share not measured: no plan evidence (the workload's statements were not explained)"
        )
        return
    share = plans.parallel_share
    if share < PARALLEL_SHARE:
        notes.append(f"parallel plans {share:.0%} of execution time: parallel workers kept")
        return
    cap = cpu_cap(inp.ctx, "max_parallel_workers_per_gather") or float(inp.host.cpus)
    want = int(min(inp.host.cpus, cap))
    now = b.now("max_parallel_workers_per_gather") or 0.0
    if want <= now:
        return
    why = f"measured: {share:.0%} of execution time in parallel plans ({plans.workers_launched} workers launched)"
    b.put("max_parallel_workers_per_gather", str(want), f"{why}; up to the {want} cores allowed (manual 20.4.6)")
    if (b.now("max_parallel_workers") or 0.0) < want:
        b.put("max_parallel_workers", str(want), f"{why}; the pool must hold the workers per Gather")


def _spill(inp: SourceInput, b: SetBuilder, d: StateDelta | None, notes: list[str]) -> None:
    tb, tf = _total(d, _DB + "temp_bytes"), _total(d, _DB + "temp_files")
    if tb is None:
        notes.append("temporary-file spill not measured (no pg_stat_database counters)")
        return
    if tb <= 0 or not tf:
        return
    avg = tb / tf
    now = b.now_bytes("work_mem") or 4 * MiB
    committed = (
        (b.now_bytes("shared_buffers") or 0.0)
        + (b.now_bytes("wal_buffers") or 16 * MiB)
        + (b.now_bytes("maintenance_work_mem") or 64 * MiB) * (b.now("autovacuum_max_workers") or 3.0)
    )
    mult = b.now("hash_mem_multiplier") or 1.0
    room = per_connection_room(committed, inp.ctx, inp.policy, inp.host.max_connections, mult)
    want = min(max(math.ceil(avg / MiB) * MiB, now * 2), room)
    spill = f"measured: {tb / MiB:.0f} MiB in {tf:.0f} temporary files, {avg / MiB:.1f} MiB each"
    if want <= now:
        notes.append(
            f"{spill}, but the memory budget ({budget_bytes(inp.ctx, inp.policy) / MiB:.0f} MiB) holds no more "
            f"work_mem for {inp.host.max_connections} connections × hash_mem_multiplier {mult:g} "
            f"({room / MiB:.1f} MiB each): work_mem kept"
        )
        return
    b.put_bytes("work_mem", want, f"{spill}; capped by the budget at {room / MiB:.1f} MiB per connection")


def _cache(inp: SourceInput, b: SetBuilder, d: StateDelta | None, notes: list[str]) -> None:
    mem, data = inp.host.memory_bytes, inp.host.data_bytes
    miss = _miss(d)
    pattern, why = access_pattern(inp.host.workload_class, d)
    if miss is not None and miss >= MISS_RATIO and data is not None and scans_beyond_memory(pattern, data, mem):
        _scan_cache(inp, b, miss, data, pattern, why)
        return
    ecs = b.now_bytes("effective_cache_size")
    if ecs is not None and ecs > 0.75 * mem:
        b.put_bytes(
            "effective_cache_size",
            math.floor(0.75 * mem / MiB) * MiB,
            f"measured: it claims {ecs / GiB:.2f} GiB of cache, more than 75 % of the server's memory limit "
            f"{mem / GiB:.2f} GiB (manual 20.7.2)",
        )
    if miss is None:
        notes.append("buffer misses not measured (no pg_stat_database counters)")
        return
    if miss < MISS_RATIO:
        return
    sb = b.now_bytes("shared_buffers") or 128 * MiB
    if data is None:
        notes.append(f"buffer misses {miss:.0%} measured but the data size was not: shared_buffers kept")
        return
    room, room_why = budget_room(inp, b)
    got = size_shared_buffers(
        miss=miss, data=data, mem=mem, now=sb, pattern=pattern, why=why, room=room, room_why=room_why
    )
    log.info("opening.evidence.shared_buffers", pattern=pattern, value=got.value, reason=got.reason)
    if got.value is None:
        notes.append(got.reason)
    else:
        b.put_bytes("shared_buffers", got.value, got.reason)


def _probes(inp: SourceInput, b: SetBuilder, d: StateDelta | None, notes: list[str]) -> None:
    """effective_cache_size down to shared_buffers when the plans probe indexes beyond shared buffers and the
    baseline measured the misses (``opening_cache.probe_cache``), after the shared_buffers rule has sized the
    set's pool; why not in ``notes`` when the plans probe but the misses do not say so."""
    plans = inp.plans
    if plans is None:
        return
    sb, ecs = b.now_bytes("shared_buffers"), b.now_bytes("effective_cache_size")
    if sb is None or ecs is None:
        return
    pattern, _ = access_pattern(inp.host.workload_class, d)
    value, why = probe_cache(
        pattern,
        plans.probe_share,
        len(plans.probe_planned),
        inp.host.data_bytes,
        inp.host.memory_bytes,
        sb,
        ecs,
        miss=_miss(d),
        ecs_now=b.before_bytes("effective_cache_size"),
    )
    if value is not None:
        b.put_bytes("effective_cache_size", value, why)
    elif why:
        notes.append(why)


def _scan_cache(inp: SourceInput, b: SetBuilder, miss: float, data: float, pattern: str, why: str) -> None:
    """The cache of scans that read ``data`` bytes beyond the memory limit with ``miss`` (share of block reads
    missed) and the access ``pattern``/``why`` of :func:`access_pattern` (``opening_cache`` docstring):
    shared_buffers lowered to :func:`scan_buffers` and effective_cache_size to :data:`SCAN_CACHE_FACTOR` × it,
    each only when lower than in effect; the generic cache rules are not asked."""
    mem = inp.host.memory_bytes
    sb = b.now_bytes("shared_buffers") or 128 * MiB
    connections = int(b.now("max_connections") or inp.host.max_connections)
    got = size_shared_buffers(
        miss=miss,
        data=data,
        mem=mem,
        now=sb,
        pattern=pattern,
        why=why,
        room=math.inf,
        room_why="",
        connections=connections,
    )
    log.info("opening.evidence.shared_buffers", pattern=pattern, value=got.value, reason=got.reason)
    if got.value is not None:
        b.put_bytes("shared_buffers", got.value, got.reason)
    # the rule's own figure when a bad start keeps shared_buffers below it (128kB would give 512kB)
    sb_set = max(got.value if got.value is not None else sb, scan_buffers(mem, connections))
    ecs, want = b.now_bytes("effective_cache_size"), SCAN_CACHE_FACTOR * sb_set
    if ecs is None or ecs > want:
        b.put_bytes(
            "effective_cache_size",
            want,
            f"measured: {why}; the data ({data / GiB:.2f} GiB) exceeds the memory limit ({mem / GiB:.2f} GiB), "
            "so a query's own scans stream more than the cache through it and little of it is left for its "
            "index fetches (manual 20.7.2: the cache available to a single query): "
            f"{SCAN_CACHE_FACTOR} × shared_buffers {sb_set / MiB:.0f} MiB = {want / MiB:.0f} MiB, so the planner "
            "costs index fetches as reads (judgement; pg-tpch's TPE and oracle settled near 85 MB)",
        )


def _wal(b: SetBuilder, d: StateDelta | None, notes: list[str]) -> None:
    req, timed = _total(d, _BG + "checkpoints_req"), _total(d, _BG + "checkpoints_timed")
    wal = _total(d, _WAL + "wal_bytes")
    if req is not None and timed is not None and req >= 2 and req >= timed and wal and d is not None:
        timeout_s = b.now("checkpoint_timeout") or 300.0
        per_ckpt = wal / d.seconds * timeout_s
        want = max(2 * per_ckpt, 2 * (b.now_bytes("max_wal_size") or GiB))
        b.put_bytes(
            "max_wal_size",
            math.ceil(want / GiB) * GiB,
            f"measured: {req:.0f} requested vs {timed:.0f} timed checkpoints; {wal / d.seconds / MiB:.1f} MiB/s of "
            f"WAL is {per_ckpt / GiB:.2f} GiB per checkpoint_timeout (manual 30.5)",
        )
    full = _total(d, _WAL + "wal_buffers_full")
    if full and full > 0:
        if (b.now_bytes("wal_buffers") or 0.0) < 16 * MiB:
            b.put_bytes("wal_buffers", 16 * MiB, f"measured: wal_buffers_full = {full:.0f} (manual 20.5.1)")
    fpi, recs = _total(d, _WAL + "wal_fpi"), _total(d, _WAL + "wal_records")
    if fpi and recs and fpi / recs >= 0.3 and (b.current.get("wal_compression") or "off") in ("off", "false"):
        b.put("wal_compression", "lz4", f"measured: full-page images {fpi / recs:.0%} of WAL records (20.5.1)")
    if wal is None:
        notes.append("WAL volume not measured (no pg_stat_wal counters)")


_SESSION = ("sort_buffer_size", "join_buffer_size", "read_buffer_size", "read_rnd_buffer_size", "thread_stack")
_GLOBALS = ("key_buffer_size", "aria_pagecache_buffer_size", "innodb_log_buffer_size", "query_cache_size")


def _mariadb(inp: SourceInput) -> SourceOutput:
    d = delta_of(inp.ctx)
    b = SetBuilder(inp.ctx)
    notes: list[str] = []
    if d is None:
        return SourceOutput(None, "no baseline statistics", ["baseline statistics not measured"])
    rd, req = _total(d, _GS + "Innodb_buffer_pool_reads"), _total(d, _GS + "Innodb_buffer_pool_read_requests")
    peak = d.gauges.get(_GS + "Threads_connected")
    tmp_raised = 0.0  # bytes an in-memory temporary table may take per session once raised
    disk, tmp = _total(d, _GS + "Created_tmp_disk_tables"), _total(d, _GS + "Created_tmp_tables")
    if disk and tmp and disk / tmp >= 0.1:
        raised = {
            n: min((b.now_bytes(n) or 16 * MiB) * 4, 256 * MiB) for n in ("tmp_table_size", "max_heap_table_size")
        }
        for name, nbytes in raised.items():
            b.put_bytes(name, nbytes, f"measured: {disk / tmp:.0%} of temporary tables on disk")
        tmp_raised = min(raised.values())
    if rd is None or not req:
        notes.append("buffer pool misses not measured")
    elif rd / req >= 0.005:
        _pool(inp, b, rd / req, peak, notes, tmp_raised)
    waits = _total(d, _GS + "Innodb_log_waits")
    if waits and waits > 0 and (b.now_bytes("innodb_log_buffer_size") or 0.0) < 64 * MiB:
        b.put_bytes("innodb_log_buffer_size", 64 * MiB, f"measured: Innodb_log_waits = {waits:.0f}")
    age, cap = d.gauges.get("innodb.checkpoint_age_bytes"), d.gauges.get("variables.innodb_redo_log_capacity")
    if age and cap and age / cap >= 0.5:
        b.put_bytes(
            "innodb_log_file_size",
            2 * (b.now_bytes("innodb_log_file_size") or cap),
            f"measured: checkpoint age {age / cap:.0%} of the redo capacity (KB InnoDB Redo Log)",
        )
    if inp.host.data_bytes is None:
        notes.append(
            f"data size not measured for {inp.host.flavor}: {inp.host.data_why or 'not read'}; a buffer pool "
            "raised for misses takes one bounded step (max_step_factor), not the whole budget"
        )
    return _done(b, notes, f"{inp.host.workload_class} workload")


DATA_HEADROOM = 1.25
"""The pool holds the data and a quarter more (the host-sized set's MySQLTuner rule: pool ≥ data size; the
quarter is judgement: growth, the adaptive hash index and change buffer live in the pool too)."""


def _pool(
    inp: SourceInput, b: SetBuilder, miss: float, peak: float | None, notes: list[str], tmp_raised: float = 0.0
) -> None:
    """innodb_buffer_pool_size for measured misses: enough for the data plus :data:`DATA_HEADROOM` (MariaDB KB
    "InnoDB Buffer Pool": the pool should hold the working set, at most the data; a pool beyond it holds
    nothing more), never above what the budget leaves after the global caches and the observed sessions'
    buffers (``tmp_raised``: bytes of the in-memory temporary table each session may hold once raised, a
    per-session term of the validator's memory budget, validators/mysql.toml). Without the data size one
    bounded step: the pool in effect × ``policy.max_step_factor``, never the whole budget (a 24 GiB host's
    budget gave 17.4 GiB for 95 MiB of data)."""
    ctx, policy, host = inp.ctx, inp.policy, inp.host
    conns = math.ceil((peak or host.max_connections) * (1 + policy.capacity_headroom))
    per = sum(b.now_bytes(n) or 0.0 for n in _SESSION) + tmp_raised
    budget = budget_bytes(ctx, policy)
    room = budget - sum(b.now_bytes(n) or 0.0 for n in _GLOBALS) - conns * per
    now = b.now_bytes("innodb_buffer_pool_size") or 128 * MiB
    seen = f"measured: Innodb_buffer_pool_reads/read_requests = {miss:.3f}"
    if host.data_bytes is not None:
        want = DATA_HEADROOM * host.data_bytes
        why = (
            f"{seen}; the pool holds the data measured {host.data_bytes / MiB:,.0f} MiB (InnoDB data + index, "
            f"information_schema.TABLES) × {DATA_HEADROOM:g} (KB InnoDB Buffer Pool: sized to hold the working set)"
        )
    else:
        want = now * policy.max_step_factor
        why = (
            f"{seen}; data size not measured ({host.data_why or 'not read'}): one bounded step, the pool in "
            f"effect {now / MiB:,.0f} MiB × max_step_factor {policy.max_step_factor:g}, not the whole budget"
        )
    if room < want and inp.traded:
        freed, said = pool_room_from_unused(ctx, host.flavor, current_config(ctx))
        room, why = room + freed, why + said
    if room < want:
        want = room
        why += f"; capped by what the budget ({budget / MiB:,.0f} MiB) leaves after global caches and {conns} sessions"
    want = math.floor(want / MiB) * MiB
    if want <= now:
        notes.append(f"{why}: the pool in effect ({now / MiB:,.0f} MiB) already holds that, kept")
        return
    b.put_bytes("innodb_buffer_pool_size", want, why)
