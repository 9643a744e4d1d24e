"""The refinement stage (issue 14): the switch from the playbook to Optuna TPE search, infeasible
suggestions told to the optimizer without a measurement, and the search-patience stop rule.

Fast tests over tests/memtarget.py (an in-memory Target and a scripted workload whose objective is a
function of the knob values; the validator, journal and Memory Book are the real ones), plus one short
real-PostgreSQL session in a private sandbox that reaches the search stage.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
from memtarget import DEFAULTS, KNOBS, InMemoryTarget, ScriptedPlanner, ScriptedWorkload

from agenticdb.app import build_target, build_workload, open_stores
from agenticdb.config import Settings
from agenticdb.config.loop_section import LoopConfig
from agenticdb.config.sections import PolicyConfig, StorageConfig, WorkloadConfig
from agenticdb.host.hardware import detect_hardware
from agenticdb.loop.next_move import LoopState, decide, search_converged, stop_figures
from agenticdb.loop.session import SessionResult, TuningSession
from agenticdb.models import (
    ApplyMode,
    Bottleneck,
    Catalog,
    Decision,
    FailedCheck,
    GainEstimate,
    KnobSpec,
    Layer,
    Proposal,
    RoundOutcome,
)
from agenticdb.planner.heuristic import HeuristicPlanner
from agenticdb.planner.search import RefiningPlanner, SearchSettings
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.store.journal import Journal
from agenticdb.store.memory import MemoryBook


def smooth(values: dict[str, str]) -> float:
    """TPS rises with work_mem up to 16MB (a large effect, far beyond the scripted 3 % noise floor)."""
    wm = values.get("work_mem", "4MB")
    kb = float(wm[:-2]) * 1024 if wm.endswith("MB") else float(wm[:-2]) if wm.endswith("kB") else float(wm)
    return 100.0 * (1 + 0.6 * min(max(math.log2(kb / 4096), -2.0), 2.0))


def session(
    tmp_path: Path,
    script: list[dict[str, str] | Exception],
    loop: dict[str, Any],
    policy: PolicyConfig | None = None,
    target: InMemoryTarget | None = None,
) -> tuple[TuningSession, ScriptedWorkload, Journal]:
    target = target or InMemoryTarget()
    workload = ScriptedWorkload(target, smooth)
    journal = Journal(tmp_path / "journal.db")
    cfg = Settings(
        workload=WorkloadConfig(kind="pgbench", duration_s=1, warmup_s=0),
        loop=LoopConfig(**{"opening": False, "baseline_runs": 2, "plateau_rounds": 3, **loop}),
        policy=policy or PolicyConfig(),
        storage=StorageConfig(home=tmp_path),
    )
    planner = RefiningPlanner(ScriptedPlanner(script), SearchSettings(max_knobs=2, switch_after=3, seed=1))
    s = TuningSession(cfg, target, workload, planner, journal, MemoryBook(tmp_path / "memory.db"))
    return s, workload, journal


def stages(result: SessionResult) -> list[str]:
    return [r.proposal.stage for r in result.rounds if r.proposal is not None]


def test_the_playbook_runs_first_then_the_search_takes_over_and_is_journaled(tmp_path: Path) -> None:
    s, _, journal = session(tmp_path, [{"work_mem": "8MB"}], {"max_rounds": 6, "search_patience": 5})
    result = s.run()
    got = stages(result)
    assert got[0] == "playbook" and result.rounds[0].kept, result.rounds[0].reason
    assert got[1:] and set(got[1:]) == {"search"}, got
    stop = [e.data for e in journal.events(s.session_id) if e.event == "stop"]
    assert len(stop) == 1 and stop[0]["reason"] == result.reason and stop[0]["rounds_done"] == len(result.rounds)
    assert stop[0]["search_patience"] == 5 and stop[0]["time_budget_s"] > stop[0]["elapsed_s"] > 0
    proposals = [e.data for e in journal.events(s.session_id) if e.event == "proposal"]
    assert [p["stage"] for p in proposals][:1] == ["playbook"]
    assert any(p["stage"] == "search" and "TPE" in p["rationale"] for p in proposals)
    # every search change stays inside the range around the value the search started from (8MB: 2MB..32MB)
    for r in result.rounds[1:]:
        if "work_mem" in r.changes:
            kb = float(r.changes["work_mem"].removesuffix("kB").removesuffix("MB"))
            kb = kb * 1024 if r.changes["work_mem"].endswith("MB") else kb
            assert 2048 <= kb <= 32768, r.changes


def test_warm_start_tells_tpe_every_measured_configuration(tmp_path: Path) -> None:
    s, _, _ = session(tmp_path, [{"work_mem": "8MB"}, {"work_mem": "16MB"}], {"max_rounds": 3, "search_patience": 5})
    s.run()
    planner = s.planner
    assert isinstance(planner, RefiningPlanner)
    study = planner._searches[Layer.dbms].study
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    # the baseline (4MB) and the two playbook rounds are told before the first suggestion is asked
    assert len(done) >= 3
    assert {round(t.params["work_mem"]) for t in done[:3]} == {4096, 8192, 16384}


class ConnTarget(InMemoryTarget):
    """The in-memory target with ``max_connections`` too, so the validator's memory budget
    (shared memory + max_connections x work_mem x policy factor) takes part."""

    def catalog(self) -> Catalog:
        knobs = dict(KNOBS)
        knobs["max_connections"] = KnobSpec(
            name="max_connections",
            vartype="integer",
            min_value=1,
            max_value=262143,
            apply=ApplyMode.restart,
            default="100",
        )
        return Catalog(target=self.kind, version=self.version(), knobs=knobs)


def test_a_suggestion_the_validator_refuses_is_told_as_infeasible_and_costs_no_run(tmp_path: Path) -> None:
    # The policy factor puts the memory budget's edge at work_mem = 12MB (x 100 connections): the search
    # starting from the kept 8MB (range 2MB..32MB) gets refused suggestions above it. They must reach
    # the study as failed trials and never be measured.
    mem = detect_hardware(None).memory_limit_bytes
    factor = PolicyConfig().memory_fraction * mem / (12 * 2**20 * 100)
    target = ConnTarget(values={**DEFAULTS, "max_connections": "100"})
    s, workload, journal = session(
        tmp_path,
        [{"work_mem": "8MB"}],
        {"max_rounds": 5, "search_patience": 5, "max_planner_retries": 3},
        PolicyConfig(per_connection_work_mem_factor=factor, allow_restart=False),
        target,
    )
    result = s.run()
    planner = s.planner
    assert isinstance(planner, RefiningPlanner)
    trials = [t for search in planner._searches.values() for t in search.study.trials]
    failed = [t for t in trials if t.state == optuna.trial.TrialState.FAIL]
    events = journal.events(s.session_id)
    refused = [e for e in events if e.event == "verdict" and not e.data["ok"]]
    assert refused, "no suggestion was refused: the test did not reach its branch"
    assert all(fc["check"] == "hardware" for e in refused for fc in e.data["failed"])
    # each refusal is told when the planner is next asked; the session may end before the last one is
    pending = sum(1 for search in planner._searches.values() if search.pending is not None)
    assert len(failed) + pending >= len(refused)
    # the measured work_mem values all stayed within the budget: refused ones were never run
    for r in result.rounds:
        if r.measurement is not None and "work_mem" in r.changes:
            assert _kb(r.changes["work_mem"]) <= 12 * 1024, r.changes
    judged = [e for e in events if e.event == "judged"]
    runs_judged = sum(len(e.data["candidate"]) + len(e.data["best"]) for e in judged)
    assert 0 < workload.runs - runs_judged <= 5, (workload.runs, runs_judged)  # the rest: the baseline runs


def _kb(text: str) -> float:
    if text.endswith("MB"):
        return float(text[:-2]) * 1024
    return float(text.removesuffix("kB"))


def _search_round(no: int, kept: bool, gain: float) -> RoundOutcome:
    return RoundOutcome(
        session_id="s",
        round_no=no,
        stage=Layer.dbms,
        bottleneck=Bottleneck.temp_spill,
        proposal=Proposal(bottleneck=Bottleneck.temp_spill, changes=[], stage="search"),
        verdict_ok=True,
        judged="better" if kept else "tie",
        kept=kept,
        gain_vs_best=gain,
        estimate=GainEstimate(
            gain=gain, low=gain - 0.05, high=gain + 0.05, pairs=3, confidence=0.95, text=f"{gain:+.1%} [..]"
        ),
        decision=Decision.continue_,
        reason="",
    )


def test_the_search_stops_on_patience_not_on_three_unkept_rounds() -> None:
    state = LoopState(Layer.dbms, 5, 100, 10.0, 1000.0, 3, False, search_patience=4)
    rounds = [_search_round(1, True, 0.2)] + [_search_round(i, False, 0.01) for i in range(2, 5)]
    assert decide(rounds, state)[0] != Decision.terminate  # three unkept: the old plateau rule would stop
    rounds.append(_search_round(5, False, -0.02))
    decision, reason = decide(rounds, state)
    assert decision == Decision.terminate
    assert "search converged" in reason and "round 5 tie -2.0%" in reason and "search_patience = 4" in reason
    assert search_converged(rounds[:-1], 4) == ""
    # a suggestion whose decision kept no valid pair counted no gain: its first run's figure is not quoted
    unpaired = _search_round(5, False, -0.099).model_copy(update={"estimate": None, "objective": None})
    reason = search_converged([*rounds[:-1], unpaired], 4)
    assert "round 5 tie no gain counted" in reason and "-9.9" not in reason, reason
    figures = stop_figures([*rounds[:-1], unpaired], state)["search_rounds"]
    assert isinstance(figures, list) and figures[-1]["gain"] is None, figures


def test_a_rejection_in_the_same_round_is_fed_back_to_the_study() -> None:
    """The planning retry carries the validator's failed checks: the pending suggestion is told FAIL."""
    from agenticdb.planner.search import _Pending, _Search

    study = optuna.create_study(direction="maximize")
    dist = optuna.distributions.FloatDistribution(1024, 65536, log=True)
    trial = study.ask({"work_mem": dist})
    s = _Search(
        study, {"work_mem": dist}, {}, Bottleneck.temp_spill, "test", _Pending(trial.number, {"work_mem": "64MB"}, 0)
    )
    planner = RefiningPlanner(ScriptedPlanner([]))
    ctx = _ctx(feedback=[FailedCheck(check="hardware", parameter="work_mem", value="64MB", message="budget")])
    planner._tell_pending(ctx, s)
    assert study.trials[0].state == optuna.trial.TrialState.FAIL
    assert s.infeasible_streak == 1 and "refused by the validator" in s.notes[-1]


def test_a_knob_ruled_out_after_the_search_started_is_dropped_from_its_subspace() -> None:
    """A person rejects (approval mode) the search's suggestion: the knob is banned for the session. The
    search must build its subspace again without it and go on with the next knob, not ask TPE for
    suggestions that all round to "no change" and give up (CI, 2026-12-02: round 2 of an approval
    session proposed nothing)."""
    ctx = _ctx(knobs=dict(KNOBS), current=dict(DEFAULTS))
    planner = RefiningPlanner(ScriptedPlanner([]), SearchSettings(max_knobs=1, seed=1))
    first = planner.propose(ctx)
    assert first.stage == "search" and len(first.changes) == 1, first
    knob = first.changes[0].name
    rejected = RoundOutcome(
        session_id="s",
        round_no=1,
        stage=Layer.dbms,
        bottleneck=first.bottleneck,
        proposal=first,
        verdict_ok=False,
        failed_checks=[FailedCheck(check="approval", parameter=knob, value=first.changes[0].value, message="no")],
        decision=Decision.redirect,
        reason="not approved",
    )
    ctx = ctx.model_copy(update={"rounds": [rejected]})
    second = planner.propose(ctx)
    assert not second.plateau and second.changes, second.rationale
    assert knob not in {c.name for c in second.changes}, second.changes
    assert f"rebuilt without {knob}" in second.rationale
    assert list(planner._searches[Layer.dbms].space) != [knob]


def test_the_search_range_ends_at_the_validators_cpu_limit() -> None:
    """max_parallel_workers_per_gather at its default 2 on 2 cores: a ×4 range would be [1, 8], but the
    validator's pg.per_gather_cores allows 1 × cores. The demo of 2026-12-03 lost round 3 to three such
    refusals in a row; the range now ends at the rule's cap, and the cap's value passes the validator."""
    from agenticdb.models import Change
    from agenticdb.planner.caps import cpu_cap
    from agenticdb.planner.search import _range
    from agenticdb.validation.validator import validate

    spec = KnobSpec(
        name="max_parallel_workers_per_gather",
        vartype="integer",
        min_value=0,
        max_value=1024,
        apply=ApplyMode.reload,
        default="2",
    )
    ctx = _ctx(knobs={spec.name: spec}, current={spec.name: "2"})
    assert cpu_cap(ctx, spec.name) == 2
    assert cpu_cap(ctx, "work_mem") is None
    dist = _range(ctx, spec.name, {spec.name: "2"}, set())
    assert dist is not None and (dist.low, dist.high) == (1.0, 2.0)

    def verdict(value: str) -> bool:
        change = Change(name=spec.name, value=value)
        p = Proposal(bottleneck=Bottleneck.cpu, changes=[change], rationale="t")
        v = validate(p, ctx.catalog, {spec.name: "1"}, ctx.profile.hardware, PolicyConfig(), Layer.dbms)
        return v.ok and not [f for f in v.failed if f.check == "hardware"]

    assert verdict("2") and not verdict("3")


def _ctx(
    knobs: dict[str, KnobSpec] | None = None,
    current: dict[str, str] | None = None,
    feedback: list[FailedCheck] | None = None,
) -> Any:
    """A PostgreSQL 15 planning context on a 1-GiB host: catalog ``knobs``, starting values ``current``,
    this round's validator ``feedback``."""
    from agenticdb.models import Hardware, RuntimeProfile
    from agenticdb.models.planning import Fingerprint, PlanningContext

    hw = Hardware(cpu_count=2, memory_bytes=2**30, memory_limit_bytes=2**30)
    profile = RuntimeProfile(target="postgresql", dbms_version="15", hardware=hw, current_config=current or {})
    fp = Fingerprint(
        dbms="postgresql", version_major="15", benchmark="pgbench", workload_class="oltp", read_fraction=0.5
    )
    return PlanningContext(
        profile=profile,
        fingerprint=fp,
        catalog=Catalog(target="postgresql", version="15", knobs=knobs or {}),
        stage=Layer.dbms,
        validator_feedback=feedback or [],
    )


# ------------------------------------------------------------------ real PostgreSQL


@pytest.fixture(scope="module")
def own_pg() -> Iterator[PostgresSandboxInfo]:
    """A private PostgreSQL for this module (the session leaves tuned values behind)."""
    base = Path(tempfile.mkdtemp(prefix="agenticdb-search-"))
    base.chmod(0o755)
    sandbox = PostgresSandbox(base)
    info = sandbox.up()
    try:
        yield info
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_a_real_postgres_session_reaches_the_search_stage(own_pg: PostgresSandboxInfo, tmp_path: Path) -> None:
    """Nothing scores above the playbook's threshold (min_score above 1), so the planner hands over to the
    search at once; its suggestions are validated, applied, measured with real pgbench and judged, and
    ``agenticdb journal show`` names the stage of every proposal."""
    home = tmp_path / "home"
    cfg = Settings(
        target=own_pg.target_config(),
        workload=WorkloadConfig(kind="pgbench", scale=1, clients=2, threads=1, duration_s=2, warmup_s=0),
        loop=LoopConfig(opening=False, max_rounds=2, baseline_runs=2, max_pairs=2, search_patience=2),
        policy=PolicyConfig(allow_restart=False),
        storage=StorageConfig(home=home),
    )
    journal, memory = open_stores(cfg)
    target = build_target(cfg)
    planner = RefiningPlanner(HeuristicPlanner(min_score=1.01), SearchSettings(max_knobs=2))
    s = TuningSession(cfg, target, build_workload(cfg, target), planner, journal, memory)
    result = s.run()
    assert result.status == "completed", result.reason
    assert stages(result) == ["search", "search"], [r.reason for r in result.rounds]
    measured = [r for r in result.rounds if r.judged is not None]
    assert measured, [r.reason for r in result.rounds]
    for r in measured:
        assert r.proposal is not None and r.proposal.stage == "search"
        assert set(r.changes) <= set(planner._searches[Layer.dbms].space)
    env = {**os.environ, "AGENTICDB_HOME": str(home)}
    show = subprocess.run(
        [sys.executable, "-m", "agenticdb.cli", "journal", "show", s.session_id],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert show.returncode == 0, show.stderr
    assert show.stdout.count("stage search") >= 2, show.stdout[-2000:]


def test_a_session_ends_when_the_search_converges_and_journals_the_figures(tmp_path: Path) -> None:
    s, _, journal = session(tmp_path, [{"work_mem": "16MB"}], {"max_rounds": 30, "search_patience": 2})
    result = s.run()
    assert result.reason.startswith("search converged"), result.reason
    stop = [e.data for e in journal.events(s.session_id) if e.event == "stop"]
    assert len(stop) == 1 and len(stop[0]["search_rounds"]) == 2
    assert not any(r["kept"] for r in stop[0]["search_rounds"])
    assert len(result.rounds) < 30
