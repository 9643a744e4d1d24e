"""HeuristicPlanner: proposals from recorded states, refinement over hand-built rounds, experience seeding,
bad-start floors and the commit_delay trap. Catalogs are built by hand, mirroring pg_settings /
information_schema.SYSTEM_VARIABLES / the Linux catalog metadata (units "8kB", "kB", "MB", "ms", "s").
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from agenticdb.models import (
    ApplyMode,
    Bottleneck,
    Catalog,
    Decision,
    FailedCheck,
    Failure,
    Hardware,
    KnobSpec,
    Layer,
    NormalizedChange,
    Proposal,
    RoundOutcome,
    RuntimeProfile,
    StateDelta,
)
from agenticdb.models.planning import Experience, Fingerprint, PlanningContext
from agenticdb.planner.heuristic import HeuristicPlanner
from agenticdb.planner.playbook import PlaybookEntry, ProbeEntry, Sizing, load_playbook
from agenticdb.resources import data_dir
from agenticdb.targets.mysql import MySQLTarget
from agenticdb.units import canonical, parse_value

STATES = Path(__file__).parent / "data" / "states"
GiB = 2**30


def _k(
    name: str,
    vartype: str,
    apply: str,
    default: str,
    unit: str | None = None,
    lo: float | None = None,
    hi: float | None = None,
    enum: list[str] | None = None,
    layer: Layer = Layer.dbms,
    block: int | None = None,
) -> KnobSpec:
    return KnobSpec(
        name=name,
        vartype=vartype,
        apply=ApplyMode(apply),
        default=default,
        unit=unit,  # type: ignore[arg-type]
        min_value=lo,
        max_value=hi,
        enum_values=enum,
        layer=layer,
        block_size=block,
    )


PG_KNOBS = [  # PostgreSQL 15 pg_settings: name, vartype, context→apply, boot_val, unit, min, max
    _k("shared_buffers", "integer", "restart", "16384", "8kB", 16, 1073741823),
    _k("effective_cache_size", "integer", "reload", "524288", "8kB", 1, 2147483647),
    _k("work_mem", "integer", "reload", "4096", "kB", 64, 2147483647),
    _k("maintenance_work_mem", "integer", "reload", "65536", "kB", 1024, 2147483647),
    _k("max_wal_size", "integer", "reload", "1024", "MB", 2, 2147483647),
    _k("checkpoint_timeout", "integer", "reload", "300", "s", 30, 86400),
    _k("checkpoint_completion_target", "real", "reload", "0.9", None, 0, 1),
    _k("wal_buffers", "integer", "restart", "-1", "8kB", -1, 262143),
    _k("commit_delay", "integer", "reload", "0", None, 0, 100000),
    _k("commit_siblings", "integer", "reload", "5", None, 0, 1000),
    _k("wal_compression", "enum", "reload", "off", enum=["pglz", "lz4", "zstd", "on", "off"]),
    _k("wal_writer_delay", "integer", "reload", "200", "ms", 1, 10000),
    _k("effective_io_concurrency", "integer", "reload", "1", None, 0, 1000),
    _k("random_page_cost", "real", "reload", "4", None, 0, 1.79769e308),
    _k("bgwriter_lru_maxpages", "integer", "reload", "100", None, 0, 1073741823),
    _k("jit", "bool", "reload", "on"),
    _k("enable_indexscan", "bool", "dynamic", "on"),
    _k("enable_bitmapscan", "bool", "dynamic", "on"),
    _k("enable_hashjoin", "bool", "dynamic", "on"),
    _k("enable_mergejoin", "bool", "dynamic", "on"),
    _k("enable_nestloop", "bool", "dynamic", "on"),
    _k("geqo", "bool", "dynamic", "on"),
    _k("enable_partition_pruning", "bool", "dynamic", "on"),
    _k("jit_above_cost", "real", "reload", "100000", None, -1, 1.79769e308),
    _k("max_parallel_workers_per_gather", "integer", "reload", "2", None, 0, 1024),
    _k("deadlock_timeout", "integer", "reload", "1000", "ms", 1, 2147483647),
    _k("max_connections", "integer", "restart", "100", None, 1, 262143),
]
PG_DEFAULTS = {  # current_setting() spellings, as the PostgreSQL target reports them
    "shared_buffers": "128MB",
    "effective_cache_size": "4GB",
    "work_mem": "4MB",
    "maintenance_work_mem": "64MB",
    "max_wal_size": "1GB",
    "checkpoint_timeout": "5min",
    "checkpoint_completion_target": "0.9",
    "wal_buffers": "4MB",
    "commit_delay": "0",
    "commit_siblings": "5",
    "wal_compression": "off",
    "wal_writer_delay": "200ms",
    "effective_io_concurrency": "1",
    "random_page_cost": "4",
    "bgwriter_lru_maxpages": "100",
    "jit": "on",
    "enable_indexscan": "on",
    "enable_bitmapscan": "on",
    "enable_hashjoin": "on",
    "enable_mergejoin": "on",
    "enable_nestloop": "on",
    "geqo": "on",
    "max_parallel_workers_per_gather": "2",
    "deadlock_timeout": "1s",
    "max_connections": "100",
}
MY_KNOBS = [  # MariaDB 10.11 SYSTEM_VARIABLES
    _k(
        "innodb_buffer_pool_size",
        "integer",
        "dynamic",
        "134217728",
        "B",
        2097152,
        18446744073701163008,
        block=1048576,
    ),
    _k("innodb_log_buffer_size", "integer", "restart", "16777216", "B", 262144, 18446744073709551615),
    _k("join_cache_level", "integer", "dynamic", "2", None, 0, 8),
    _k("optimizer_prune_level", "integer", "dynamic", "2", None, 0, 2),
    _k("optimizer_max_sel_arg_weight", "integer", "dynamic", "32000", None, 0, 18446744073709551615),
    _k("join_buffer_size", "integer", "dynamic", "262144", "B", 128, 18446744073709551615, block=128),
    _k(
        "innodb_flush_method",
        "enum",
        "restart",
        "O_DIRECT",
        enum=["fsync", "O_DSYNC", "littlesync", "nosync", "O_DIRECT", "O_DIRECT_NO_FSYNC"],
    ),
    _k("innodb_log_file_size", "integer", "dynamic", "100663296", "B", 1048576, 512 * GiB),
    _k("innodb_io_capacity", "integer", "dynamic", "200", None, 100, 18446744073709551615),
    _k("innodb_io_capacity_max", "integer", "dynamic", "4294967295", None, 100, 18446744073709551615),
    _k("tmp_table_size", "integer", "dynamic", "16777216", "B", 1024, 18446744073709551615),
    _k("max_heap_table_size", "integer", "dynamic", "16777216", "B", 16384, 18446744073709551615),
    _k("thread_cache_size", "integer", "dynamic", "151", None, 0, 16384),
    _k("table_open_cache", "integer", "dynamic", "2000", None, 10, 1048576),
    _k("max_connections", "integer", "dynamic", "151", None, 10, 100000),
]
LINUX_KNOBS = [
    _k("vm.dirty_background_ratio", "integer", "dynamic", "10", "%", 0, 100, layer=Layer.os),
    _k("vm.dirty_ratio", "integer", "dynamic", "20", "%", 0, 100, layer=Layer.os),
    _k("vm.dirty_expire_centisecs", "integer", "dynamic", "3000", "cs", 0, 2147483647, layer=Layer.os),
    _k("vm.swappiness", "integer", "dynamic", "60", None, 0, 200, layer=Layer.os),
    _k("vm.vfs_cache_pressure", "integer", "dynamic", "100", None, 0, 1000, layer=Layer.os),
    _k("vm.min_free_kbytes", "integer", "dynamic", "67584", "kB", 0, 2**31, layer=Layer.os),
    _k("block.vda.read_ahead_kb", "integer", "dynamic", "128", "kB", 0, 65536, layer=Layer.os),
    _k("block.vda.nr_requests", "integer", "dynamic", "256", None, 4, 4096, layer=Layer.os),
    _k(
        "block.vda.scheduler",
        "enum",
        "dynamic",
        "bfq",
        enum=["mq-deadline", "kyber", "bfq", "none"],
        layer=Layer.os,
    ),
]


def _catalog(target: str, knobs: list[KnobSpec], drop: tuple[str, ...] = ()) -> Catalog:
    return Catalog(target=target, version="x", knobs={k.name: k for k in knobs if k.name not in drop})


def _delta(name: str) -> StateDelta:
    return StateDelta.model_validate(json.loads((STATES / f"{name}.json").read_text())["delta"])


def _ctx(
    state: str,
    family: str = "postgresql",
    mem_gib: int = 4,
    config: dict[str, str] | None = None,
    stage: Layer = Layer.dbms,
    drop: tuple[str, ...] = (),
    workload_class: str = "oltp",
    **kw: object,
) -> PlanningContext:
    knobs, defaults = {
        "postgresql": (PG_KNOBS, PG_DEFAULTS),
        "mariadb": (MY_KNOBS, {}),
        "linux": (LINUX_KNOBS, {}),
    }["linux" if stage == Layer.os else family]
    hw = Hardware(
        cpu_count=2,
        memory_bytes=mem_gib * GiB,
        memory_limit_bytes=mem_gib * GiB,
        disk_free_bytes=50 * GiB,
        data_device="/dev/vda",
    )
    current = {**defaults, **(config or {})}
    profile = RuntimeProfile(target=family, dbms_version="15", hardware=hw, current_config=current)
    fp = Fingerprint(
        dbms=family,
        version_major="15",
        benchmark="sysbench",
        workload_class=workload_class,
        read_fraction=0.7,
    )  # type: ignore[arg-type]
    return PlanningContext(
        profile=profile,
        fingerprint=fp,
        catalog=_catalog(family, knobs, drop),
        stage=stage,
        current_config=current,
        last_delta=_delta(state),
        **kw,
    )  # type: ignore[arg-type]


def _round(
    no: int,
    b: Bottleneck,
    changes: dict[str, str],
    kept: bool,
    gain: float | None = None,
    decision: Decision = Decision.continue_,
    **kw: object,
) -> RoundOutcome:
    return RoundOutcome(
        session_id="s1",
        round_no=no,
        stage=Layer.dbms,
        bottleneck=b,
        verdict_ok=True,
        changes=changes,
        kept=kept,
        gain_vs_best=gain,
        decision=decision,
        reason="test",
        **kw,
    )  # type: ignore[arg-type]


def _check_bounds(ctx: PlanningContext, p: Proposal) -> None:
    """Every change exists in the catalog, is new, and moves at most max_step_factor."""
    assert len(p.changes) <= ctx.max_changes
    for c in p.changes:
        spec = ctx.catalog.knobs[c.name]
        new = parse_value(c.value, spec)
        old = parse_value(ctx.current_config.get(c.name, spec.default), spec)
        if new is not None and old is not None and old > 0 and new > 0:
            assert 1 / ctx.max_step_factor - 1e-9 <= new / old <= ctx.max_step_factor + 1e-9, (c, old)
        if spec.unit in ("8kB", "kB", "MB") and isinstance(c.value, str):
            assert re.fullmatch(r"\d+(kB|MB|GB|TB)", c.value), c.value
        assert canonical(c.name, c.value, spec) != canonical(c.name, ctx.current_config.get(c.name, ""), spec)


PLANNER = HeuristicPlanner()


# ------------------------------------------------------------------------- first proposals by state


@pytest.mark.parametrize(
    ("state", "bottleneck", "knobs"),
    [
        ("pg_buffer_cache", Bottleneck.buffer_cache, {"shared_buffers": "512MB"}),  # 4GB cache ≥ 75% already
        (
            "pg_wal_fsync",
            Bottleneck.wal_fsync,
            {"wal_buffers": "16MB", "wal_compression": "lz4", "wal_writer_delay": "100ms"},
        ),
        ("pg_checkpoint", Bottleneck.checkpoint, {"max_wal_size": "2560MB", "checkpoint_timeout": "15min"}),
        (
            "pg_io_queue",
            Bottleneck.io_queue,
            {"effective_io_concurrency": 4, "random_page_cost": 1.1, "bgwriter_lru_maxpages": 400},
        ),
        ("pg_cpu", Bottleneck.cpu, {"jit": "off"}),
        ("pg_temp_spill", Bottleneck.temp_spill, {"work_mem": "10MB", "maintenance_work_mem": "204MB"}),
        ("pg_lock_contention", Bottleneck.lock_contention, {"deadlock_timeout": "2s"}),
        ("pg_connections", Bottleneck.connections, {"max_connections": 125}),
    ],
)
def test_postgresql_first_proposal_follows_the_diagnosis(
    state: str, bottleneck: Bottleneck, knobs: dict[str, object]
) -> None:
    ctx = _ctx(state)
    p = PLANNER.propose(ctx)
    assert p.bottleneck == bottleneck and not p.plateau
    assert {c.name: c.value for c in p.changes} == knobs
    _check_bounds(ctx, p)
    assert p.evidence[0].startswith(f"{bottleneck.value} (score ")
    assert any(ch.isdigit() for ch in p.evidence[0])
    assert p.ruled_out and all("score" in r for r in p.ruled_out)
    assert len(p.intended_effects) == len(p.changes)
    assert all("source:" in c.rationale for c in p.changes)
    restart = any(ctx.catalog.knobs[c.name].apply == ApplyMode.restart for c in p.changes)
    assert (p.apply_requirement == ApplyMode.restart) == restart


def test_shared_buffers_is_sized_from_memory_within_the_step_bound() -> None:
    ctx = _ctx("pg_buffer_cache", mem_gib=4, max_step_factor=10.0)
    p = PLANNER.propose(ctx)
    assert p.changes[0].name == "shared_buffers" and p.changes[0].value == "1GB"  # 25% of 4 GiB
    assert p.apply_requirement == ApplyMode.restart
    assert any("restart required for shared_buffers" in r for r in p.risks)


def test_max_changes_and_catalog_and_restart_permission_are_respected() -> None:
    p = PLANNER.propose(_ctx("pg_io_queue", max_changes=1))
    assert [c.name for c in p.changes] == ["effective_io_concurrency"]
    p = PLANNER.propose(_ctx("pg_wal_fsync", drop=("wal_buffers",)))
    assert "wal_buffers" not in {c.name for c in p.changes} and p.changes
    p = PLANNER.propose(_ctx("pg_buffer_cache", allow_restart=False, config={"effective_cache_size": "1GB"}))
    assert [c.name for c in p.changes] == ["effective_cache_size"]
    assert p.apply_requirement == ApplyMode.reload


def test_mariadb_sizes_are_integer_bytes_on_block_boundaries() -> None:
    ctx = _ctx("mariadb_buffer_cache", family="mariadb", config={"innodb_buffer_pool_size": "134217728"})
    p = PLANNER.propose(ctx)
    assert p.bottleneck == Bottleneck.buffer_cache
    (c,) = p.changes
    assert c.name == "innodb_buffer_pool_size" and c.value == 4 * 134217728
    assert isinstance(c.value, int) and c.value % 1048576 == 0
    p = PLANNER.propose(_ctx("mariadb_temp_spill", family="mariadb"))
    assert {c.name: c.value for c in p.changes} == {
        "tmp_table_size": 64 * 2**20,
        "max_heap_table_size": 64 * 2**20,
    }
    p = PLANNER.propose(_ctx("mariadb_wal_fsync", family="mariadb", config={"innodb_flush_method": "fsync"}))
    assert {c.name: c.value for c in p.changes} == {
        "innodb_log_buffer_size": 64 * 2**20,
        "innodb_flush_method": "O_DIRECT",
    }


def test_linux_moves_use_catalog_names_and_integers() -> None:
    p = PLANNER.propose(_ctx("os_writeback", stage=Layer.os))
    assert p.layer == Layer.os and p.bottleneck == Bottleneck.writeback
    assert {c.name: c.value for c in p.changes} == {
        "vm.dirty_background_ratio": 5,
        "vm.dirty_ratio": 10,
        "vm.dirty_expire_centisecs": 1500,
    }
    p = PLANNER.propose(_ctx("os_io_queue", stage=Layer.os))
    assert {c.name: c.value for c in p.changes} == {
        "block.vda.read_ahead_kb": 32,
        "block.vda.nr_requests": 512,
        "block.vda.scheduler": "mq-deadline",
    }
    # swappiness is never pushed to 0: at the floor of 1 nothing is left for it
    ctx = _ctx("os_memory_reclaim", stage=Layer.os, config={"vm.swappiness": "1", "vm.vfs_cache_pressure": "50"})
    p = PLANNER.propose(ctx)
    assert {c.name for c in p.changes} == {"vm.min_free_kbytes"}
    assert p.changes[0].value == 67584 * 4 or p.changes[0].value <= 67584 * 4


def test_min_free_kbytes_stays_under_the_validators_cap_of_the_memory_limit() -> None:
    """The Linux playbook sizes vm.min_free_kbytes from RAM; the validator caps it at 5 % of the memory
    limit (min(RAM, cgroup limit), validators/linux.toml linux.min_free_kbytes). Under a 256 MiB limit
    the first os-read-ahead-tiny probe wasted two rounds on refusals: the planner now stops at the cap,
    and proposes nothing when the value in effect is already above it."""
    from agenticdb.config.sections import PolicyConfig
    from agenticdb.validation.validator import validate

    relaxed = {"vm.swappiness": "1", "vm.vfs_cache_pressure": "50"}
    ctx = _ctx("os_memory_reclaim", stage=Layer.os, config={**relaxed, "vm.min_free_kbytes": "4096"})
    hw = ctx.profile.hardware.model_copy(update={"memory_limit_bytes": 256 * 1024 * 1024})
    profile = ctx.profile.model_copy(update={"hardware": hw})
    ctx = ctx.model_copy(update={"profile": profile, "catalog": _catalog("linux", LINUX_KNOBS)})
    p = PLANNER.propose(ctx)
    value = {c.name: c.value for c in p.changes}["vm.min_free_kbytes"]
    assert 4096 < int(value) <= 0.05 * 256 * 1024
    verdict = validate(p, ctx.catalog, ctx.current_config, hw, PolicyConfig(), Layer.os)
    assert not [f for f in verdict.failed if f.parameter == "vm.min_free_kbytes"], verdict.failed
    ctx = ctx.model_copy(update={"current_config": {**ctx.current_config, "vm.min_free_kbytes": "67584"}})
    assert "vm.min_free_kbytes" not in {c.name for c in PLANNER.propose(ctx).changes}


def test_a_tiny_read_ahead_goes_back_to_the_kernel_default_whatever_the_diagnosis() -> None:
    """Scenario os-read-ahead-tiny (issue 22): read_ahead_kb = 8 under sequential scans in a 256 MiB cgroup
    was diagnosed memory_reclaim (the cgroup's page cache thrashes either way) and the session tried
    swappiness and min_free_kbytes; the device's read-ahead below any value the playbook would choose is a
    bad start of its own, undone first (the kernel default 128 kB is one move away)."""
    ctx = _ctx("os_memory_reclaim", stage=Layer.os, config={"block.vda.read_ahead_kb": "8"})
    p = PLANNER.propose(ctx)
    assert p.bottleneck == Bottleneck.io_queue
    assert {c.name: c.value for c in p.changes}.get("block.vda.read_ahead_kb") == 128
    assert "bad start" in p.rationale and p.repairs == ["block.vda.read_ahead_kb"]
    # 16 kB and more is a choice the io_queue entries make themselves (OLTP: down to 32, then 16)
    p = PLANNER.propose(_ctx("os_memory_reclaim", stage=Layer.os, config={"block.vda.read_ahead_kb": "16"}))
    assert "block.vda.read_ahead_kb" not in {c.name for c in p.changes}


def _with_rows(delta: StateDelta, returned: float, fetched: float, commits: float) -> StateDelta:
    totals = {
        **delta.totals,
        "pg_stat_database.tup_returned": returned,
        "pg_stat_database.tup_fetched": fetched,
        "pg_stat_database.xact_commit": commits,
    }
    return delta.model_copy(update={"totals": totals})


def test_a_workload_that_scans_whole_tables_gets_the_analytic_read_ahead() -> None:
    """Scenario os-read-ahead-tiny (issue 22): a command workload of full-table counts scored on TPS is
    declared OLTP, and the io_queue entries lowered read-ahead for it. What the server counted (2 M rows
    read by sequential scans per statement) makes it analytic: read-ahead goes up, not down."""
    ctx = _ctx("os_io_queue", stage=Layer.os)
    scans = _with_rows(ctx.last_delta, returned=2_000_000 * 30, fetched=40, commits=30)  # type: ignore[arg-type]
    p = PLANNER.propose(ctx.model_copy(update={"last_delta": scans}))
    assert {c.name: c.value for c in p.changes}.get("block.vda.read_ahead_kb") == 512  # 128 × 4 toward 1024
    lookups = _with_rows(ctx.last_delta, returned=90_000, fetched=88_000, commits=30_000)  # type: ignore[arg-type]
    p = PLANNER.propose(ctx.model_copy(update={"last_delta": lookups}))
    assert {c.name: c.value for c in p.changes}.get("block.vda.read_ahead_kb") == 32


def test_jit_off_is_not_proposed_when_pg_stat_statements_measured_no_jit_time() -> None:
    """A demo round proposed jit = off for pgbench while its own evidence read JIT at 0 % of statement
    time: a placebo. With pg_stat_statements counting JIT below 1 % of execution time the cpu entry is
    skipped; without the extension's counters it applies as before; at a real share it applies."""
    ctx = _ctx("pg_cpu")
    assert ctx.last_delta is not None

    def with_jit(jit_ms: float, exec_ms: float = 10_000.0) -> PlanningContext:  # over the 15-s sample
        totals = {
            **ctx.last_delta.totals,  # type: ignore[union-attr]
            "pg_stat_statements.jit_time": jit_ms,
            "pg_stat_statements.total_exec_time": exec_ms,
        }
        return ctx.model_copy(update={"last_delta": ctx.last_delta.model_copy(update={"totals": totals})})  # type: ignore[union-attr]

    p = PLANNER.propose(with_jit(0.0))
    assert "jit" not in {c.name for c in p.changes}
    assert "not jit: measured pg_stat_statements.jit_time / pg_stat_statements.total_exec_time = 0.0%" in (
        p.rationale
    ), p.rationale
    assert {c.name: c.value for c in PLANNER.propose(ctx).changes}.get("jit") == "off"
    assert "jit" not in PLANNER.propose(ctx).repairs  # off is not the default: a move, not a repair
    # 100 ms of statement time in 15 s is too little volume to call JIT absent: the entry applies
    assert {c.name: c.value for c in PLANNER.propose(with_jit(0.0, exec_ms=100.0)).changes}.get("jit") == "off"
    assert {c.name: c.value for c in PLANNER.propose(with_jit(500.0)).changes}.get("jit") == "off"


# -------------------------------------------------------------------------------- refinement


def test_kept_direction_is_pushed_with_shrinking_steps() -> None:
    cfg = {"effective_io_concurrency": "200"}
    r1 = _round(1, Bottleneck.io_queue, {"effective_io_concurrency": "200"}, kept=True, gain=0.10)
    p = PLANNER.propose(_ctx("pg_io_queue", config=cfg, rounds=[r1]))
    assert {c.name: c.value for c in p.changes} == {"effective_io_concurrency": 300}  # second step ×1.5
    assert "pushing the same direction" in p.rationale
    r2 = _round(2, Bottleneck.io_queue, {"effective_io_concurrency": "300"}, kept=True, gain=0.05)
    p = PLANNER.propose(_ctx("pg_io_queue", config={"effective_io_concurrency": "300"}, rounds=[r1, r2]))
    assert {c.name: c.value for c in p.changes} == {"effective_io_concurrency": 375}  # third step ×1.25


def test_unkept_change_is_not_repeated_and_its_direction_is_dropped() -> None:
    r1 = _round(1, Bottleneck.buffer_cache, {"shared_buffers": "512MB", "effective_cache_size": "2GB"}, kept=False)
    p = PLANNER.propose(_ctx("pg_buffer_cache", rounds=[r1]))
    assert p.bottleneck != Bottleneck.buffer_cache or not (
        {"shared_buffers", "effective_cache_size"} & {c.name for c in p.changes}
    )
    r1 = _round(1, Bottleneck.buffer_cache, {"shared_buffers": "512MB"}, kept=False)
    p = PLANNER.propose(_ctx("pg_buffer_cache", rounds=[r1], config={"effective_cache_size": "1GB"}))
    assert [c.name for c in p.changes] == ["effective_cache_size"]


def test_two_unkept_rounds_redirect_to_the_next_hypothesis() -> None:
    r1 = _round(1, Bottleneck.io_queue, {"effective_io_concurrency": "4"}, kept=False)
    r2 = _round(2, Bottleneck.io_queue, {"random_page_cost": "1.1"}, kept=False)
    p = PLANNER.propose(_ctx("pg_io_queue", rounds=[r1, r2]))
    assert p.bottleneck == Bottleneck.buffer_cache  # second-best in this state (score 0.7)
    assert "redirected from io_queue: 2 rounds in a row did not help" in p.rationale
    assert any(r.startswith("io_queue: 2 rounds") for r in p.ruled_out)


def test_the_redirect_names_the_direction_the_last_round_left_not_one_merely_passed_over() -> None:
    """A new user's round 5 read "redirected from cpu: no playbook move left" after round 4's auditor redirect
    from buffer_cache. The direction left is named wherever its hypothesis ranks now; a higher-ranked hypothesis
    without a move is "passed over", never "redirected from"."""
    why = "buffer_cache direction did not beat the best beyond noise"
    left = _round(1, Bottleneck.buffer_cache, {"shared_buffers": "512MB"}, kept=False, decision=Decision.redirect)
    p = PLANNER.propose(_ctx("pg_io_queue", rounds=[left.model_copy(update={"reason": why})]))
    assert p.bottleneck == Bottleneck.io_queue  # ranked above buffer_cache (0.7)
    assert f"redirected from buffer_cache: auditor redirected after round 1: {why}" in p.rationale, p.rationale
    spent = {"effective_io_concurrency": "4", "random_page_cost": "1.1", "bgwriter_lru_maxpages": "400"}
    p = PLANNER.propose(_ctx("pg_io_queue", rounds=[_round(1, Bottleneck.io_queue, spent, kept=False)]))
    assert p.bottleneck == Bottleneck.buffer_cache, p.rationale
    assert "passed over io_queue: no playbook move left" in p.rationale and "redirected" not in p.rationale, p.rationale


def test_auditor_redirect_and_tie_gain_stop_the_direction() -> None:
    r1 = _round(
        1,
        Bottleneck.io_queue,
        {"effective_io_concurrency": "4"},
        kept=True,
        gain=0.01,
        decision=Decision.redirect,
    )
    p = PLANNER.propose(_ctx("pg_io_queue", config={"effective_io_concurrency": "4"}, rounds=[r1]))
    assert p.bottleneck == Bottleneck.buffer_cache
    r1 = _round(1, Bottleneck.io_queue, {"effective_io_concurrency": "4"}, kept=True, gain=0.01)
    p = PLANNER.propose(_ctx("pg_io_queue", config={"effective_io_concurrency": "4"}, rounds=[r1]))
    assert p.bottleneck == Bottleneck.io_queue
    assert "effective_io_concurrency" not in {c.name for c in p.changes}  # a tie is not chased further


def test_plateau_when_nothing_is_left() -> None:
    p = PLANNER.propose(_ctx("pg_cpu", config={"jit": "off"}))
    assert p.plateau and p.changes == []
    assert "plateau" in p.rationale and "cpu: no playbook move left" in p.rationale
    # OLAP would still have parallel workers to give
    p = PLANNER.propose(
        _ctx("pg_cpu", config={"jit": "off", "max_parallel_workers_per_gather": "0"}, workload_class="olap")
    )
    assert not p.plateau and [c.name for c in p.changes] == ["max_parallel_workers_per_gather"]


def test_rejected_and_failed_changes_are_never_repeated() -> None:
    bad = FailedCheck(check="hardware", parameter="shared_buffers", value="512MB", message="over budget")
    rejected = RoundOutcome(
        session_id="s1",
        round_no=1,
        stage=Layer.dbms,
        bottleneck=Bottleneck.buffer_cache,
        verdict_ok=False,
        failed_checks=[bad],
        decision=Decision.continue_,
        reason="rejected",
        changes={"shared_buffers": "512MB", "effective_cache_size": "2GB"},
    )
    p = PLANNER.propose(_ctx("pg_buffer_cache", rounds=[rejected], config={"effective_cache_size": "1GB"}))
    vals = {c.name: c.value for c in p.changes}
    assert vals["shared_buffers"] == "256MB"  # geometric middle of 128MB and the rejected 512MB
    assert vals["effective_cache_size"] == "2GB"  # not the offender: still allowed
    failed = _round(
        1,
        Bottleneck.buffer_cache,
        {"shared_buffers": "512MB"},
        kept=False,
        failure=Failure(
            phase="restart",
            message="could not map shared memory",
            attempted=[NormalizedChange(name="shared_buffers", value="512MB", apply=ApplyMode.restart)],
        ),
    )
    p = PLANNER.propose(_ctx("pg_buffer_cache", rounds=[failed]))
    assert all(not (c.name == "shared_buffers" and c.value == "512MB") for c in p.changes)


def test_validator_feedback_drops_or_shrinks_the_offender() -> None:
    fb = [FailedCheck(check="protected", parameter="wal_compression", value="lz4", message="test rule")]
    p = PLANNER.propose(_ctx("pg_wal_fsync", validator_feedback=fb))
    assert "wal_compression" not in {c.name for c in p.changes} and p.changes
    fb = [FailedCheck(check="step", parameter="wal_buffers", value="16MB", message="too far")]
    p = PLANNER.propose(_ctx("pg_wal_fsync", validator_feedback=fb))
    assert {c.name: c.value for c in p.changes}["wal_buffers"] == "8MB"


# -------------------------------------------------------------------- bad start, trap, experience


def test_bad_start_gets_the_floor_prescription() -> None:
    bad = {"shared_buffers": "128kB", "work_mem": "64kB", "max_wal_size": "32MB"}
    ctx = _ctx("pg_cpu", config=bad, max_step_factor=1024.0)
    p = PLANNER.propose(ctx)
    # Below its floor (and its shipped default), a knob goes back at least to the shipped default
    # (work_mem 4MB, max_wal_size 1GB are above their floors of 1MB and 256MB) ...
    defaults = {"shared_buffers": "128MB", "work_mem": "4MB", "max_wal_size": "1GB"}
    assert {c.name: c.value for c in p.changes} == defaults
    assert "bad start" in p.rationale
    # ... in one move at the default step bound ×4 too: a return to the default is not bounded
    # (validation/steps.py is_default), so 128kB → 128MB and 32MB → 1GB pass the validator.
    p = PLANNER.propose(_ctx("pg_cpu", config=bad))
    assert {c.name: c.value for c in p.changes} == defaults


def test_a_floor_above_the_default_is_reached_through_the_default_then_in_steps() -> None:
    """Scenario mdb-buffer-pool-tiny (issue 22): innodb_buffer_pool_size 8M under the 1/64-of-memory
    floor (384MiB on 24 GiB) moved ×4 to 32M and measured +4 %; the 128M default is one move away."""
    ctx = _ctx("mariadb_buffer_cache", family="mariadb", mem_gib=24, config={"innodb_buffer_pool_size": str(8 * 2**20)})
    moves = {c.name: int(c.value) for c in PLANNER.propose(ctx).changes}
    assert moves.get("innodb_buffer_pool_size") == 128 * 2**20
    ctx = _ctx(
        "mariadb_buffer_cache",
        family="mariadb",
        mem_gib=24,
        config={"innodb_buffer_pool_size": str(128 * 2**20 - 2**20)},
    )
    moves = {c.name: int(c.value) for c in PLANNER.propose(ctx).changes}
    assert moves.get("innodb_buffer_pool_size") == 384 * 2**20  # ×4 from 127M reaches the floor


def test_commit_delay_trap_is_reverted() -> None:
    ctx = _ctx("pg_wal_fsync", config={"commit_delay": "1000", "commit_siblings": "2"})
    p = PLANNER.propose(ctx)
    assert p.bottleneck == Bottleneck.wal_fsync
    assert p.changes[0].name == "commit_delay" and str(p.changes[0].value) == "0"
    assert "39%" in p.changes[0].rationale


def test_a_planner_switch_left_off_is_a_trap_put_back_on() -> None:
    """Scenario pg-enable-indexscan-off (issue 22): enable_indexscan / enable_bitmapscan = off for the
    whole server turn pgbench's key lookups into full scans; both go back on in the first round."""
    off = {"enable_indexscan": "off", "enable_bitmapscan": "off"}
    p = PLANNER.propose(_ctx("pg_cpu", config=off))
    assert p.bottleneck == Bottleneck.cpu
    assert {c.name: str(c.value) for c in p.changes} == {"enable_indexscan": "on", "enable_bitmapscan": "on"}
    assert sorted(p.repairs) == ["enable_bitmapscan", "enable_indexscan"]  # back to the default from a trap
    rationale = " ".join(c.rationale for c in p.changes)
    assert "enable_indexscan = off, a known trap (the postgresql default is on)" in rationale, rationale
    assert "20.7.1 Planner Method Configuration" in rationale + p.rationale + " ".join(p.evidence)
    # on (the default) is no trap; any spelling of off is ("false" as a config file may hold it)
    p = PLANNER.propose(_ctx("pg_cpu", config={"enable_indexscan": "on"}))
    assert "enable_indexscan" not in {c.name for c in p.changes}
    p = PLANNER.propose(_ctx("pg_cpu", config={"enable_indexscan": "false"}))
    assert {c.name: str(c.value) for c in p.changes}.get("enable_indexscan") == "on"
    # the join switches (scenario pg-enable-join-off) and MariaDB's join buffers (mdb-join-cache-off)
    p = PLANNER.propose(_ctx("pg_cpu", config={"enable_hashjoin": "off", "enable_mergejoin": "off"}))
    assert {c.name: str(c.value) for c in p.changes} == {"enable_hashjoin": "on", "enable_mergejoin": "on"}
    p = PLANNER.propose(_ctx("mariadb_cpu", family="mariadb", config={"join_cache_level": "0"}))
    assert p.bottleneck == Bottleneck.cpu
    assert {c.name: str(c.value) for c in p.changes}.get("join_cache_level") == "2"
    p = PLANNER.propose(_ctx("mariadb_cpu", family="mariadb", config={"join_cache_level": "2"}))
    assert "join_cache_level" not in {c.name for c in p.changes}


def test_plan_search_traps_go_back_to_the_servers_own_default() -> None:
    """Scenarios pg-geqo-off, mdb-prune-level-off and pg-enable-nestloop-off (issue 22): an exhaustive join
    order search or a planner switch left off is put back to the server's shipped default
    (``value = "default"``: MariaDB 10.11 ships optimizer_prune_level 2, MySQL 8 ships 1)."""
    p = PLANNER.propose(_ctx("pg_cpu", config={"geqo": "off", "enable_nestloop": "off"}))
    assert {c.name: str(c.value) for c in p.changes} == {"geqo": "on", "enable_nestloop": "on"}
    pruning = PLANNER.propose(_ctx("pg_cpu", config={"enable_partition_pruning": "off"}))
    assert {c.name: str(c.value) for c in pruning.changes}.get("enable_partition_pruning") == "on"
    assert "geqo = off, a known trap" in " ".join(c.rationale for c in p.changes)
    p = PLANNER.propose(_ctx("mariadb_cpu", family="mariadb", config={"optimizer_prune_level": "0"}))
    assert {c.name: str(c.value) for c in p.changes}.get("optimizer_prune_level") == "2"
    mysql_like = [k.model_copy(update={"default": "1"}) if k.name == "optimizer_prune_level" else k for k in MY_KNOBS]
    ctx = _ctx("mariadb_cpu", family="mariadb", config={"optimizer_prune_level": "0"})
    ctx = ctx.model_copy(update={"catalog": _catalog("mariadb", mysql_like)})
    p = PLANNER.propose(ctx)
    assert {c.name: str(c.value) for c in p.changes}.get("optimizer_prune_level") == "1"
    for level in ("1", "2"):
        p = PLANNER.propose(_ctx("mariadb_cpu", family="mariadb", config={"optimizer_prune_level": level}))
        assert "optimizer_prune_level" not in {c.name for c in p.changes}


def test_a_range_optimizer_cap_far_below_its_default_goes_back_but_zero_means_no_limit() -> None:
    """Scenario mdb-sel-arg-weight-tiny (issue 22): optimizer_max_sel_arg_weight = 1 turns 20-key IN lists
    into full scans; it goes back to the default 32000 in one move. 0 (no limit) is no bad start."""
    p = PLANNER.propose(_ctx("mariadb_cpu", family="mariadb", config={"optimizer_max_sel_arg_weight": "1"}))
    assert {c.name: str(c.value) for c in p.changes}.get("optimizer_max_sel_arg_weight") == "32000"
    for fine in ("0", "32000", "1000"):
        p = PLANNER.propose(_ctx("mariadb_cpu", family="mariadb", config={"optimizer_max_sel_arg_weight": fine}))
        assert "optimizer_max_sel_arg_weight" not in {c.name for c in p.changes}, fine


def test_a_join_buffer_of_a_few_rows_goes_back_to_the_default() -> None:
    """Scenario mdb-join-buffer-tiny (issue 22): join_buffer_size = 128 B holds one outer row, so a join
    on a column without an index rescans the inner rows for each outer row; it goes back to the 256 KiB
    default in one move. 128 KiB and above are no bad start."""
    p = PLANNER.propose(_ctx("mariadb_cpu", family="mariadb", config={"join_buffer_size": "128"}))
    assert {c.name: str(c.value) for c in p.changes}.get("join_buffer_size") == "262144"
    assert "join_buffer_size" in p.repairs
    for fine in ("131072", "262144", "8388608"):
        p = PLANNER.propose(_ctx("mariadb_cpu", family="mariadb", config={"join_buffer_size": fine}))
        assert "join_buffer_size" not in {c.name for c in p.changes}, fine


def test_a_trap_whose_value_is_the_servers_default_is_left_alone() -> None:
    """A ``revert_if`` trap equal to the server's shipped default (a build whose default is the trap
    value) proposes nothing: there is no default to go back to."""
    knobs = [k.model_copy(update={"default": "off"}) if k.name == "geqo" else k for k in PG_KNOBS]
    ctx = _ctx("pg_cpu", config={"geqo": "off"})
    ctx = ctx.model_copy(update={"catalog": _catalog("postgresql", knobs)})
    assert "geqo" not in {c.name for c in PLANNER.propose(ctx).changes}


def test_random_page_cost_trap_goes_back_to_the_default_in_one_move() -> None:
    """Scenario pg-random-page-cost-huge (issue 22): 1e6 → the default 4 although ×4 is the step bound."""
    p = PLANNER.propose(_ctx("pg_cpu", config={"random_page_cost": "1000000"}))
    assert p.bottleneck == Bottleneck.cpu
    assert {c.name: str(c.value) for c in p.changes}.get("random_page_cost") == "4"
    assert "full scans" in p.changes[0].rationale


def test_floor_agreeing_with_the_diagnosis_leads_and_defaults_are_no_bad_start() -> None:
    """Scenario pg-jit-forced (issue 22): the proposal was labelled buffer_cache because a shared_buffers
    floor fired on its shipped default; now the default is left alone and the cpu floor leads."""
    p = PLANNER.propose(_ctx("pg_cpu", config={"jit_above_cost": "0", "shared_buffers": "16384"}))
    assert p.bottleneck == Bottleneck.cpu
    assert {c.name: float(c.value) for c in p.changes} == {"jit_above_cost": 100000.0}


def test_first_proposal_starts_from_experience_and_avoids_its_failures() -> None:
    old = Fingerprint(
        dbms="postgresql",
        version_major="15",
        benchmark="sysbench",
        workload_class="oltp",
        read_fraction=0.7,
        memory_gib=24,
    )
    exp = Experience(
        fingerprint=old,
        session_id="s-old",
        beneficial=[
            {"changes": {"shared_buffers": "6GB"}, "gain": 0.2, "bottleneck": "buffer_cache"},
            {"changes": {"random_page_cost": "1.1"}, "gain": 0.05, "bottleneck": "io_queue"},
        ],
        ineffective=[{"changes": {"effective_io_concurrency": "200"}}],
        failed=[{"changes": {"wal_buffers": "64MB"}}],
        best_config_relative={"shared_buffers": {"fraction_of_memory": 0.25}},
    )
    ctx = _ctx("pg_io_queue", experience=[exp], max_step_factor=10.0)
    p = PLANNER.propose(ctx)
    vals = {c.name: c.value for c in p.changes}
    assert vals == {"shared_buffers": "1GB", "random_page_cost": 1.1}  # 25% of this host's 4 GiB
    assert "similar fingerprints" in p.rationale and "s-old" in p.rationale
    assert "ineffective effective_io_concurrency=200" in p.rationale
    # later rounds no longer seed, and the ineffective direction stays dead
    r1 = _round(1, Bottleneck.buffer_cache, {k: str(v) for k, v in vals.items()}, kept=False)
    p = PLANNER.propose(_ctx("pg_io_queue", experience=[exp], rounds=[r1]))
    assert "effective_io_concurrency" not in {c.name for c in p.changes}


def test_an_experience_seed_stops_at_the_validators_core_cap() -> None:
    """An experience learned on a bigger host replays max_parallel_workers_per_gather = 8; on this 2-core
    host the validator caps it at 1 per core (validators/postgresql.toml pg.per_gather_cores), so the seed
    is proposed at 2, not refused (review of 2026-12-03)."""
    old = Fingerprint(
        dbms="postgresql", version_major="15", benchmark="sysbench", workload_class="oltp", read_fraction=0.7
    )
    exp = Experience(
        fingerprint=old,
        session_id="s-big",
        beneficial=[{"changes": {"max_parallel_workers_per_gather": "8"}, "gain": 0.2, "bottleneck": "cpu"}],
    )
    p = PLANNER.propose(_ctx("pg_cpu", experience=[exp], config={"max_parallel_workers_per_gather": "1"}))
    assert {c.name: c.value for c in p.changes}.get("max_parallel_workers_per_gather") == 2
    # at the cap already: nothing left to seed
    p = PLANNER.propose(_ctx("pg_cpu", experience=[exp], config={"max_parallel_workers_per_gather": "2"}))
    assert "max_parallel_workers_per_gather" not in {c.name for c in p.changes}


# --------------------------------------------------------------------------- playbooks as data


def test_every_shipped_playbook_loads_with_reason_and_source() -> None:
    for fam in ("postgresql", "mariadb", "mysql", "linux"):
        book = load_playbook(fam)
        assert book.entry
        for e in [*book.entry, *book.floor, *book.measured, *book.report]:
            assert e.source.strip()
        assert all(e.reason.strip() for e in [*book.entry, *book.floor, *book.measured])
    assert len(list(data_dir("catalogs").glob("playbook-*.toml"))) == 3


def test_sizing_refuses_two_base_terms_by_name() -> None:
    with pytest.raises(ValueError, match="exactly one base term"):
        Sizing(fraction_of_memory=0.25, bytes=1024)


def test_postgresql_playbook_names_exist_on_the_real_server(pg_sandbox) -> None:  # type: ignore[no-untyped-def]
    out = subprocess.run(
        ["psql", "-At", pg_sandbox.dsn, "-c", "SELECT name FROM pg_settings"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.split()
    names = set(out)
    book = load_playbook("postgresql")
    missing = {e.knob for e in [*book.entry, *book.floor, *book.measured]} - names
    assert not missing


def test_a_counter_a_playbook_entry_needs_is_one_the_real_mariadb_counts(mariadb_sandbox) -> None:  # type: ignore[no-untyped-def]
    """An entry's ``needs`` names a counter of the runtime sample: a misspelt one, or a gauge (whose value is not
    a count over the interval), is never in the sample's counters and the entry would silently apply always."""
    needed = {e.needs.counter for e in load_playbook("mariadb").entry if e.needs is not None}
    assert "global_status.Innodb_log_waits" in needed
    target = MySQLTarget.from_config(mariadb_sandbox.target_config())
    try:
        counters = target.runtime_state().counters
    finally:
        target.close()
    assert needed <= set(counters), sorted(needed - set(counters))


def test_needs_is_checked_when_a_playbook_loads(tmp_path: Path) -> None:
    entry = {"bottleneck": "wal_fsync", "knob": "k", "direction": "up", "first": {"bytes": 1}, "effect": "e"}
    entry |= {"reason": "r", "source": "s"}
    with pytest.raises(ValueError, match="needs.counter"):
        PlaybookEntry.model_validate({**entry, "needs": {"counter": "Innodb_log_waits"}})  # no source prefix
    with pytest.raises(ValueError, match="'needs' is for \\[\\[entry\\]\\] moves, not probes"):
        ProbeEntry.model_validate({**entry, "needs": {"counter": "global_status.Innodb_log_waits"}})
    ok = PlaybookEntry.model_validate({**entry, "needs": {"counter": "global_status.Innodb_log_waits", "above": 5}})
    assert ok.needs is not None and ok.needs.above == 5


def test_linux_playbook_sysctls_exist_on_this_kernel() -> None:
    book = load_playbook("linux")
    for e in book.entry:
        if e.knob.startswith("vm."):
            assert Path("/proc/sys", *e.knob.split(".")).exists(), e.knob


def test_commit_delay_trap_goes_first_and_alone_on_a_bad_start() -> None:
    # Fixed alone (reload only, measured at -39% write TPS) so a restart for the floors cannot blur it.
    bad = {"commit_delay": "1000", "commit_siblings": "2", "shared_buffers": "16MB", "max_wal_size": "32MB"}
    p = PLANNER.propose(_ctx("pg_wal_fsync", config=bad))
    assert [(c.name, str(c.value)) for c in p.changes] == [("commit_delay", "0")]
    assert "worst offender" in p.rationale and "shared_buffers" in p.rationale


def test_trap_fix_is_retried_although_experience_called_it_ineffective() -> None:
    # An earlier session's noisy tie on a bundle must not leave commit_delay=1000 in place for good.
    old = Fingerprint(
        dbms="postgresql", version_major="15", benchmark="sysbench", workload_class="oltp", read_fraction=0.7
    )
    exp = Experience(
        fingerprint=old,
        session_id="s-tie",
        ineffective=[{"changes": {"commit_delay": "0", "shared_buffers": "64MB"}}],
        failed=[{"changes": {"wal_buffers": "64MB"}}],
    )
    p = PLANNER.propose(_ctx("pg_wal_fsync", config={"commit_delay": "1000"}, experience=[exp]))
    assert [(c.name, str(c.value)) for c in p.changes] == [("commit_delay", "0")]
    assert "retrying a known trap's fix despite retrieved ineffective commit_delay=0 (session s-tie)" in p.rationale
    assert "avoiding retrieved failed wal_buffers=64MB" in p.rationale
    # this session's own tie does rule it out
    r1 = _round(1, Bottleneck.wal_fsync, {"commit_delay": "0"}, kept=False)
    p = PLANNER.propose(_ctx("pg_wal_fsync", config={"commit_delay": "1000"}, experience=[exp], rounds=[r1]))
    assert ("commit_delay", "0") not in [(c.name, str(c.value)) for c in p.changes]


def test_the_log_buffer_is_not_raised_when_the_sample_counted_no_log_waits() -> None:
    """The playbook's innodb_log_buffer_size entry ``needs`` Innodb_log_waits: a wal_fsync diagnosed from the
    log fsync rate alone, with no transaction waiting for log buffer space, gets the other wal_fsync move only,
    and the rationale says why; with the counter absent from the sample the entry applies as before."""
    ctx = _ctx("mariadb_wal_fsync", family="mariadb", config={"innodb_flush_method": "fsync"})
    d = ctx.last_delta
    assert d is not None and d.totals["global_status.Innodb_log_waits"] > 0

    def waits(n: float | None) -> PlanningContext:
        key, fsyncs = "global_status.Innodb_log_waits", "global_status.Innodb_os_log_fsyncs"
        totals = {k: v for k, v in d.totals.items() if k != key} | ({} if n is None else {key: n})
        per_second = {k: v for k, v in d.per_second.items() if k != key} | ({} if n is None else {key: n / d.seconds})
        totals[fsyncs], per_second[fsyncs] = 3000.0 * d.seconds, 3000.0  # diagnosed from the log fsync rate
        return ctx.model_copy(update={"last_delta": d.model_copy(update={"totals": totals, "per_second": per_second})})

    p = PLANNER.propose(waits(0.0))
    assert p.bottleneck == Bottleneck.wal_fsync, p.rationale
    assert {c.name: c.value for c in p.changes} == {"innodb_flush_method": "O_DIRECT"}, p.changes
    assert "not innodb_log_buffer_size: Innodb_log_waits = 0 measured: the problem it serves is not there" in (
        p.rationale
    ), p.rationale
    unread = PLANNER.propose(waits(None))
    assert {c.name: c.value for c in unread.changes}.get("innodb_log_buffer_size") == 64 * 2**20, unread.changes
