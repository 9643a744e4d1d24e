"""The opening's evidence and limits sources and the plan evidence (issue 36 points 1 and 4), on real private
PostgreSQL 15 / MariaDB 10.11 servers with huge, forced faults (a 64 kB work_mem sort, JIT at cost 0, parallel
setup at cost 0, 1 kB in-memory temporary tables)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import psycopg
import pymysql
import pytest
from openingctx import context_of

from agenticdb.config.sections import PolicyConfig
from agenticdb.models import Measurement, Observed
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.opening import generate_opening
from agenticdb.planner.opening_evidence import evidence_driven
from agenticdb.planner.opening_limits import at_limits
from agenticdb.planner.opening_plans import workload_plans
from agenticdb.planner.opening_values import SourceInput, SourceOutput, host_view
from agenticdb.sandbox.mariadb import MariaDBSandboxInfo
from agenticdb.sandbox.postgres import PostgresSandboxInfo
from agenticdb.targets.mysql import MySQLTarget, parse_mysql_dsn
from agenticdb.targets.postgres import PostgresTarget
from agenticdb.targets.postgres_plans import PlanEvidence, explain_statements
from agenticdb.validation.sets import validate_set
from agenticdb.validation.validator import flavor_of
from agenticdb.workloads.base import Connection
from agenticdb.workloads.common import ensure_database, ensure_pg_stat_statements
from agenticdb.workloads.registry import connection_from_dsn

GiB = 1024**3
MiB = 1024**2
ROWS = 300_000
FORCE_JIT_AND_PARALLEL = (
    "SET jit = on; SET jit_above_cost = 0; SET jit_inline_above_cost = 0; SET jit_optimize_above_cost = 0; "
    "SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0; "
    "SET max_parallel_workers_per_gather = 2"
)


@pytest.fixture(scope="module")
def pg_table(pg_sandbox: PostgresSandboxInfo) -> Iterator[str]:
    with psycopg.connect(pg_sandbox.dsn, autocommit=True) as db:
        db.execute("DROP TABLE IF EXISTS opening_t")
        db.execute(f"CREATE TABLE opening_t AS SELECT g AS x, md5(g::text) AS s FROM generate_series(1, {ROWS}) g")
        db.execute("ANALYZE opening_t")
    yield pg_sandbox.dsn
    with psycopg.connect(pg_sandbox.dsn, autocommit=True) as db:
        db.execute("DROP TABLE IF EXISTS opening_t")


def _plans(dsn: str) -> PlanEvidence:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(FORCE_JIT_AND_PARALLEL)  # type: ignore[arg-type]
        return explain_statements(
            conn,
            {
                "agg": "SELECT sum(x), count(DISTINCT s) FROM opening_t WHERE x % 7 = 3",
                "write": "DELETE FROM opening_t",
            },
        )


def test_plan_evidence_reads_jit_and_parallel_time_from_the_executed_plans(pg_table: str) -> None:
    ev = _plans(pg_table)
    assert ev.statements == 1 and "write" in ev.skipped and "read-only" in ev.skipped["write"]
    assert ev.jit_functions > 0 and ev.jit_ms > 0, ev
    assert ev.workers_launched >= 1 and ev.parallel_share == 1.0, ev
    assert ev.exec_ms > 0 and ev.shared_hit_blocks + ev.shared_read_blocks > 0
    assert "JIT compilation" in ev.summary() and "parallel plans" in ev.summary()
    assert ev.counters()["plans.jit_time"] == ev.jit_ms
    with psycopg.connect(pg_table) as db:  # nothing was written
        row = db.execute("SELECT count(*) FROM opening_t").fetchone()
        assert row is not None and row[0] == ROWS


def _spill(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute("SET work_mem = '64kB'")
        for _ in range(3):
            db.execute("SELECT s FROM opening_t ORDER BY s DESC OFFSET 1000 LIMIT 1").fetchone()


def test_evidence_sizes_work_mem_from_the_spill_and_turns_jit_off_from_the_plans(
    pg: PostgresTarget, pg_table: str
) -> None:
    ctx = context_of(pg, workload_class="olap", memory=16 * GiB, load=lambda: _spill(pg_table))
    inp = SourceInput(
        ctx=ctx, host=host_view(ctx, flavor_of(ctx.catalog)), policy=PolicyConfig(), plans=_plans(pg_table)
    )
    out = evidence_driven(inp)
    c = out.candidate
    assert c is not None and c.name == "evidence", out
    assert (
        c.changes["jit"] == "off"
        and "EXPLAIN ANALYZE of 1 of the workload's statements, leader and workers" in c.sources["jit"]
    )
    wm = int(c.changes["work_mem"].removesuffix("MB"))
    assert wm >= 8, c.changes  # at least twice the 4MB in effect, sized to the measured spill
    assert "temporary files" in c.sources["work_mem"]
    assert not any("not measured" in n and "JIT" in n for n in out.notes), out.notes
    # the sample left the LLVM-optimised plans out and gave them the plain share: the source says it is a bound
    bounded = evidence_driven(replace(inp, plans=replace(inp.plans, jit_borrowed="optimised"))).candidate
    assert bounded is not None and "optimised plans not sampled: a lower bound); manual" in bounded.sources["jit"]


def test_evidence_says_what_it_could_not_measure(pg: PostgresTarget) -> None:
    ctx = context_of(pg)
    out = evidence_driven(SourceInput(ctx=ctx, host=host_view(ctx, flavor_of(ctx.catalog)), policy=PolicyConfig()))
    assert any(n.startswith("JIT share not measured") for n in out.notes), out.notes
    assert any(n.startswith("parallel-query share not measured") for n in out.notes), out.notes
    opening = generate_opening(ctx, policy=PolicyConfig())
    assert any(n.startswith("JIT share not measured") for n in opening.notes)


def test_limits_for_analytics_under_1gib_turn_jit_off_and_leave_the_cache(pg: PostgresTarget) -> None:
    ctx = context_of(pg, workload_class="olap", memory=1 * GiB)
    out = at_limits(SourceInput(ctx=ctx, host=host_view(ctx, flavor_of(ctx.catalog)), policy=PolicyConfig()))
    c = out.candidate
    assert c is not None
    assert c.changes["jit"] == "off" and "+81.6 %" in c.sources["jit"]
    # the figure is the project's benchmark, said as such: never "a measurement on this host" (a new user read it
    # as a claim about their own server)
    assert "not this server" in c.sources["jit"] and "on this host" not in c.sources["jit"], c.sources["jit"]
    assert not {"shared_buffers", "max_connections", "maintenance_work_mem"} & set(c.changes), c.changes
    # work_mem only as far as 768 MiB − 128 MiB − 3 × 64 MiB … holds for 50 connections × hash_mem_multiplier 2
    if "work_mem" in c.changes:
        assert int(c.changes["work_mem"].removesuffix("MB")) <= 4, c.changes
    else:
        assert any("work_mem at the budget" in n for n in out.notes), out.notes


def test_limits_for_oltp_take_the_cache_to_the_playbook_limit(pg: PostgresTarget) -> None:
    ctx = context_of(pg, workload_class="oltp", memory=16 * GiB)
    opening = generate_opening(ctx, policy=PolicyConfig())
    c = next(c for c in opening.candidates if c.name == "limits")
    assert c.changes["shared_buffers"] == "6553MB", c.changes  # 40 % of 16 GiB (manual 20.4.1)
    assert c.changes["jit"] == "off" and "max_connections" not in c.changes
    assert c.restart_knobs == ["shared_buffers", "wal_buffers"], c.restart_knobs
    # the candidates that restart are raced after those that do not
    order = opening.race_order()
    assert [x.needs_restart for x in order] == sorted(x.needs_restart for x in order)
    groups = opening.restart_groups()
    assert 1 <= len(groups) <= sum(1 for x in opening.candidates if x.needs_restart), groups


@pytest.fixture()
def maria(mariadb_sandbox: MariaDBSandboxInfo) -> Iterator[MySQLTarget]:
    t = MySQLTarget.from_config(mariadb_sandbox.target_config())
    yield t
    t.close()


def _disk_tables(dsn: str) -> None:
    kw = parse_mysql_dsn(dsn)
    with pymysql.connect(**kw) as db, db.cursor() as cur:  # type: ignore[arg-type]
        cur.execute("CREATE DATABASE IF NOT EXISTS opening_m")
        cur.execute("USE opening_m")
        cur.execute("CREATE TABLE IF NOT EXISTS opening_m.t (a INT, b VARCHAR(64))")
        cur.execute("INSERT INTO opening_m.t SELECT seq, md5(seq) FROM seq_1_to_20000")
        cur.execute("SET SESSION tmp_table_size = 1024, max_heap_table_size = 16384")
        for _ in range(20):  # far more on-disk temporary tables than the statistics reads' own in the window
            cur.execute("SELECT b, count(*) FROM opening_m.t GROUP BY b ORDER BY 2 DESC LIMIT 1")
            cur.fetchall()
        cur.execute("DROP DATABASE opening_m")


def test_mariadb_evidence_raises_temporary_tables_that_went_to_disk(
    maria: MySQLTarget, mariadb_sandbox: MariaDBSandboxInfo
) -> None:
    ctx = context_of(
        maria, memory=2 * GiB, benchmark="sysbench", load=lambda: _disk_tables(mariadb_sandbox.target_config().dsn)
    )
    out = evidence_driven(SourceInput(ctx=ctx, host=host_view(ctx, flavor_of(ctx.catalog)), policy=PolicyConfig()))
    c = out.candidate
    delta = ctx.profile.baseline_state
    assert delta is not None
    counters = {k: v for k, v in delta.totals.items() if "Created_tmp" in k}
    assert c is not None, (out, counters)
    # The rule, not the sandbox's history: each is raised 4 × from the value in effect (16 MiB when unset or
    # 0), capped at 256 MiB; earlier tests on this shared server may have left other global values.
    for name in ("tmp_table_size", "max_heap_table_size"):
        now = int(ctx.current_config[name]) or 16 * MiB
        assert int(c.changes[name]) == min(4 * now, 256 * MiB), (name, c.changes, counters)
    assert "temporary tables on disk" in c.sources["tmp_table_size"]
    assert any("data size not measured" in n for n in out.notes)


def test_the_workload_database_gets_pg_stat_statements_and_the_target_reads_jit_from_it(
    pg: PostgresTarget, pg_sandbox: PostgresSandboxInfo
) -> None:
    conn = connection_from_dsn("postgresql", pg_sandbox.dsn, "opening_wl")
    ensure_database(conn)
    try:
        with psycopg.connect(pg_sandbox.dsn.rsplit("/", 1)[0] + "/opening_wl", autocommit=True) as db:
            row = db.execute("SELECT extname FROM pg_extension WHERE extname = 'pg_stat_statements'").fetchone()
            assert row is not None, "pg_stat_statements not created in the workload's database"
            assert ensure_pg_stat_statements(conn) == "created"  # idempotent

            def jit_heavy() -> None:
                db.execute(FORCE_JIT_AND_PARALLEL)  # type: ignore[arg-type]
                db.execute("CREATE TABLE IF NOT EXISTS w AS SELECT g AS x FROM generate_series(1, 200000) g")
                for _ in range(5):
                    db.execute("SELECT sum(x * 2 + 1), avg(x) FROM w WHERE x % 3 = 1").fetchone()

            ctx = context_of(pg, workload_class="olap", load=jit_heavy)
        delta = ctx.profile.baseline_state
        assert delta is not None and delta.totals.get("pg_stat_statements.jit_time", 0.0) > 0, delta
    finally:
        with psycopg.connect(pg_sandbox.dsn, autocommit=True) as admin:
            admin.execute("DROP DATABASE IF EXISTS opening_wl")


class _QuerySet:
    """A query-set workload's two parts the plan reader uses: its statements and its connection."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def queries(self) -> dict[str, str]:
        return {"q01": "SELECT sum(x * 2), avg(x) FROM w WHERE x % 3 = 1", "q02": "SELECT count(*) FROM w WHERE x = 7"}


def test_plans_of_the_workload_weighted_by_the_baseline_without_executing_them(
    pg: PostgresTarget, pg_sandbox: PostgresSandboxInfo
) -> None:
    conn = connection_from_dsn("postgresql", pg_sandbox.dsn, "opening_plans")
    ensure_database(conn)
    try:
        with psycopg.connect(pg_sandbox.dsn.rsplit("/", 1)[0] + "/opening_plans", autocommit=True) as db:
            db.execute("CREATE TABLE w AS SELECT g AS x FROM generate_series(1, 200000) g")
            db.execute("ANALYZE w")
            for setting in FORCE_JIT_AND_PARALLEL.removeprefix("SET ").split("; SET "):
                name, value = setting.split(" = ")
                db.execute(f"ALTER DATABASE opening_plans SET {name} = {value}")  # type: ignore[arg-type]
        ctx = context_of(pg, workload_class="olap")
        run = Measurement(workload="tpch", objective=3.0, per_query_s={"q01": 2.0, "q02": 1.0})
        ctx = ctx.model_copy(update={"profile": ctx.profile.model_copy(update={"baseline": [run]})})
        plans, why = workload_plans(ctx, _QuerySet(conn), jit_budget_s=0)
        assert plans is not None, why
        assert not plans.analyzed and plans.statements == 2 and plans.exec_ms == 3000.0
        assert plans.jit_share is None and plans.jit_planned_share == 1.0, plans
        assert plans.parallel_share is not None and plans.parallel_share >= 2 / 3, plans
        assert "not executed" in plans.summary()
        # with the default budget the JIT-compiling statements run once under EXPLAIN ANALYZE
        sampled, why = workload_plans(ctx, _QuerySet(conn))
        assert sampled is not None and sampled.jit_sampled == 2 and sampled.exec_ms == 3000.0, why
        assert sampled.jit_share is not None and sampled.jit_share > 0, sampled
        assert "EXPLAIN ANALYZE of 2 of them" in sampled.summary()
        out = evidence_driven(
            SourceInput(ctx=ctx, host=host_view(ctx, "postgresql"), policy=PolicyConfig(), plans=plans)
        )
        assert not any(n.startswith("parallel-query share not measured") for n in out.notes), out.notes
        none, why = workload_plans(ctx, object())
        assert none is None and "no statement set" in why
    finally:
        with psycopg.connect(pg_sandbox.dsn, autocommit=True) as admin:
            admin.execute("DROP DATABASE IF EXISTS opening_plans")


def test_mariadb_limits_under_512mib_are_traded_then_shrunk_to_fit(maria: MySQLTarget) -> None:
    ctx = context_of(maria, memory=512 * MiB, benchmark="sysbench")
    opening = generate_opening(ctx, policy=PolicyConfig())
    c = next(c for c in opening.candidates if c.name == "limits")
    assert any("trade move" in r for r in c.repaired), c.repaired
    shrunk = [r for r in c.repaired if "shrunk to fit the memory budget" in r]
    assert shrunk and shrunk[0].startswith("innodb_buffer_pool_size: 402653184 → "), c.repaired  # 75 % of 512 MiB
    pool = int(c.changes["innodb_buffer_pool_size"])
    assert 128 * MiB <= pool < 384 * MiB, c.changes
    cur, hw = ctx.profile.current_config, ctx.profile.hardware
    # even on the worst case (no peak of connections observed: every one of max_connections), with the blocks in
    # use of the caches the trade gave (the capacity rules lower no cache without them)
    assert ctx.profile.baseline_state is not None
    used = {k: v for k, v in ctx.profile.baseline_state.gauges.items() if k.endswith("_blocks_used")}
    assert validate_set(c.changes, ctx.catalog, cur, hw, PolicyConfig(), observed=Observed(gauges=used)).ok
    assert "max_connections" not in c.changes


def test_limits_leave_the_cache_of_analytics_larger_than_40_percent_even_when_misses_are_diagnosed(
    pg: PostgresTarget,
) -> None:
    ctx = context_of(pg, workload_class="olap", memory=1 * GiB)
    d = ctx.profile.baseline_state
    assert d is not None
    # a huge fault: half of 2 M block reads missed shared buffers, 2 GiB of data under a 1 GiB limit
    missing = d.model_copy(
        update={
            "totals": {**d.totals, "pg_stat_database.blks_read": 1e6, "pg_stat_database.blks_hit": 1e6},
            "per_second": {**d.per_second, "pg_stat_database.blks_read": 1e6 / d.seconds},
            "gauges": {**d.gauges, "pg_database.size_bytes": 2.0 * GiB},
        }
    )
    ctx = ctx.model_copy(update={"profile": ctx.profile.model_copy(update={"baseline_state": missing})})
    out = at_limits(SourceInput(ctx=ctx, host=host_view(ctx, "postgresql"), policy=PolicyConfig()))
    assert out.candidate is not None and "shared_buffers" not in out.candidate.changes, out.candidate
    assert any("left to the kernel page cache" in n for n in out.notes), out.notes
    ev = evidence_driven(SourceInput(ctx=ctx, host=host_view(ctx, "postgresql"), policy=PolicyConfig()))
    assert ev.candidate is not None and ev.candidate.changes.get("shared_buffers") == "32MB", ev.candidate
    assert ev.candidate.sources["shared_buffers"].startswith("measured: buffer misses 50%"), ev.candidate.sources


def _misses(ctx: PlanningContext, *, data: float, scan_rows: float) -> PlanningContext:
    """``ctx`` with a baseline of 41 % buffer misses over ``data`` bytes, and row counters of ``scan_rows``
    sequential-scan rows out of 1 M read in 10 000 transactions (the rest fetched through indexes)."""
    d = ctx.profile.baseline_state
    assert d is not None
    totals = {
        "pg_stat_database.blks_read": 41e4,
        "pg_stat_database.blks_hit": 59e4,
        "pg_stat_database.tup_returned": 1e6,
        "pg_stat_database.tup_fetched": 1e6 - scan_rows,
        "pg_stat_database.xact_commit": 1e4,
        "pg_stat_database.xact_rollback": 0.0,
    }
    missing = d.model_copy(
        update={"totals": {**d.totals, **totals}, "gauges": {**d.gauges, "pg_database.size_bytes": data}}
    )
    return ctx.model_copy(update={"profile": ctx.profile.model_copy(update={"baseline_state": missing})})


def _assert_valid_as_set(ctx: PlanningContext, changes: dict[str, str]) -> None:
    """``changes`` pass the set validation against ``ctx``'s server with the baseline's gauges."""
    d = ctx.profile.baseline_state
    assert d is not None
    verdict = validate_set(
        changes,
        ctx.catalog,
        ctx.profile.current_config,
        ctx.profile.hardware,
        PolicyConfig(),
        observed=Observed(gauges=dict(d.gauges)),
    )
    assert verdict.ok, verdict.reasons()


def _evidence(ctx: PlanningContext) -> SourceOutput:
    return evidence_driven(SourceInput(ctx=ctx, host=host_view(ctx, "postgresql"), policy=PolicyConfig()))


def test_evidence_raises_shared_buffers_for_oltp_lookups_whose_data_fits_in_memory(pg: PostgresTarget) -> None:
    # pg-sysbench-ro-fit (benchmarks/README.md 2026-12-06): 0.81 GiB under 2 GiB, 41 % misses; the old rule
    # kept 128MB because 0.81 GiB > 40 % of 2 GiB, while TPE's best had 783MB (+27 %)
    ctx = _misses(context_of(pg, workload_class="oltp", memory=2 * GiB), data=0.81 * GiB, scan_rows=1e5)
    out = _evidence(ctx)
    c = out.candidate
    assert c is not None and c.changes["shared_buffers"] == "819MB", (c, out.notes)  # 40 % of 2 GiB
    src = c.sources["shared_buffers"]
    assert "manual's upper bound" in src and "20.4.1" in src and "an OLTP workload" in src, src
    assert "the data (0.81 GiB)" in src and "(2.00 GiB)" in src and "41%" in src, src


def test_evidence_keeps_shared_buffers_of_analytic_scans_larger_than_40_percent(pg: PostgresTarget) -> None:
    # pg-tpch-2g's shape: TPC-H SF 1 (~1.4 GiB with indexes) under 2 GiB: beyond 40 % of the limit, within it
    ctx = _misses(context_of(pg, workload_class="olap", memory=2 * GiB), data=1.4 * GiB, scan_rows=9.9e5)
    out = _evidence(ctx)
    assert out.candidate is None or "shared_buffers" not in out.candidate.changes, out.candidate
    note = next(n for n in out.notes if n.startswith("buffer misses 41%"))
    assert "an analytic workload" in note and "256 kB ring" in note and note.endswith("shared_buffers kept"), note


@pytest.mark.parametrize(("memory", "sb", "ecs"), [(1 * GiB, "32MB", "128MB"), (4 * GiB, None, "512MB")])
def test_evidence_lowers_the_cache_of_analytic_scans_beyond_the_memory_limit(
    pg: PostgresTarget, memory: int, sb: str | None, ecs: str
) -> None:
    # pg-tpch's shape: TPC-H SF 1 (~1.4 GiB with indexes) under 1 GiB; TPE and the oracle settled on
    # shared_buffers ≈ 24 MB and effective_cache_size ≈ 85 MB (benchmarks/README.md 2026-12-07). The set is
    # generated and validated as a whole, and the analytic class alone decides: the same data read through
    # indexes (oltp) takes the manual's 25 % instead. At 4 GiB 1/32 is the 128 MB in effect: never raised
    ctx = _misses(context_of(pg, workload_class="olap", memory=memory), data=1.4 * memory, scan_rows=9.9e5)
    c = next((c for c in generate_opening(ctx, policy=PolicyConfig()).candidates if c.name == "evidence"), None)
    assert c is not None and c.changes.get("shared_buffers") == sb and c.changes["effective_cache_size"] == ecs, c
    if sb is not None:
        src = c.sources["shared_buffers"]
        assert "exceeds the memory limit" in src and "256 kB ring" in src and "page cache" in src, src
    assert "a single query" in c.sources["effective_cache_size"], c.sources
    _assert_valid_as_set(ctx, c.changes)
    lookups = _evidence(_misses(context_of(pg, workload_class="oltp", memory=memory), data=1.4 * memory, scan_rows=1e5))
    assert lookups.candidate is None or lookups.candidate.changes.get("shared_buffers") != sb, lookups.candidate


def _tpch_shape(pg: PostgresTarget, **config: str) -> PlanningContext:
    """pg-tpch's shape (olap, 1.4 GiB of data under 1 GiB, 41 % misses) with ``config`` pretended in effect
    (the server is not restarted)."""
    ctx = _misses(context_of(pg, workload_class="olap", memory=1 * GiB), data=1.4 * GiB, scan_rows=9.9e5)
    cur = {**ctx.current_config, **config}
    return ctx.model_copy(
        update={"current_config": cur, "profile": ctx.profile.model_copy(update={"current_config": cur})}
    )


def test_evidence_never_lowers_shared_buffers_below_16_kb_per_connection(pg: PostgresTarget) -> None:
    # pg-tpch's shape with max_connections 3000 (pretended; the server is not restarted): 1/32 of 1 GiB is
    # 32MB, under 16 kB × 3000 = 47 MiB, the validator's harmful rule pg.shared_buffers-per-connection
    # ('no unpinned buffers available'), which refused the whole evidence set and its other moves with it
    ctx = _tpch_shape(pg, max_connections="3000")
    c = _evidence(ctx).candidate
    assert c is not None and c.changes.get("shared_buffers") == "47MB", c
    assert "16 kB × max_connections 3000" in c.sources["shared_buffers"], c.sources
    assert c.changes["effective_cache_size"] == "188MB", c.changes
    _assert_valid_as_set(ctx, c.changes)


def test_a_bad_start_below_the_scan_rule_keeps_effective_cache_size_at_the_rules_figure(pg: PostgresTarget) -> None:
    # shared_buffers 128kB (a bad start the playbook's floor repairs later): the scan rule never raises it,
    # and effective_cache_size is sized from the rule's 32 MiB, not 4 × 128kB = 512kB (the breaker's case)
    ctx = _tpch_shape(pg, shared_buffers="128kB")
    c = _evidence(ctx).candidate
    assert c is not None and "shared_buffers" not in c.changes, c
    assert c.changes["effective_cache_size"] == "128MB", c.changes


def test_evidence_sizes_shared_buffers_of_lookups_beyond_memory_at_the_manuals_start(pg: PostgresTarget) -> None:
    # data far beyond the limit: no cache holds it; 25 % of the limit (manual 20.4.1's starting value)
    small = _misses(context_of(pg, workload_class="oltp", memory=512 * MiB), data=3.0 * GiB, scan_rows=1e5)
    out = _evidence(small)
    assert out.candidate is None or "shared_buffers" not in out.candidate.changes, out.candidate
    note = next(n for n in out.notes if n.startswith("buffer misses 41%"))
    assert "exceeds the memory limit" in note and "25 % of the memory limit" in note, note
    assert "= 128 MiB, not above the 128 MiB in effect: shared_buffers kept" in note, note
    large = _misses(context_of(pg, workload_class="oltp", memory=2 * GiB), data=3.0 * GiB, scan_rows=1e5)
    c = _evidence(large).candidate
    assert c is not None and c.changes["shared_buffers"] == "512MB", c
    assert "25 % of the memory limit (manual 20.4.1)" in c.sources["shared_buffers"]


@pytest.mark.parametrize("memory", [512 * MiB, 1 * GiB, 2 * GiB])
def test_evidence_with_raised_shared_buffers_passes_the_set_validation_as_generated(
    pg: PostgresTarget, memory: int
) -> None:
    # sysbench's shape at each limit: data 40.5 % of it, point reads, 41 % misses
    ctx = _misses(context_of(pg, workload_class="oltp", memory=memory), data=0.405 * memory, scan_rows=1e5)
    sb = int(_evidence(ctx).candidate.changes["shared_buffers"].removesuffix("MB"))  # type: ignore[union-attr]
    assert 128 < sb <= 0.40 * memory / MiB, sb
    opening = generate_opening(ctx, policy=PolicyConfig())
    c = next((c for c in opening.candidates if c.name == "evidence"), None)
    assert c is not None, opening.dropped
    assert c.changes["shared_buffers"] == f"{sb}MB" and not c.repaired, c  # it fits the budget as generated
    _assert_valid_as_set(ctx, c.changes)


def test_limits_leave_random_io_knobs_when_the_baseline_measured_no_io_wait(pg: PostgresTarget) -> None:
    # analytic data that fits in memory: PGTune's rule would take random_page_cost to 1.1 — but the
    # baseline's 100 000 reads waited 0 ms each (the page cache served them, as on pg-tpch-fit), so the knob
    # would only move plans towards index scans
    ctx = context_of(pg, workload_class="olap", memory=16 * GiB)
    d = ctx.profile.baseline_state
    assert d is not None
    fits = d.model_copy(
        update={
            "gauges": {**d.gauges, "pg_database.size_bytes": 1.0 * GiB},
            "totals": {**d.totals, "pg_stat_database.blks_read": 1e5, "pg_stat_database.blk_read_time": 0.0},
            "per_second": {**d.per_second, "pg_stat_database.blks_read": 1e5 / d.seconds},
        }
    )
    ctx = ctx.model_copy(update={"profile": ctx.profile.model_copy(update={"baseline_state": fits})})
    out = at_limits(SourceInput(ctx=ctx, host=host_view(ctx, "postgresql"), policy=PolicyConfig()))
    assert out.candidate is not None and "random_page_cost" not in out.candidate.changes, out.candidate
    # one note for the random-I/O knobs it leaves, with the measurement whole (a demo's note ended "queue depth wei)")
    why = next(n for n in out.notes if "left: the baseline measured no I/O wait" in n)
    assert "random_page_cost" in why.partition(" left: ")[0] and why.endswith(")"), why
    # the same baseline with reads waiting 20 ms each on the device: the knob is taken to the playbook's limit
    slow = fits.model_copy(
        update={
            "totals": {**fits.totals, "pg_stat_database.blks_read": 1e5, "pg_stat_database.blk_read_time": 2e6},
            "per_second": {**fits.per_second, "pg_stat_database.blks_read": 1e5 / fits.seconds},
        }
    )
    ctx = ctx.model_copy(update={"profile": ctx.profile.model_copy(update={"baseline_state": slow})})
    out = at_limits(SourceInput(ctx=ctx, host=host_view(ctx, "postgresql"), policy=PolicyConfig()))
    assert out.candidate is not None, out.notes
    assert out.candidate.changes.get("random_page_cost") == "1.1", (out.candidate, out.notes)


def test_mariadb_limits_leave_the_log_buffer_when_the_baseline_measured_no_log_waits(maria: MySQLTarget) -> None:
    """The playbook's innodb_log_buffer_size entry serves transactions waiting for log buffer space, which
    Innodb_log_waits counts (its ``needs``). The limits set raised it to its 256 MiB limit for OLTP (wal_fsync is
    one of the class's bottlenecks) on a baseline with no such wait, and the memory budget then shrank it to
    132 MiB in a 512 MiB server. With the counter measured at 0 it is left, the note says why; with waits counted
    it is taken to the limit; without the counter in the sample it is taken as before."""
    ctx = context_of(maria, memory=512 * MiB, benchmark="sysbench")
    d = ctx.profile.baseline_state
    waits_key = "global_status.Innodb_log_waits"
    assert d is not None and waits_key in d.totals, sorted(d.totals)[:20]

    def limits(waits: float | None) -> SourceOutput:
        totals = {k: v for k, v in d.totals.items() if k != waits_key}
        per_second = {k: v for k, v in d.per_second.items() if k != waits_key}
        if waits is not None:
            totals[waits_key], per_second[waits_key] = waits, waits / d.seconds
        base = d.model_copy(update={"totals": totals, "per_second": per_second})
        c = ctx.model_copy(update={"profile": ctx.profile.model_copy(update={"baseline_state": base})})
        return at_limits(SourceInput(ctx=c, host=host_view(c, flavor_of(c.catalog)), policy=PolicyConfig()))

    assert d.totals[waits_key] == 0, d.totals[waits_key]  # the real sample: the server waited for no log space
    none = limits(d.totals[waits_key])
    assert none.candidate is not None and "innodb_log_buffer_size" not in none.candidate.changes, none.candidate
    assert "limits: innodb_log_buffer_size left: Innodb_log_waits = 0 measured" in none.notes, none.notes
    waits = limits(40.0)
    assert waits.candidate is not None and int(waits.candidate.changes["innodb_log_buffer_size"]) == 256 * MiB
    assert not any("innodb_log_buffer_size" in n for n in waits.notes), waits.notes
    unread = limits(None)
    assert unread.candidate is not None and "innodb_log_buffer_size" in unread.candidate.changes, unread.candidate
