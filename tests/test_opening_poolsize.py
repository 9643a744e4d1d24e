"""MariaDB's buffer pool in the opening's evidence set is sized from the data it must hold, not from the whole
memory budget (a user's 24 GiB host: 17.4 GiB for 95 MiB of data); the data size is read from
information_schema.TABLES only when the account sees every InnoDB table, on a real private MariaDB 10.11."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import cast

import pymysql
import pytest
from openingctx import context_of

from agenticdb.advice.sizing import reference
from agenticdb.config.sections import PolicyConfig, ServiceConfig
from agenticdb.loop.executor import Executor
from agenticdb.loop.planning import check, planning_context
from agenticdb.loop.stage import StageState
from agenticdb.models import ApplyMode, Bottleneck, Change, Layer, Observed, Proposal, Snapshot
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.opening import generate_opening
from agenticdb.planner.opening_evidence import evidence_driven
from agenticdb.planner.opening_values import HostView, SourceInput, budget_bytes, host_view, with_data_size
from agenticdb.planner.trade import trade_proposal
from agenticdb.sandbox.mariadb import MariaDBSandboxInfo
from agenticdb.targets.mysql import MySQLTarget
from agenticdb.targets.mysql_stats import read_data_size
from agenticdb.validation.sets import validate_set
from agenticdb.validation.validator import flavor_of

GiB = 1024**3
MiB = 1024**2
USER = "poolsz_limited"


@pytest.fixture()
def maria(mariadb_sandbox: MariaDBSandboxInfo) -> Iterator[MySQLTarget]:
    t = MySQLTarget.from_config(mariadb_sandbox.target_config())
    yield t
    t.close()


@pytest.fixture()
def two_schemas(mariadb_sandbox: MariaDBSandboxInfo) -> Iterator[MariaDBSandboxInfo]:
    """poolsz_a.t (20,000 rows) and poolsz_b.t, InnoDB; dropped afterwards with the limited account."""
    with mariadb_sandbox.connect() as db, db.cursor() as cur:
        for schema in ("poolsz_a", "poolsz_b"):
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {schema}")
            cur.execute(f"USE {schema}")  # the sequence engine's seq_1_to_N lives in the current database
            cur.execute(f"CREATE TABLE IF NOT EXISTS {schema}.t (a INT PRIMARY KEY, b CHAR(64)) ENGINE=InnoDB")
            cur.execute(f"INSERT IGNORE INTO {schema}.t SELECT seq, md5(seq) FROM seq_1_to_20000")
            cur.execute(f"ANALYZE TABLE {schema}.t")
            cur.fetchall()
    yield mariadb_sandbox
    with mariadb_sandbox.connect() as db, db.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS '{USER}'@'127.0.0.1'")
        cur.execute("DROP DATABASE IF EXISTS poolsz_a")
        cur.execute("DROP DATABASE IF EXISTS poolsz_b")


def _limited(sb: MariaDBSandboxInfo, grants: list[str]) -> Callable[[list[str]], dict[str, float]]:
    """A reader as an account holding only ``grants`` (``Target.rule_gauges``' shape)."""
    with sb.connect() as db, db.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS '{USER}'@'127.0.0.1'")
        cur.execute(f"CREATE USER '{USER}'@'127.0.0.1'")
        for g in grants:
            cur.execute(f"GRANT {g} TO '{USER}'@'127.0.0.1'")

    def read(names: list[str]) -> dict[str, float]:
        with pymysql.connect(host="127.0.0.1", port=sb.port, user=USER, password="") as conn:
            return read_data_size(conn, "mariadb")

    return read


def _host(ctx: PlanningContext) -> HostView:
    return host_view(ctx, flavor_of(ctx.catalog))


def test_the_data_size_is_measured_only_when_the_account_sees_every_innodb_table(
    maria: MySQLTarget, two_schemas: MariaDBSandboxInfo
) -> None:
    ctx = context_of(maria, memory=8 * GiB, benchmark="sysbench")
    host = _host(ctx)
    assert host.data_bytes is None  # no runtime sample carries it: read once for the opening
    seen = with_data_size(host, maria.rule_gauges)  # root sees every table
    got = maria.rule_gauges(["data.innodb_bytes_seen"])
    assert got["data.innodb_tables_seen"] >= got["data.innodb_tables"] >= 2, got
    assert seen.data_bytes == got["data.innodb_bytes_seen"] and seen.data_bytes > 2 * MiB, got
    # one schema's grants: information_schema.TABLES hides the other, so the sum is not the data size
    partial = with_data_size(host, _limited(two_schemas, ["SELECT ON poolsz_a.*", "PROCESS ON *.*"]))
    assert partial.data_bytes is None and "this account sees 1 of the " in partial.data_why, partial.data_why
    # without PROCESS the dictionary cannot tell whether every table was seen: not measured either
    blind = with_data_size(host, _limited(two_schemas, ["SELECT ON poolsz_a.*"]))
    assert blind.data_bytes is None and "PROCESS privilege" in blind.data_why, blind.data_why


def _missing(ctx: PlanningContext) -> PlanningContext:
    """``ctx`` with a huge buffer-pool fault: a tenth of 1 M page requests missed the pool."""
    d = ctx.profile.baseline_state
    assert d is not None
    totals = {**d.totals, "global_status.Innodb_buffer_pool_reads": 1e5}
    totals["global_status.Innodb_buffer_pool_read_requests"] = 1e6
    missing = d.model_copy(update={"totals": totals})
    return ctx.model_copy(update={"profile": ctx.profile.model_copy(update={"baseline_state": missing})})


def test_evidence_sizes_the_pool_for_the_data_measured_not_the_budget(
    maria: MySQLTarget, two_schemas: MariaDBSandboxInfo
) -> None:
    ctx = _missing(context_of(maria, memory=24 * GiB, benchmark="sysbench"))
    host = with_data_size(_host(ctx), maria.rule_gauges)
    assert host.data_bytes is not None, host.data_why
    out = evidence_driven(SourceInput(ctx=ctx, host=host, policy=PolicyConfig()))
    now = int(ctx.current_config["innodb_buffer_pool_size"])
    want = math.floor(1.25 * host.data_bytes / MiB) * MiB  # the data × 1.25: MiBs, not the 18 GiB budget
    changes = out.candidate.changes if out.candidate is not None else {}
    if want > now:
        assert int(changes["innodb_buffer_pool_size"]) == want, (changes, host.data_bytes)
        assert "KB InnoDB Buffer Pool" in out.candidate.sources["innodb_buffer_pool_size"]  # type: ignore[union-attr]
    else:
        assert "innodb_buffer_pool_size" not in changes, changes
        assert any("already holds that, kept" in n for n in out.notes), out.notes
    assert not any("data size not measured" in n for n in out.notes), out.notes
    # the opening reads it itself when given the target's reader
    opening = generate_opening(ctx, policy=PolicyConfig(), read=maria.rule_gauges)
    assert not any("data size not measured" in n for n in opening.notes), opening.notes


def test_without_the_data_size_the_pool_takes_one_bounded_step_and_says_so(maria: MySQLTarget) -> None:
    ctx = _missing(context_of(maria, memory=24 * GiB, benchmark="sysbench"))
    policy = PolicyConfig()
    out = evidence_driven(SourceInput(ctx=ctx, host=_host(ctx), policy=policy))
    assert out.candidate is not None, out
    now = int(ctx.current_config["innodb_buffer_pool_size"])
    pool = int(out.candidate.changes["innodb_buffer_pool_size"])
    assert pool == math.floor(now * policy.max_step_factor / MiB) * MiB, (pool, now)
    assert pool < budget_bytes(ctx, policy) / 4  # the budget would have given 17 GiB and more
    assert "not the whole budget" in out.candidate.sources["innodb_buffer_pool_size"]
    assert any(n.startswith("data size not measured for mariadb") for n in out.notes), out.notes


def test_under_a_memory_limit_the_pool_takes_the_room_of_caches_the_workload_leaves_unused(maria: MySQLTarget) -> None:
    """The 512 MiB scenario (harness, 2026-12-07): a miss ratio of 0.227 raised the evidence set's pool only to
    what the budget left beside the MyISAM key cache and the Aria page cache, 128 MiB each and counted whole by
    the validator's memory budget, though a sysbench workload keeps all its data in InnoDB. The sizers now count
    the room the trade of catalogs/trades.toml frees from those caches (down to twice their blocks in use, as
    read), and the set repair makes that trade: each validated set holds a pool beyond the old cap, with the
    caches given down. The data size (the scenario's ~800 MiB) is pretended, as the memory limit is."""
    ctx = _missing(context_of(maria, memory=512 * MiB, benchmark="sysbench"))
    assert ctx.profile.baseline_state is not None
    gauges = ctx.profile.baseline_state.gauges
    assert "global_status.Key_blocks_used" in gauges and "global_status.Aria_pagecache_blocks_used" in gauges

    def read(names: list[str]) -> dict[str, float]:
        return {"data.innodb_bytes_seen": 800.0 * MiB, "data.innodb_tables_seen": 8.0, "data.innodb_tables": 8.0}

    policy = PolicyConfig()
    opening = generate_opening(ctx, policy=policy, read=read)
    cur = ctx.current_config
    key, aria = int(cur["key_buffer_size"]), int(cur["aria_pagecache_buffer_size"])
    old_cap = budget_bytes(ctx, policy) - key - aria  # an upper bound of what the caches in effect left
    sized = {c.name: c for c in opening.candidates if "innodb_buffer_pool_size" in c.changes}
    assert {"evidence", "host-sized"} <= set(sized), (opening.candidates, opening.dropped)
    for name, cand in sized.items():
        if name not in ("evidence", "host-sized"):
            continue
        pool = int(cand.changes["innodb_buffer_pool_size"])
        assert pool > old_cap, (name, pool / MiB, old_cap / MiB)
        assert "room from caches given down to twice their blocks in use" in cand.sources["innodb_buffer_pool_size"]
        given = [n for n in ("key_buffer_size", "aria_pagecache_buffer_size") if n in cand.changes]
        assert given and all(int(cand.changes[n]) < int(cur[n]) for n in given), (name, cand.changes)
        assert any("trade move" in line for line in cand.repaired), (name, cand.repaired)
        # each cache given says how much of it the statistics found in use (the trade's one safety claim)
        gauge = {"key_buffer_size": "Key_blocks_used", "aria_pagecache_buffer_size": "Aria_pagecache_blocks_used"}
        for n in given:
            assert gauge[n] in cand.sources[n] and "MiB in use" in cand.sources[n], cand.sources[n]
            assert gauge[n] in cand.sources["innodb_buffer_pool_size"], cand.sources["innodb_buffer_pool_size"]


@pytest.mark.parametrize("closed", ["service", "window"])
def test_without_a_restart_now_the_pool_takes_no_room_of_the_restart_only_aria_cache(
    maria: MySQLTarget, closed: str
) -> None:
    """aria_pagecache_buffer_size takes effect only after a restart. With a service that cannot restart, or
    outside policy.restart_window, the sizers counted its room all the same; the set repair then gave it, the
    restart was refused, it was put back, four times over, and both the host-sized and the evidence sets were
    dropped ("still over the memory budget after 4 repairs"). The pool now takes the key cache's room only."""
    ctx = _missing(context_of(maria, memory=512 * MiB, benchmark="sysbench"))
    d = ctx.profile.baseline_state
    assert d is not None  # transactions waited for log space: the limits set takes innodb_log_buffer_size (needs)
    waited = d.model_copy(update={"totals": {**d.totals, "global_status.Innodb_log_waits": 40.0}})
    ctx = ctx.model_copy(update={"profile": ctx.profile.model_copy(update={"baseline_state": waited})})

    def read(names: list[str]) -> dict[str, float]:
        return {"data.innodb_bytes_seen": 800.0 * MiB, "data.innodb_tables_seen": 8.0, "data.innodb_tables": 8.0}

    if closed == "service":
        policy, kw = PolicyConfig(), {"can_restart": False}
    else:
        policy, kw = PolicyConfig(restart_window="03:00-03:30"), {"now": datetime(2026, 12, 7, 12, 0)}
    opening = generate_opening(ctx, policy=policy, read=read, **kw)  # type: ignore[arg-type]
    sized = {c.name: c for c in opening.candidates}
    assert {"evidence", "host-sized"} <= set(sized), opening.dropped
    cur = ctx.current_config
    old_cap = budget_bytes(ctx, policy) - int(cur["key_buffer_size"]) - int(cur["aria_pagecache_buffer_size"])
    for name in ("evidence", "host-sized"):
        cand = sized[name]
        assert "aria_pagecache_buffer_size" not in cand.changes, cand.changes
        assert int(cand.changes["key_buffer_size"]) < int(cur["key_buffer_size"]), cand.changes
        assert int(cand.changes["innodb_buffer_pool_size"]) > old_cap, cand.changes
        assert "aria_pagecache_buffer_size" not in cand.sources["innodb_buffer_pool_size"], cand.sources
    # the limits set raises the restart-only innodb_log_buffer_size beyond the budget: a refusal of both kinds
    # dropped it whole; its restart-only knobs are left out and the rest is repaired
    assert "limits" in sized, opening.dropped
    lim = sized["limits"]
    assert all(mode != ApplyMode.restart for mode in lim.apply_modes.values()), lim.apply_modes
    assert any("innodb_log_buffer_size" in r and "left out (restart not allowed" in r for r in lim.repaired), lim


def test_the_advice_reference_takes_no_room_from_caches_the_advice_leaves(maria: MySQLTarget) -> None:
    """``advise`` holds its recommendations to the host-sized reference and judges them as one set, with no
    set repair and no recommendation lowering the key or Aria cache. The reference counted their room all the
    same: on a 512 MiB host its pool was 297 MiB beside 256 MiB of caches left as they are, a set the memory
    budget refuses (so a rule-only pool held to it was then rejected). It fits the budget again."""
    ctx = context_of(maria, memory=512 * MiB, benchmark="sysbench")
    delta = ctx.profile.baseline_state
    assert delta is not None
    ctx = ctx.model_copy(update={"last_delta": delta, "max_changes": 1000, "max_step_factor": 1e12})
    policy = PolicyConfig()
    ref = reference(ctx, policy)
    assert ref is not None
    pool = int(ref.changes.get("innodb_buffer_pool_size", ctx.current_config["innodb_buffer_pool_size"]))
    assert "room from caches" not in ref.sources.get("innodb_buffer_pool_size", ""), ref.sources
    assert not {"key_buffer_size", "aria_pagecache_buffer_size"} & set(ref.changes), ref.changes
    sv = validate_set(
        ref.changes,
        ctx.catalog,
        ctx.current_config,
        ctx.profile.hardware,
        policy,
        can_restart=True,
        observed=Observed(gauges=dict(delta.gauges)),
        label="advice",
    )
    assert sv.ok, (pool / MiB, sv.reasons())


def test_in_a_round_the_trade_gives_no_restart_only_cache_on_a_service_that_cannot_restart(
    mariadb_sandbox: MariaDBSandboxInfo,
) -> None:
    """A round's planner was told the policy's restart permission alone (``loop.planning.planning_context``): on
    a service that cannot restart (target.service.kind = "none"), the trade paying for a refused buffer pool
    gave the restart-only aria_pagecache_buffer_size, and the check refused the whole proposal for it. The round's
    context now says no restart is possible, the trade gives the key cache only, and the check accepts it."""
    cfg = mariadb_sandbox.target_config()
    target = MySQLTarget.from_config(cfg.model_copy(update={"service": ServiceConfig(kind="none")}))
    try:
        assert not target.can_restart()
        base = context_of(target, memory=512 * MiB, benchmark="sysbench")
        stage = StageState(target, cast(Executor, None), base.catalog, Snapshot(target="mariadb"), [1.0])
        policy = PolicyConfig()
        current = dict(base.current_config)
        ctx = planning_context(stage, Layer.dbms, base.profile, base.fingerprint, [], [], current, None, policy)
        assert ctx.allow_restart is False
        grow = Proposal(
            bottleneck=Bottleneck.buffer_cache,
            changes=[Change(name="innodb_buffer_pool_size", value="256M")],
            rationale="buffer pool misses",
        )
        refused = check(grow, stage, base.profile, Layer.dbms, policy)
        refusal = next(f for f in refused.failed if f.rule_id == "memory_budget")
        ctx = ctx.model_copy(update={"validator_feedback": [refusal]})
        traded = trade_proposal(ctx, "mariadb", refusal, "heuristic")
        assert traded is not None
        names = {c.name for c in traded.changes}
        assert "key_buffer_size" in names and "aria_pagecache_buffer_size" not in names, traded.changes
        verdict = check(traded, stage, base.profile, Layer.dbms, policy)
        assert not any(f.rule_id == "restart_permission" for f in verdict.failed), verdict.failed
    finally:
        target.close()
