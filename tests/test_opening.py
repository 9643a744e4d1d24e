"""The opening's generator (issue 36 point 1): whole configurations from a real private PostgreSQL 15's
and MariaDB 10.11's context, validated as one set, repaired with the trade move or dropped."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from openingctx import context_of

from agenticdb.config.sections import PolicyConfig
from agenticdb.host.storage_probe import storage_choice
from agenticdb.models import ApplyMode
from agenticdb.planner.opening import generate_opening
from agenticdb.planner.opening_host import host_sized
from agenticdb.planner.opening_types import Candidate
from agenticdb.planner.opening_values import SourceInput, host_view
from agenticdb.sandbox.mariadb import MariaDBSandboxInfo
from agenticdb.targets.mysql import MySQLTarget
from agenticdb.targets.postgres import PostgresTarget
from agenticdb.validation.sets import validate_set
from agenticdb.validation.validator import flavor_of

GiB = 1024**3
MiB = 1024**2


@pytest.fixture()
def maria(mariadb_sandbox: MariaDBSandboxInfo) -> Iterator[MySQLTarget]:
    t = MySQLTarget.from_config(mariadb_sandbox.target_config())
    yield t
    t.close()


def _host(opening_cands: list[Candidate]) -> Candidate:
    return next(c for c in opening_cands if c.name == "host-sized")


def test_host_sized_postgres_under_a_1gib_cgroup_follows_pgtune_within_the_budget(pg: PostgresTarget) -> None:
    ctx = context_of(pg, workload_class="olap", memory=1 * GiB)
    opening = generate_opening(ctx, policy=PolicyConfig())
    c = _host(opening.candidates)
    # PGTune's figures of the 1 GiB limit, not of the host's RAM
    assert c.changes["shared_buffers"] == "256MB"
    assert c.changes["effective_cache_size"] == "768MB"
    assert "maintenance_work_mem" not in c.changes  # memory/16 = 64MB, the server's default already
    assert c.changes["default_statistics_target"] == "500"  # analytics
    assert c.changes["min_wal_size"] == "4GB" and c.changes["max_wal_size"] == "16GB"
    assert "jit" not in c.changes  # PGTune leaves jit for analytics
    # every knob names where its figure comes from
    assert set(c.sources) == set(c.changes) and all("PGTune" in s for s in c.sources.values()), c.sources
    # the set was validated as a whole: restart-only knobs known from the server's metadata
    assert "shared_buffers" in c.restart_knobs and c.apply_modes["shared_buffers"] == ApplyMode.restart
    assert "work_mem" not in c.changes  # (1 GiB − 256 MiB)/(3 × 50)/2 < 4MB: never lowered by sizing
    assert "1.00 GiB cgroup limit" in c.rationale
    assert any(a.startswith("llm:") for a in opening.absent)


def test_host_sized_postgres_on_the_host_ram_raises_work_mem_only_within_the_budget(pg: PostgresTarget) -> None:
    ctx = context_of(pg, workload_class="oltp", memory=16 * GiB)
    c = _host(generate_opening(ctx, policy=PolicyConfig()).candidates)
    assert c.changes["shared_buffers"] == "4GB" and c.changes["jit"] == "off"
    assert c.changes["wal_buffers"] == "16MB"
    wm = c.changes["work_mem"]
    assert wm.endswith("MB"), wm
    # (16 GiB − 4 GiB)/(3 × 50 sandbox connections)/2 workers per gather = 40.96 MiB; the budget
    # (12 GiB − 4 GiB − 16 MiB − 3 × 1 GiB)/(50 × hash_mem_multiplier 2) = 51 MiB, so the formula wins
    assert int(wm[:-2]) == 40, wm
    v = validate_set(c.changes, ctx.catalog, ctx.profile.current_config, ctx.profile.hardware, PolicyConfig())
    assert v.ok, v.reasons()


def test_host_sized_random_page_cost_on_a_disk_follows_the_data_not_the_device(pg: PostgresTarget) -> None:
    """On a device measured as a rotating disk, random_page_cost is 1.1 only when the databases' measured size
    fits in the memory limit (PGTune 3532ca0; PostgreSQL 15 manual 20.7.2: lowering it suits data 'likely to be
    completely in cache'), and then its source and the set's rationale say so; effective_io_concurrency stays the
    disk's 2. A disk whose data does not fit, or was not measured, keeps 4; flash gets 1.1 and 200 whatever the
    data. The host descriptions are made up: storage and data size are what the rule reads."""
    ctx = context_of(pg, memory=4 * GiB)
    real = host_view(ctx, flavor_of(ctx.catalog))

    def sized(storage: str, data: float | None) -> tuple[str, Candidate]:
        cls, source = storage_choice(None, "", storage, "sdz")  # the kernel flag's class, as if not measured
        host = replace(real, storage=cls, storage_source=source, device="sdz", data_bytes=data)
        c = host_sized(SourceInput(ctx, host, PolicyConfig())).candidate
        assert c is not None
        # the sandbox runs with random_page_cost 4: a 4 is kept, with its source in ``kept``
        return c.changes.get("random_page_cost", ctx.profile.current_config["random_page_cost"]), c

    def rpc_source(c: Candidate) -> str:
        return {**c.kept, **c.sources}["random_page_cost"]

    rpc, fits = sized("hdd", 1 * GiB)
    assert rpc == "1.1" and fits.changes["effective_io_concurrency"] == "2"
    why = rpc_source(fits)
    assert "3532ca0" in why and "smaller than the total server memory" in why and "20.7.2" in why, why
    assert "storage hdd (/sys/block/sdz/queue/rotational)" in why and "1.00 GiB" in why, why
    assert "< the memory limit 4.00 GiB" in why, why
    assert "miss the cache" in fits.sources["effective_io_concurrency"], fits.sources
    assert "random_page_cost 1.1 on hdd storage because the data fits in the memory limit" in fits.rationale
    rpc, big = sized("hdd", 6 * GiB)
    assert float(rpc) == 4 and big.changes["effective_io_concurrency"] == "2"
    assert "≥ the memory limit 4.00 GiB" in rpc_source(big) and "because the data fits" not in big.rationale
    rpc, unmeasured = sized("hdd", None)
    assert float(rpc) == 4 and "data size not measured" in rpc_source(unmeasured)
    rpc, flash = sized("ssd", 6 * GiB)
    assert rpc == "1.1" and flash.changes["effective_io_concurrency"] == "200"
    assert "e.g., 1.1" in rpc_source(flash) and "miss the cache" not in flash.sources["effective_io_concurrency"]


def test_a_set_over_the_budget_is_repaired_with_the_trade_move(pg: PostgresTarget) -> None:
    from agenticdb.planner.opening import repair_set

    ctx = context_of(pg, memory=1 * GiB)
    policy = PolicyConfig()
    greedy = Candidate(
        name="limits",
        changes={"shared_buffers": "256MB", "work_mem": "16MB", "maintenance_work_mem": "128MB"},
        rationale="test",
        sources={},
    )

    def check(changes: dict[str, str], label: str):  # type: ignore[no-untyped-def]
        return validate_set(changes, ctx.catalog, ctx.profile.current_config, ctx.profile.hardware, policy, label=label)

    alone = check(greedy.changes, "greedy")
    assert not alone.ok and alone.memory_only, alone.reasons()
    assert "work_mem × 50 max_connections" in alone.reasons(), alone.reasons()
    fixed, why = repair_set(ctx, greedy, check)
    assert fixed is not None, why
    assert fixed.changes["shared_buffers"] == "256MB"  # the cache is kept, the per-session memory pays
    assert fixed.repaired and all("trade" in r for r in fixed.repaired), fixed.repaired
    wm = int(fixed.changes["work_mem"].removesuffix("MB"))
    assert wm < 16, fixed.changes
    assert check(fixed.changes, "fixed").ok


def test_the_set_budget_counts_hash_mem_multiplier_on_the_worst_case(pg: PostgresTarget) -> None:
    ctx = context_of(pg, memory=1 * GiB)
    cur, hw = ctx.profile.current_config, ctx.profile.hardware
    # 256 MiB + 4 MiB wal_buffers + 3 × 64 MiB + 50 × 5 MiB = 702 MiB fits 768 MiB without the multiplier,
    # 952 MiB with hash_mem_multiplier 2 does not
    v = validate_set({"shared_buffers": "256MB", "work_mem": "5MB"}, ctx.catalog, cur, hw, PolicyConfig())
    assert not v.ok and v.memory_only, v.reasons()
    assert "hash_mem_multiplier 2" in v.reasons() and "952 MiB" in v.reasons(), v.reasons()
    assert validate_set({"shared_buffers": "256MB", "work_mem": "3MB"}, ctx.catalog, cur, hw, PolicyConfig()).ok


def test_a_set_the_trade_cannot_fix_is_dropped_with_the_reason(pg: PostgresTarget) -> None:
    from agenticdb.planner.opening import repair_set

    ctx = context_of(pg, memory=1 * GiB)
    policy = PolicyConfig()

    def check(changes: dict[str, str], label: str):  # type: ignore[no-untyped-def]
        return validate_set(changes, ctx.catalog, ctx.profile.current_config, ctx.profile.hardware, policy)

    bad = Candidate(name="llm", changes={"shared_buffers": "900MB", "fsync": "off"}, rationale="x", sources={})
    got, why = repair_set(ctx, bad, check)
    assert got is None and "fsync" in why, why


def test_the_step_bound_is_a_policy_switch(pg: PostgresTarget) -> None:
    ctx = context_of(pg, memory=16 * GiB)
    big = {"shared_buffers": "4GB"}  # 32 × the default 128MB
    cur, hw = ctx.profile.current_config, ctx.profile.hardware
    assert validate_set(big, ctx.catalog, cur, hw, PolicyConfig()).ok
    bounded = validate_set(big, ctx.catalog, cur, hw, PolicyConfig(), step_bound=True)
    assert not bounded.ok and "max_step_factor" in bounded.reasons()
    # live mode keeps the bound by default: the host-sized set is then dropped (a round's bound), not shrunk
    live = generate_opening(ctx, policy=PolicyConfig(), live=True)
    assert not live.candidates and live.dropped[0][0] == "host-sized" and "max_step_factor" in live.dropped[0][1]
    assert generate_opening(ctx, policy=PolicyConfig(opening_step_bound="off"), live=True).candidates


def test_host_sized_mariadb_sizes_the_pool_from_the_budget(maria: MySQLTarget) -> None:
    ctx = context_of(maria, memory=2 * GiB, benchmark="sysbench")
    opening = generate_opening(ctx, policy=PolicyConfig())
    c = _host(opening.candidates)
    pool = int(c.changes["innodb_buffer_pool_size"])
    # 75 % of 2 GiB = 1.5 GiB, capped by the budget (1.5 GiB) minus global caches and per-session buffers
    assert 256 * MiB < pool <= 1536 * MiB, pool
    assert "MariaDB KB" in c.sources["innodb_buffer_pool_size"]
    if "innodb_log_file_size" in c.changes:
        assert int(c.changes["innodb_log_file_size"]) == (pool // 4) // MiB * MiB
    assert "max_connections" not in c.changes


def test_k_must_be_positive(pg: PostgresTarget) -> None:
    with pytest.raises(ValueError, match="k=0"):
        generate_opening(context_of(pg), 0, policy=PolicyConfig())


def test_outside_the_restart_window_the_restart_only_knobs_are_left_out(pg: PostgresTarget) -> None:
    from datetime import datetime

    ctx = context_of(pg, workload_class="olap", memory=1 * GiB)
    policy = PolicyConfig(restart_window="01:00-02:00")
    opening = generate_opening(ctx, policy=policy, now=datetime(2026, 12, 6, 12, 0))
    c = _host(opening.candidates)
    assert not c.restart_knobs and "shared_buffers" not in c.changes, c.changes
    assert c.changes["effective_cache_size"] == "768MB"
    left = [r for r in c.repaired if r.startswith("shared_buffers: 256MB left out (restart not allowed")]
    assert left and "restart_window 01:00-02:00" in left[0], c.repaired
    assert not opening.restart_groups()
