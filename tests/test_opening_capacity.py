"""The opening repairs a candidate set the capacity rules refuse (validators/mysql.toml
``mysql.key_buffer_size-in-use``, c9f3df9) instead of dropping it whole: an experience or LLM set that raises the
buffer pool and lowers the MyISAM key cache below its blocks in use keeps its pool, the key cache at its floor
(blocks in use × key_cache_block_size × (1 + policy.capacity_headroom), rounded up to whole MiB), or at the value
in effect when its use was not observed. On the session's real private MariaDB 10.11 with MyISAM index blocks
preloaded into the key cache; the LLM through the real ``openai`` client against the scripted local server
(tests/llmstub.py). On the old code the sets were dropped ("[capacity] key_buffer_size …")."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

import pymysql
import pytest
from llmstub import ScriptedLLMServer, chat_completion, scripted_llm
from openingctx import context_of

from agenticdb.config.sections import PlannerConfig, PolicyConfig
from agenticdb.models import Observed
from agenticdb.models.planning import Experience, Fingerprint, HostOrigin, PlanningContext
from agenticdb.planner.heuristic import HeuristicPlanner
from agenticdb.planner.llm import LLMPlanner
from agenticdb.planner.opening import Candidate, Opening, generate_opening, repair_set
from agenticdb.sandbox.mariadb import MariaDBSandboxInfo
from agenticdb.targets.mysql import MySQLTarget, parse_mysql_dsn
from agenticdb.validation.sets import SetVerdict, validate_set

GiB = 1024**3
MiB = 1024**2
CHAT = "/v1/chat/completions"
KEY_USED = "global_status.Key_blocks_used"
RULE = "mysql.key_buffer_size-in-use"


@pytest.fixture()
def maria(mariadb_sandbox: MariaDBSandboxInfo) -> Iterator[MySQLTarget]:
    t = MySQLTarget.from_config(mariadb_sandbox.target_config())
    yield t
    t.close()


@pytest.fixture()
def keys_in_use(mariadb_sandbox: MariaDBSandboxInfo) -> Iterator[None]:
    """A MyISAM table whose indexes (about 5 MiB) are loaded into the key cache: Key_blocks_used, a high-water
    mark, counts them from now on."""
    kw = parse_mysql_dsn(mariadb_sandbox.target_config().dsn)
    with pymysql.connect(**kw) as db, db.cursor() as cur:  # type: ignore[arg-type]
        cur.execute("CREATE DATABASE IF NOT EXISTS opening_cap")
        cur.execute("USE opening_cap")  # seq_1_to_N (the Sequence engine) needs a current database
        cur.execute("CREATE TABLE IF NOT EXISTS opening_cap.t (a INT PRIMARY KEY, b CHAR(64), KEY (b)) ENGINE=MyISAM")
        cur.execute("INSERT IGNORE INTO opening_cap.t SELECT seq, md5(seq) FROM seq_1_to_60000")
        cur.execute("LOAD INDEX INTO CACHE opening_cap.t")
        cur.fetchall()
    yield
    with pymysql.connect(**kw) as db, db.cursor() as cur:  # type: ignore[arg-type]
        cur.execute("DROP DATABASE IF EXISTS opening_cap")


def _floor(ctx: PlanningContext) -> tuple[int, int]:
    """(the key cache's floor as the rule sets it, rounded up to whole MiB; the value in effect), in bytes."""
    d = ctx.profile.baseline_state
    assert d is not None
    used, block = d.gauges[KEY_USED], int(ctx.profile.current_config["key_cache_block_size"])
    floor = math.ceil(used * block * (1 + PolicyConfig().capacity_headroom))
    now = int(ctx.profile.current_config["key_buffer_size"])
    assert 1 * MiB < floor < now, (used, block, now)  # the fault is real: 1 MiB is below what is in use
    return math.ceil(floor / MiB) * MiB, now


def _assert_repaired(opening: Opening, name: str, ctx: PlanningContext, figure_from: str) -> None:
    """``name``'s set survived with its pool raise and the key cache at its floor, and says why."""
    c = next((c for c in opening.candidates if c.name == name), None)
    assert c is not None, opening.describe()
    floor, now = _floor(ctx)
    assert int(c.changes["innodb_buffer_pool_size"]) > int(ctx.profile.current_config["innodb_buffer_pool_size"])
    assert c.changes["key_buffer_size"] == str(floor), (c.changes, floor)
    src = c.sources["key_buffer_size"]
    assert src.startswith(f"capacity floor: the least value rule {RULE} allows, below the value in effect {now}"), src
    assert "1048576 was refused" in src and f"the set's figure came from {figure_from}" in src, src
    assert any(r.startswith(f"key_buffer_size: 1048576 → {floor} (capacity floor: ") for r in c.repaired), c.repaired
    assert f"Capacity settings it lowered too far: key_buffer_size 1048576 → {floor} (the floor of rule {RULE})" in (
        c.rationale
    )
    d = ctx.profile.baseline_state
    assert d is not None
    used = {k: v for k, v in d.gauges.items() if k.endswith("_blocks_used")}
    cur, hw = ctx.profile.current_config, ctx.profile.hardware
    assert validate_set(c.changes, ctx.catalog, cur, hw, PolicyConfig(), observed=Observed(gauges=used)).ok


def _experience() -> Experience:
    """A MariaDB session's best: a quarter of the memory for the pool, 1/2048 of it for the key cache (1 MiB of
    this 2 GiB limit, far below the 5 MiB of index blocks in use here)."""
    fp = Fingerprint(dbms="mariadb", version_major="10", benchmark="sysbench", workload_class="oltp", read_fraction=0.9)
    return Experience(
        fingerprint=fp,
        session_id="s-maria",
        best_gain=0.3,
        best_config={"innodb_buffer_pool_size": "4294967296", "key_buffer_size": "8388608"},
        best_config_relative={
            "innodb_buffer_pool_size": {"value": "4294967296", "fraction_of_memory": 0.25},
            "key_buffer_size": {"value": "8388608", "fraction_of_memory": 1 / 2048},
        },
        origin=HostOrigin(host="big", dbms="mariadb", version_major="10", cpu_count=16, memory_gib=16.0),
    )


def test_an_experience_set_lowering_the_key_cache_below_its_use_keeps_its_pool_and_the_cache_at_its_floor(
    maria: MySQLTarget, keys_in_use: None
) -> None:
    ctx = context_of(maria, memory=2 * GiB, benchmark="sysbench").model_copy(update={"experience": [_experience()]})
    opening = generate_opening(ctx, policy=PolicyConfig(), read=maria.rule_gauges)
    _assert_repaired(opening, "experience", ctx, "experience of session s-maria")
    assert not [d for d in opening.dropped if d[0] == "experience"], opening.dropped


@pytest.fixture()
def llm_server() -> Iterator[ScriptedLLMServer]:
    with scripted_llm() as srv:
        yield srv


def _planner(srv: ScriptedLLMServer) -> LLMPlanner:
    cfg = PlannerConfig(
        kind="llm",
        base_url=srv.url_for("/v1"),
        api_key="sk-test",
        model="tuner-1",
        timeout_s=5.0,
        round_deadline_s=20.0,
    )
    return LLMPlanner(cfg, HeuristicPlanner(), backoff_initial_s=0.01, backoff_max_s=0.05, backoff_jitter_s=0.01)


def test_an_llm_set_lowering_the_key_cache_below_its_use_keeps_its_pool_and_the_cache_at_its_floor(
    maria: MySQLTarget, keys_in_use: None, llm_server: ScriptedLLMServer
) -> None:
    reply = json.dumps(
        {
            "bottleneck": "buffer_cache",
            "layer": "dbms",
            "changes": [
                {"name": "innodb_buffer_pool_size", "value": 512 * MiB, "rationale": "the working set in memory"},
                {"name": "key_buffer_size", "value": 1 * MiB, "rationale": "no MyISAM table in the workload"},
            ],
            "apply_requirement": "dynamic",
            "rationale": "an OLTP workload reading from disk",
        }
    )
    llm_server.expect_request(CHAT, method="POST").respond_with_json(chat_completion(reply))
    ctx = context_of(maria, memory=2 * GiB, benchmark="sysbench")
    opening = generate_opening(ctx, policy=PolicyConfig(), llm=_planner(llm_server), read=maria.rule_gauges)
    assert len(llm_server.log) == 1
    _assert_repaired(opening, "llm", ctx, "LLM: no MyISAM table in the workload")


def test_without_an_observation_of_its_use_the_key_cache_stays_at_the_value_in_effect(
    maria: MySQLTarget, keys_in_use: None
) -> None:
    ctx = context_of(maria, memory=2 * GiB, benchmark="sysbench").model_copy(update={"experience": [_experience()]})
    d = ctx.profile.baseline_state
    assert d is not None  # a baseline that did not read the key cache's blocks in use, and no reader of it
    blind = d.model_copy(update={"gauges": {k: v for k, v in d.gauges.items() if k != KEY_USED}})
    ctx = ctx.model_copy(update={"profile": ctx.profile.model_copy(update={"baseline_state": blind})})
    opening = generate_opening(ctx, policy=PolicyConfig())
    c = next((c for c in opening.candidates if c.name == "experience"), None)
    assert c is not None, opening.describe()
    assert "key_buffer_size" not in c.changes and "innodb_buffer_pool_size" in c.changes, c.changes
    now = ctx.profile.current_config["key_buffer_size"]
    assert c.kept["key_buffer_size"].startswith(f"left at the value in effect {now}: no observation of its use")
    assert any(r.startswith("key_buffer_size: 1048576 left out (capacity: left at") for r in c.repaired), c.repaired
    assert f"Capacity settings it lowered too far: key_buffer_size kept at {now}." in c.rationale, c.rationale


def test_a_set_of_refused_cache_lowerings_only_is_dropped_with_that_reason(maria: MySQLTarget) -> None:
    ctx = context_of(maria, memory=2 * GiB, benchmark="sysbench")
    cur, hw = ctx.profile.current_config, ctx.profile.hardware

    def check(changes: dict[str, str], label: str) -> SetVerdict:  # no observation of either cache's use
        return validate_set(changes, ctx.catalog, cur, hw, PolicyConfig(), observed=Observed(gauges={}), label=label)

    lowered = {"key_buffer_size": "1048576", "aria_pagecache_buffer_size": "16777216"}
    cand = Candidate(name="llm", changes=lowered, rationale="caches no table uses", sources={})
    got, why = repair_set(ctx, cand, check)
    assert got is None
    assert why.startswith("every change lowered a capacity setting further than its rule allows"), why
    assert "key_buffer_size: 1048576 left out" in why and "aria_pagecache_buffer_size: 16777216 left out" in why
