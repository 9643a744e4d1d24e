"""The opening's ``diagnosis`` event is the session planner's own diagnosis (issue 36 point 6).

With the LLM planner it is the bottleneck of the LLM's reply that gave its whole configuration — through the
real ``openai`` client against the scripted local server (tests/llmstub.py) — and the scenario suite's
Diagnosis (``benchmarks.scenarios.score.first_diagnosis``) scores it, not the playbook's. An LLM that gives no
usable reply is said so and the playbook's diagnosis stands in. The session runs over the in-memory target
of tests/memtarget.py (the opening's mechanics; real-server openings are in tests/test_race_pg.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from llmstub import ScriptedLLMServer, chat_completion, scripted_llm
from memtarget import InMemoryTarget, ScriptedWorkload

from agenticdb.config import Settings
from agenticdb.config.loop_section import LoopConfig
from agenticdb.config.sections import PlannerConfig, StorageConfig, WorkloadConfig
from agenticdb.loop.session import TuningSession
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.heuristic import HeuristicPlanner
from agenticdb.planner.llm import LLMPlanner
from agenticdb.planner.opening_types import Candidate, Opening
from agenticdb.store.journal import Journal
from agenticdb.store.journal_events import JournalEvent
from agenticdb.store.memory import MemoryBook
from benchmarks.scenarios.score import first_diagnosis

CHAT = "/v1/chat/completions"
# a label the playbook never gives on the in-memory target's statistics (it has none): lock_contention
REPLY = {
    "bottleneck": "lock_contention",
    "layer": "dbms",
    "changes": [{"name": "work_mem", "value": "8MB", "rationale": "scripted"}],
    "evidence": ["scripted: row locks wait"],
    "apply_requirement": "reload",
    "rationale": "scripted whole configuration",
}


@pytest.fixture()
def llm_server() -> Iterator[ScriptedLLMServer]:
    with scripted_llm() as srv:
        yield srv


def _llm(srv: ScriptedLLMServer) -> LLMPlanner:
    cfg = PlannerConfig(
        kind="llm", base_url=srv.url_for("/v1"), api_key="sk-test", model="tuner-1", timeout_s=5.0, round_deadline_s=10
    )
    return LLMPlanner(cfg, HeuristicPlanner(), backoff_initial_s=0.01, backoff_max_s=0.05, backoff_jitter_s=0.01)


def _session(tmp_path: Path, planner: LLMPlanner | HeuristicPlanner) -> TuningSession:
    """One opening over the in-memory target; the source asks the LLM for its whole configuration as the
    generator's ``from_llm`` does (``LLMPlanner.propose_whole``) and hands its reply on as the diagnosis."""

    def source(ctx: PlanningContext, k: int) -> Opening:
        sets = [Candidate("rule", {"random_page_cost": "2"}, "test set", {"random_page_cost": "test"})]
        reply = planner.propose_whole(ctx, "one whole configuration") if isinstance(planner, LLMPlanner) else None
        return Opening(candidates=sets[:k], diagnosis=reply)

    target = InMemoryTarget()
    cfg = Settings(
        workload=WorkloadConfig(kind="pgbench", duration_s=1, warmup_s=0),
        loop=LoopConfig(max_rounds=1, baseline_runs=2, plateau_rounds=5, search=False),
        storage=StorageConfig(home=tmp_path),
    )
    workload = ScriptedWorkload(target, lambda values: 100.0)
    journal, memory = Journal(tmp_path / "j.db"), MemoryBook(tmp_path / "m.db")
    return TuningSession(cfg, target, workload, planner, journal, memory, opening=source)


def _events(s: TuningSession) -> list[JournalEvent]:
    return s.journal.events(s.session_id)


def _diagnosis(s: TuningSession) -> dict[str, object]:
    (event,) = [e for e in _events(s) if e.event == "diagnosis"]
    return event.data


def test_the_llm_planners_diagnosis_is_the_diagnosis_event(tmp_path: Path, llm_server: ScriptedLLMServer) -> None:
    llm_server.expect_request(CHAT, method="POST").respond_with_json(chat_completion(json.dumps(REPLY)))
    s = _session(tmp_path, _llm(llm_server))
    s.run()
    d = _diagnosis(s)
    assert d["bottleneck"] == "lock_contention" and d["planner"] == "llm", d
    assert "LLM planner (tuner-1)" in str(d["by"]) and d["evidence"] == ["scripted: row locks wait"]
    assert d["playbook"] != "lock_contention"  # the playbook's own label is kept beside it
    assert first_diagnosis(_events(s)) == "lock_contention"  # what the scenario suite scores
    assert len(llm_server.log) >= 1


def test_an_llm_without_a_usable_reply_leaves_the_playbooks_diagnosis_said_so(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    llm_server.expect_request(CHAT, method="POST").respond_with_json({"error": {"message": "down"}}, status=500)
    s = _session(tmp_path, _llm(llm_server))
    s.run()
    d = _diagnosis(s)
    assert d["planner"] == "heuristic" and d["bottleneck"] == d["playbook"], d
    assert "the LLM planner gave no usable reply" in str(d["by"])
    assert first_diagnosis(_events(s)) == d["playbook"]


def test_a_heuristic_session_journals_the_playbooks_diagnosis(tmp_path: Path) -> None:
    s = _session(tmp_path, HeuristicPlanner())
    s.run()
    d = _diagnosis(s)
    assert d["planner"] == "heuristic" and d["bottleneck"] == d["playbook"]
    assert "heuristic planner" in str(d["by"])
