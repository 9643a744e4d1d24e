"""The opening's learned candidates (issue 36): the nearest experience scaled to this host, and the LLM planner's
whole configuration through the real ``openai`` client against the scripted local server (tests/llmstub.py),
both on a real private PostgreSQL 15's context; each replaces the weakest rule-based candidate."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from llmstub import ScriptedLLMServer, chat_completion, scripted_llm
from openingctx import context_of

from agenticdb.config.sections import PlannerConfig, PolicyConfig
from agenticdb.models.planning import Experience, Fingerprint, HostOrigin
from agenticdb.planner.heuristic import HeuristicPlanner
from agenticdb.planner.llm import LLMPlanner
from agenticdb.planner.opening import generate_opening
from agenticdb.targets.postgres import PostgresTarget

GiB = 1024**3
CHAT = "/v1/chat/completions"


@pytest.fixture()
def llm_server() -> Iterator[ScriptedLLMServer]:
    with scripted_llm() as srv:
        yield srv


def _experience() -> Experience:
    fp = Fingerprint(dbms="postgresql", version_major="15", benchmark="tpch", workload_class="olap", read_fraction=1.0)
    return Experience(
        fingerprint=fp,
        session_id="s-old",
        best_gain=0.4,
        best_config={
            "shared_buffers": "4GB",
            "work_mem": "64MB",
            "jit": "off",
            "max_parallel_workers_per_gather": "8",
            "max_connections": "20",
            "vm.swappiness": "1",
        },
        best_config_relative={
            "shared_buffers": {"value": "4GB", "fraction_of_memory": 0.25},
            "work_mem": {"value": "64MB", "fraction_of_memory": 0.00390625},
        },
        origin=HostOrigin(host="big", dbms="postgresql", version_major="15", cpu_count=16, memory_gib=16.0),
    )


def test_experience_is_scaled_to_this_host_and_replaces_the_weakest(pg: PostgresTarget) -> None:
    ctx = context_of(pg, workload_class="olap", memory=1 * GiB).model_copy(update={"experience": [_experience()]})
    opening = generate_opening(ctx, policy=PolicyConfig())
    exp = next(c for c in opening.candidates if c.name == "experience")
    # 25 % of 16 GiB there → 25 % of the 1 GiB limit here; work_mem 64MB × 1/16 = 4MB (the default: left out)
    assert exp.changes["shared_buffers"] == "256MB" and "work_mem" not in exp.changes, exp.changes
    assert exp.changes["jit"] == "off"
    # 8 workers per Gather there, capped at this host's 2 cores: the default 2, so no change
    assert "max_parallel_workers_per_gather" not in exp.changes, exp.changes
    assert "max_connections" not in exp.changes and "vm.swappiness" not in exp.changes
    assert "s-old" in exp.sources["jit"] and "+40.0%" in exp.sources["jit"]
    assert any(n.startswith("experience: vm.swappiness") for n in opening.notes), opening.notes
    names = [c.name for c in opening.candidates]
    assert len(names) == 3 and "experience" in names, names
    replaced = [(n, r) for n, r in opening.dropped if r.startswith("replaced by experience")]
    assert len(replaced) == 1 and replaced[0][0] not in names, opening.dropped


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


def _reply(changes: dict[str, Any]) -> str:
    return json.dumps(
        {
            "bottleneck": "cpu",
            "layer": "dbms",
            "changes": [{"name": k, "value": v, "rationale": f"{k} for analytics"} for k, v in changes.items()],
            "apply_requirement": "restart",
            "rationale": "an analytic workload under 1 GiB",
        }
    )


def test_the_llm_whole_configuration_comes_through_the_openai_client(
    pg: PostgresTarget, llm_server: ScriptedLLMServer
) -> None:
    reply = _reply({"jit": False, "work_mem": "8MB", "max_parallel_workers_per_gather": 2, "max_connections": 20})
    llm_server.expect_request(CHAT, method="POST").respond_with_json(chat_completion(reply))
    ctx = context_of(pg, workload_class="olap", memory=1 * GiB)
    opening = generate_opening(ctx, policy=PolicyConfig(), llm=_planner(llm_server))
    (req,) = llm_server.log
    messages = json.loads(req[0].get_data())["messages"]
    last = messages[-1]["content"]
    assert last.startswith("# The opening: one whole configuration") and "768 MiB" in last and "50 allowed" in last
    assert "Action catalog" in messages[-2]["content"]  # the round's context comes first
    c = next(c for c in opening.candidates if c.name == "llm")
    assert c.changes["jit"] == "off" and "max_connections" not in c.changes
    assert c.sources["jit"].startswith("LLM: jit for analytics")
    # 8MB × 50 connections × hash_mem_multiplier 2 does not fit 768 MiB: the trade move repaired the set
    assert c.changes["work_mem"] == "4MB" and c.changes["maintenance_work_mem"] == "32MB", c.changes
    assert c.repaired and c.repaired[0].startswith("work_mem: 8MB → 4MB"), c.repaired
    # the weakest rule-based set (fewest knobs) gave way; which one it is depends on the shared server's
    # statistics, which earlier tests in a random order change (the evidence set moved 2 knobs in one CI order)
    (gone,) = [(n, r) for n, r in opening.dropped if r.startswith("replaced by llm: the weakest rule-based set")]
    left = [c for c in opening.candidates if c.name in ("host-sized", "evidence", "limits")]
    assert gone[0] in ("host-sized", "evidence", "limits") and gone[0] not in {c.name for c in opening.candidates}
    assert all(int(gone[1].rsplit("(", 1)[1].split()[0]) <= len(c.changes) for c in left), (gone, left)
    assert any("max_connections=20 left out" in n for n in opening.notes), opening.notes
    # the reply's bottleneck is the LLM's diagnosis of the baseline (the session's diagnosis event)
    assert opening.diagnosis is not None and opening.diagnosis.bottleneck.value == "cpu"
    assert opening.diagnosis.rationale == "an analytic workload under 1 GiB"


def test_an_llm_that_fails_leaves_the_rule_based_opening(pg: PostgresTarget, llm_server: ScriptedLLMServer) -> None:
    llm_server.expect_request(CHAT, method="POST").respond_with_json({"error": {"message": "down"}}, status=500)
    ctx = context_of(pg, workload_class="olap", memory=1 * GiB)
    opening = generate_opening(ctx, policy=PolicyConfig(), llm=_planner(llm_server))
    assert "llm" not in [c.name for c in opening.candidates]
    assert any(a.startswith("llm: the LLM gave no usable whole configuration") for a in opening.absent), opening.absent
    assert opening.candidates
    assert opening.diagnosis is None  # no reply, no LLM diagnosis: the session's is then the playbook's
