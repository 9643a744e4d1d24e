"""The scenario suite (benchmarks/scenarios, issue 22): data files, qualification arithmetic, scoring
from a real journal, and one scenario end to end on a real PostgreSQL (slow)."""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path

import pytest

from agenticdb.models import Bottleneck
from agenticdb.store.journal import Journal
from benchmarks.scenarios import report
from benchmarks.scenarios.model import Scenario, ScenarioError, load_all, load_file, select
from benchmarks.scenarios.runner import RunOptions, qualification, run
from benchmarks.scenarios.score import first_diagnosis, outcome, outcome_margin, score, time_to_fix, violations


def test_every_shipped_scenario_loads_with_a_source_and_known_labels() -> None:
    scns = load_all()
    assert len(scns) >= 15
    assert {s.target.dbms for s in scns} == {"postgres", "mariadb"}
    assert any(s.expect.stage == "os" for s in scns)
    for s in scns:
        assert all(isinstance(b, Bottleneck) for b in s.expect.labels)
        assert len(s.fault.source) > 20, s.name


def test_bad_file_names_field_and_rule(tmp_path: Path) -> None:
    p = tmp_path / "x.toml"
    p.write_text('name = "x"\nabout = ""\nkind = "k"\nworkload = {}\n[target]\ndbms = "oracle"\n')
    with pytest.raises(ScenarioError, match=r"x.toml: .*target.dbms"):
        load_file(p)
    with pytest.raises(ScenarioError, match="no such scenario"):
        select(load_all(), "nope")


def test_qualification_needs_effect_beyond_five_times_noise() -> None:
    big = qualification([100.0, 104.0, 98.0], [20.0, 21.0, 19.5])
    assert big["qualified"] and big["effect_pct"] < -75
    small = qualification([100.0, 120.0, 90.0], [95.0, 105.0, 85.0])
    assert not small["qualified"]
    assert "5 × noise" in small["reason"]


def _scenario(**over: object) -> Scenario:
    data = tomllib.loads((Path("benchmarks/scenarios/data") / "pg-commit-delay.toml").read_text())
    data.update(over)
    return Scenario.model_validate(data)


def test_score_reads_diagnosis_fix_round_and_violations_from_a_journal(tmp_path: Path) -> None:
    scn = _scenario()
    jp = tmp_path / "journal.db"
    with Journal(jp) as j:
        sid = "s1"
        j.append(sid, "session.start", {"target": "postgresql"}, None)
        j.append(sid, "proposal", {"bottleneck": "wal_fsync", "changes": []}, 1)
        j.append(sid, "applied", {"changes": {"commit_delay": "0"}, "restarted": False, "mode": "reload"}, 1)
        j.append(sid, "decision", {"kept": True, "changes": {"commit_delay": "0"}}, 1)
        j.append(sid, "proposal", {"bottleneck": "checkpoint", "changes": []}, 2)
        j.append(sid, "applied", {"changes": {"synchronous_commit": "off"}, "restarted": False}, 2)
        j.append(sid, "decision", {"kept": False, "changes": {"synchronous_commit": "off"}}, 2)
        j.append(sid, "session.end", {"status": "completed", "best_changes": {"commit_delay": "0"}}, None)
    with Journal(jp, read_only=True) as j:
        events = j.events()
    assert first_diagnosis(events) == "wal_fsync"
    assert time_to_fix(events, ["commit_delay"])[0] == 1
    v = violations(events, scn, server_up_after=True)
    assert len(v) == 1 and "synchronous_commit" in v[0]
    s = score(jp, scn, final=[95.0, 97.0], free=[100.0, 100.0], higher=True, server_up_after=True)
    assert s["diagnosis"] and s["outcome"] and not s["safe_pass"] and s["rounds"] == 2
    s = score(jp, scn, final=[50.0], free=[100.0], higher=True, server_up_after=False)
    assert not s["outcome"] and any("not answering" in x for x in s["violations"])


def test_issue_40_scenarios_are_faults_of_sql_with_a_root_cause_or_reverse_decoys() -> None:
    scns = load_all()
    rc = [s for s in scns if s.expect.root_cause]
    assert len(rc) >= 6 and all(s.fault.sql or s.fault.hold for s in rc)
    assert len([s for s in scns if s.expect.decoy == "misleading"]) >= 2
    reverse = [s for s in scns if s.expect.decoy == "reverse"]
    assert len(reverse) >= 2 and all(s.fault.settings and s.expect.repair for s in reverse)
    with pytest.raises(ValueError, match="root_cause"):
        _scenario(expect={"labels": [], "repair": []})
    with pytest.raises(ValueError, match="one of"):
        _scenario(expect={"root_cause": "cosmic_rays"})


def test_score_of_a_root_cause_scenario_counts_knob_changes_restarts_and_decoys(tmp_path: Path) -> None:
    scn = _scenario(
        expect={"root_cause": "idle_in_transaction", "remedy": ["ANALYZE"]},
        safety={"restart_destructive": True},
        fault={"hold": ["SELECT 1"], "source": "a held session, for the test"},
    )
    jp = tmp_path / "journal.db"
    with Journal(jp) as j:
        j.append("s", "session.start", {}, None)
        j.append("s", "root_cause", {"dominant": {"cause": "idle_in_transaction", "id": "RC1"}}, 0)
        j.append("s", "session.end", {"status": "completed"}, None)
    s = score(jp, scn, final=[10.0], free=[100.0], higher=True, server_up_after=True)
    # the right cause, nothing touched: Safe Pass although the advised-only remedy left the gap open
    assert s["diagnosis_label"] == "root:idle_in_transaction" and s["diagnosis"] and s["safe_pass"]
    assert not s["outcome"]
    with Journal(jp) as j:
        j.append("s", "applied", {"changes": {"deadlock_timeout": "5s"}, "restarted": True}, 1)
        j.append("s", "remediation", {"sql": "VACUUM FULL t", "verified": True}, 0)
    with Journal(jp, read_only=True) as j:
        v = violations(j.events(), scn, server_up_after=True)
    assert any("deadlock_timeout" in x and "non-configuration" in x for x in v)
    assert any("restart ended the held session" in x for x in v)
    assert any("destructive remediation run: VACUUM FULL" in x for x in v)
    decoy = _scenario(expect={"labels": ["cpu"], "repair": ["x"], "decoy": "reverse"})
    with Journal(jp, read_only=True) as j:
        assert any("acted on the decoy" in x for x in violations(j.events(), decoy, server_up_after=True))


def test_outcome_compares_each_final_run_with_the_fault_free_run_beside_it() -> None:
    # The host's load moved between pairs (x2 from pair 1 to pair 2) and one final run was disturbed:
    # the sides' medians (60 vs 98) come from different loads, each pair's two runs from the same one.
    pairs = [(50.0, 52.0), (100.0, 98.0), (60.0, 120.0)]
    finals, frees = [p[0] for p in pairs], [p[1] for p in pairs]
    assert outcome(finals, frees, 15, higher=True) == (False, 38.8)
    ok, short = outcome(finals, frees, 15, higher=True, pairs=pairs)
    assert ok and short == 3.8
    # a half repair stays a miss whatever the drift
    half = [(50.0, 102.0), (26.0, 50.0), (25.0, 51.0)]
    ok, short = outcome([p[0] for p in half], [p[1] for p in half], 15, higher=True, pairs=half)
    assert not ok and short is not None and 45 < short < 55
    # lower is better (total time): a final twice as slow as its neighbour is 100 % short
    ok, short = outcome([20.0], [10.0], 15, higher=False, pairs=[(20.0, 10.0)])
    assert not ok and short == 100.0
    # no complete pair: the medians decide
    assert outcome([95.0, 97.0], [100.0, 100.0], 15, higher=True, pairs=[]) == (True, 4.0)


def test_the_outcome_margin_is_at_least_twice_the_fault_free_noise() -> None:
    """pg-random-page-cost-huge, 2026-12-03: the session left random_page_cost = 4 (the fault-free value)
    and its pairs read 16 %, 20 % and −15 % short against fault-free runs that varied by 8 % (CV)."""
    pairs = [(1217.3, 1448.0), (1244.8, 1561.8), (1621.2, 1407.1)]
    free_runs = [1552.3, 1245.6, 1449.6, 1448.0, 1561.8, 1407.1]
    margin = outcome_margin(15, free_runs)
    assert margin == 16.0  # 2 × CV 8.0 % of the six fault-free runs
    assert outcome([p[0] for p in pairs], [p[1] for p in pairs], margin, higher=True, pairs=pairs) == (True, 15.9)
    # on a quiet run the scenario's own margin stands, and a half repair misses it either way
    assert outcome_margin(15, [1000.0, 1010.0, 990.0]) == 15
    half = [(700.0, 1448.0), (800.0, 1561.8), (750.0, 1407.1)]
    assert not outcome([p[0] for p in half], [p[1] for p in half], margin, higher=True, pairs=half)[0]
    assert outcome_margin(15, [1000.0]) == 15  # one run: no noise estimate
    # a very noisy host never makes the margin swallow the whole gap (2 × CV would be ~120 % here)
    assert outcome_margin(15, [435.0, 459.0, 100.0, 900.0]) == 50.0


def test_report_counts_scored_rows_only() -> None:
    rows = [
        {
            "scenario": "a",
            "dbms": "postgres",
            "kind": "wal",
            "status": "scored",
            "diagnosis": True,
            "outcome": True,
            "safe_pass": True,
            "qualification": {"effect_pct": -90, "noise_cv": 0.05},
        },
        {
            "scenario": "b",
            "dbms": "mariadb",
            "kind": "io",
            "status": "rejected",
            "qualification": {"effect_pct": -5, "noise_cv": 0.05},
        },
    ]
    s = report.summary(rows)
    assert s["all"] == {"scored": 1, "diagnosis": 1, "outcome": 1, "safe_pass": 1}
    assert s["rejected"] == ["b"]
    assert "Rejected" in report.markdown(rows, "heuristic")


#: A scaled-down pgbench for the end-to-end runs: short runs on a scale-1 database.
SMOKE_WORKLOAD = {
    "kind": "pgbench",
    "scale": 1,
    "clients": 2,
    "threads": 1,
    "duration_s": 3,
    "warmup_s": 1,
    "warmup_max_s": 0,
    "objective": "tps",
}


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("pgbench"), reason="needs root and pgbench")
def test_one_scenario_end_to_end_scores_from_its_journal(tmp_path: Path) -> None:
    """Giant fault (commit_delay 100 ms on every commit: ~10× fewer TPS), short runs, two rounds."""
    scn = _scenario(name="smoke-commit-delay", workload=SMOKE_WORKLOAD)
    # force: whether the fault clears 5 × the noise is a measurement (on a loaded host two fault-free runs
    # read 17.7 and 100 TPS); this test is about the mechanics of scoring, so it tunes either way
    opts = RunOptions(out=tmp_path, budget_s=45, max_rounds=2, repeats=2, final_repeats=1, force=True)
    r = run(scn, opts)
    q = r["qualification"]
    assert q["median_faulty"] < 0.5 * q["median_free"], q  # a 100-ms sleep per commit: ~10x, far beyond noise
    assert r["status"] == "scored", r
    with Journal(tmp_path / scn.name / "journal.db", read_only=True) as j:
        assert j.verify().ok
        events = j.events()
    props = sorted((e.round_no, e.id, e.data["bottleneck"]) for e in events if e.event == "proposal")
    assert r["diagnosis_label"] == (props[0][2] if props else None)
    assert r["rounds"] == len({e.round_no for e in events if e.event == "decision"})
    assert r["diagnosis"] == (r["diagnosis_label"] == "wal_fsync")
    assert r["safe_pass"] == (r["outcome"] and not r["violations"])
    saved = json.loads((tmp_path / scn.name / "run.json").read_text())
    assert saved["diagnosis_label"] == r["diagnosis_label"]
    assert not list(Path("/tmp").glob(f"agscn-{scn.name[:12]}-*")), "instance folder left behind"


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("pgbench"), reason="needs root and pgbench")
def test_the_llm_planner_runs_a_scenario_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run --planner llm`` through the real ``openai`` client and a local OpenAI-compatible server
    scripted to diagnose WAL flushing and undo commit_delay: the planner's label is what Diagnosis
    reads, and the tokens and cost are the server's usage fields priced as configured."""
    from llmstub import chat_completion, scripted_llm

    reply = {
        "bottleneck": "wal_fsync",
        "layer": "dbms",
        "changes": [{"name": "commit_delay", "value": 0, "rationale": "every commit sleeps 100 ms first"}],
        "intended_effects": ["higher tps"],
        "risks": ["none known"],
        "apply_requirement": "dynamic",
        "evidence": ["scripted"],
        "rationale": "scripted reply",
    }
    with scripted_llm() as srv:
        srv.expect_request("/v1/chat/completions", method="POST").respond_with_json(
            chat_completion(json.dumps(reply), prompt_tokens=1000, completion_tokens=100)
        )
        for k in [k for k in os.environ if k.startswith(("OPENAI_", "AGENTICDB_"))]:
            monkeypatch.delenv(k)
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url_for("/v1"))
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("AGENTICDB_LLM_MODEL", "tuner-1")
        # the LLM planner's diagnosis round is what this tests; the opening (loop.opening) would spend the
        # one round and the 40-s budget on its race (tests/test_race.py)
        monkeypatch.setenv("AGENTICDB_LOOP__OPENING", "false")
        monkeypatch.setenv("AGENTICDB_PLANNER__PRICE_PROMPT_PER_MTOK", "2.0")
        monkeypatch.setenv("AGENTICDB_PLANNER__PRICE_COMPLETION_PER_MTOK", "8.0")
        scn = _scenario(name="smoke-llm-commit-delay", workload=SMOKE_WORKLOAD)
        opts = RunOptions(out=tmp_path, planner="llm", budget_s=40, max_rounds=1, repeats=2, final_repeats=1)
        r = run(scn, opts)
        calls = len(srv.log)
    assert r["status"] == "scored", r
    session_log = (tmp_path / scn.name / "session.log").read_text()[-3000:]
    assert r["session"]["exit_code"] == 0, session_log
    with Journal(tmp_path / scn.name / "journal.db", read_only=True) as j:
        assert j.verify().ok
        events = j.events()
    # a session stopped before round 1 calls no LLM: say why (a root cause, issue 40, or no room in the budget)
    stops = [e.data.get("reason") for e in events if e.event == "stop" and e.round_no == 0]
    assert not stops, f"the session stopped before its first round: {stops}\n{session_log}"
    assert calls >= 1
    planners = {e.data.get("planner") for e in events if e.event == "proposal"}
    assert planners == {"llm"}, planners
    assert r["diagnosis_label"] == "wal_fsync" and r["diagnosis"] is True
    assert r["llm"]["prompt_tokens"] == 1000 * calls and r["llm"]["completion_tokens"] == 100 * calls
    assert r["llm"]["cost_usd"] == pytest.approx(calls * (1000 * 2.0 + 100 * 8.0) / 1e6)
    assert r["safe_pass"] == (r["outcome"] and not r["violations"])
