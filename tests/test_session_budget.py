"""The session's time budget binds every phase that measures (``next_move.no_room_to_start``).

A DBA who gives 8 minutes expects the session to end by then, give or take one measured run; the benchmark
harness stops Optuna TPE at exactly the budget. On 2026-12-06 ``agenticdb tune --budget-min 8`` on the
harness's pg-pgbench-badstart scenario ran 575 s of a 480-s budget. Each test here runs a real
TuningSession (real journal and Memory Book files) over the in-memory target of tests/memtarget.py on a
virtual clock that only the scripted runs (and, here, the target's restarts) advance, with runs that take
longer than the product's cost prior (the baseline's 1-s runs): with a budget of B seconds and runs of c
seconds, the session's last work ends by B + c, where without the rule it ran on by several runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from memtarget import KNOBS, InMemoryTarget, ScriptedPlanner, ScriptedWorkload, VirtualClock

from agenticdb.config import Settings
from agenticdb.config.loop_section import LoopConfig
from agenticdb.config.sections import StorageConfig, WorkloadConfig
from agenticdb.loop.session import SessionResult, TuningSession
from agenticdb.models import ApplyMode, Catalog, NormalizedChange, Snapshot
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.opening_types import Candidate, Opening
from agenticdb.store.journal import Journal
from agenticdb.store.journal_events import JournalEvent
from agenticdb.store.memory import MemoryBook


def objective(values: dict[str, str]) -> float:
    """work_mem 8MB: 1.5 × the start; anything else the start's 100."""
    return 150.0 if values.get("work_mem") == "8MB" else 100.0


class Session:
    """One session on ``clock``; ``time_budget_s`` and the runs' seconds are virtual seconds."""

    def __init__(
        self,
        tmp_path: Path,
        loop: dict[str, Any],
        clock: VirtualClock,
        target: InMemoryTarget | None = None,
        script: list[dict[str, str] | Exception] | None = None,
        opening: Callable[[PlanningContext, int], Opening] | None = None,
        approve: Callable[..., str | None] | None = None,
    ) -> None:
        self.target = target or InMemoryTarget()
        self.clock = clock
        self.workload = ScriptedWorkload(self.target, objective, clock)
        cfg = Settings(
            workload=WorkloadConfig(kind="pgbench", duration_s=1, warmup_s=0),
            loop=LoopConfig(**{"opening": False, "baseline_runs": 2, "plateau_rounds": 5, "search": False, **loop}),
            storage=StorageConfig(home=tmp_path),
        )
        planner = ScriptedPlanner(script or [])
        self.session = TuningSession(
            cfg,
            self.target,
            self.workload,
            planner,
            Journal(tmp_path / "j.db"),
            MemoryBook(tmp_path / "m.db"),
            opening=opening,
            approve=approve,
            clock=clock.now,
        )

    def run(self) -> SessionResult:
        return self.session.run()

    def events(self, name: str) -> list[JournalEvent]:
        return [e for e in self.session.journal.events(self.session.session_id) if e.event == name]


def test_a_decision_starts_no_pair_past_the_budget_even_below_its_minimum_pairs(tmp_path: Path) -> None:
    """min_pairs = 3 and runs of 10 s where the prior says 1 s: round 1 may start (its 5 runs' prior, 5 s,
    fits the 25 s the baseline left); the screen ends at 30 s of 45, pair 2 (the prior's 2 s) at 50 s, and
    the slowest pair's 2 × 10 s no longer fits: the decision ends there. It used to measure pair 3 (the
    minimum pairs) past the budget and end at 70 s. Ended by the budget, it is judged on its valid pairs as
    a cut decision is: the rule's own interval at a final look, else "undecided", never a tie (the
    undecided case: tests/test_session_branches.py)."""
    budget, c = 45.0, 10.0
    loop = {"time_budget_s": budget, "min_pairs": 3, "max_rounds": 1}
    s = Session(tmp_path, loop, VirtualClock(per_run_s=c), script=[{"work_mem": "8MB"}])
    result = s.run()
    assert s.clock.now() <= budget + c, s.clock.now()
    assert s.workload.runs == 5  # 2 baseline runs, the screen, pair 2
    judged = s.events("judged")[0].data
    # +50 % on both pairs: decisive by the rule's own interval at this final look (the error rate split over
    # the looks planned), as a decision its own time cap ends is
    assert judged["pairs"] == 2 and judged["verdict"] == "better" and judged["low"] > 0, judged
    assert result.status == "completed" and "time budget" in result.reason


class RestartingTarget(InMemoryTarget):
    """random_page_cost is restart-only (as shared_buffers is on PostgreSQL) and a restart spends
    ``restart_s`` seconds of the session's clock (the restart and the cold warm-up after it)."""

    def __init__(self, clock: VirtualClock, restart_s: float) -> None:
        super().__init__()
        self.clock, self.restart_s = clock, restart_s

    def catalog(self) -> Catalog:
        knobs = dict(KNOBS)
        knobs["random_page_cost"] = knobs["random_page_cost"].model_copy(update={"apply": ApplyMode.restart})
        return Catalog(target=self.kind, version=self.version(), knobs=knobs)

    def can_restart(self) -> bool:
        return True

    def apply(self, changes: list[NormalizedChange], mode: ApplyMode) -> bool:
        restarted = super().apply(changes, mode)
        if restarted:
            self.clock.advance(self.restart_s)
        return restarted

    def restore(self, snapshot: Snapshot) -> None:
        restarts = (
            snapshot.values.get("random_page_cost", self.values["random_page_cost"]) != self.values["random_page_cost"]
        )
        super().restore(snapshot)
        if restarts:  # a switch between the two configurations restarts the server
            self.clock.advance(self.restart_s)


def test_a_trial_whose_restarts_do_not_fit_is_not_started(tmp_path: Path) -> None:
    """20 s of budget, 1-s runs, a change that needs a restart: 18 s are left after the baseline, enough for
    the smallest decision without a restart (3 s), not with its restarts (24 s by the prior: a restart of
    5 s and the cold warm-up at the trial, at each switch and at the revert). The trial is not started,
    journaled with both figures. It used to be tried: a restart of 12 s here at the trial and at the switch
    back to the best, pair 2 measured past the budget, the session ended at 29 s."""
    budget, c = 20.0, 1.0
    clock = VirtualClock(per_run_s=c)
    target = RestartingTarget(clock, restart_s=12.0)
    s = Session(tmp_path, {"time_budget_s": budget, "max_rounds": 2}, clock, target, [{"random_page_cost": "1.1"}])
    result = s.run()
    assert s.clock.now() <= budget + c, s.clock.now()
    assert s.workload.runs == 2 and target.values["random_page_cost"] == "4"
    not_started = s.events("budget.not_started")
    assert len(not_started) == 1, not_started
    data = not_started[0].data
    assert data["left_s"] == 18.0 and data["cost_s"] == 24.0 and "with the restarts its change needs" in data["work"]
    assert result.status == "completed" and result.reason == data["reason"]
    assert result.reason.startswith("time budget nearly used: 18s of 20s left")
    assert not any(r.kept for r in result.rounds) and result.rounds[0].judged is None


def candidates(*sets: tuple[str, dict[str, str]]) -> Callable[[PlanningContext, int], Opening]:
    def source(ctx: PlanningContext, k: int) -> Opening:
        made = [Candidate(name, dict(ch), f"test set {name}", {n: "test" for n in ch}) for name, ch in sets]
        return Opening(candidates=made[:k])

    return source


def test_neither_a_screen_nor_the_proof_starts_when_the_race_used_the_budget(tmp_path: Path) -> None:
    """Three screens and the proof's 4 runs fit the 18 s the baseline left by the prior (1-s runs), but each
    screen takes 10 s: after two the session is past its 20 s. The third screen and the proof are not started,
    the start is put back and the session ends, by B + c. It used to screen the third candidate and prove the
    leader on 4 runs of 10 s, ending at 72 s."""
    budget, c = 20.0, 10.0
    clock = VirtualClock()
    source = candidates(
        ("winner", {"work_mem": "8MB"}),
        ("placebo", {"random_page_cost": "1.1"}),
        ("io", {"effective_io_concurrency": "8"}),
    )
    s = Session(tmp_path, {"time_budget_s": budget, "opening": True, "max_rounds": 3}, clock, opening=source)
    s.workload.slow_runs = {n: c for n in range(3, 40)}
    result = s.run()
    assert clock.now() <= budget + c, clock.now()
    race = s.events("race")[0].data
    assert [row["candidate"] for row in race["table"]] == ["winner", "placebo"]
    assert any(n.startswith("screens from 'io' on not started: time budget nearly used") for n in race["notes"])
    works = [e.data["work"] for e in s.events("budget.not_started")]
    assert works[:2] == ["the screen of 'io' and the proof's", "the proof's smallest decision"], works
    reverted = s.events("reverted")[0].data["reason"]
    assert reverted.startswith("opening: the proof of 'winner' was not started: time budget nearly used"), reverted
    assert s.target.values["work_mem"] == "4MB" and result.best_changes == {}
    assert result.status == "completed" and "time budget" in result.reason


def test_no_screen_starts_after_an_approval_that_waited_past_the_budget(tmp_path: Path) -> None:
    """Approve mode: the opening's one approval waits 30 s of a 20-s budget (a person away). The race it
    approved is not started, the race event says why with the figures; it used to screen and prove anyway."""
    clock = VirtualClock(per_run_s=1.0)

    def person(*_: object) -> str | None:
        clock.advance(30.0)
        return None  # approved

    source = candidates(("winner", {"work_mem": "8MB"}))
    s = Session(tmp_path, {"time_budget_s": 20.0, "opening": True}, clock, opening=source, approve=person)
    result = s.run()
    assert s.workload.runs == 2 and clock.now() == 32.0
    race = s.events("race")[0].data
    assert race["skipped"].startswith("screens from 'winner' on not started: time budget nearly used: 0s of 20s left")
    assert s.target.values["work_mem"] == "4MB" and result.best_changes == {}
    assert result.status == "completed" and "time budget" in result.reason


def test_the_candidates_the_time_left_cannot_pay_for_are_named_with_why(tmp_path: Path) -> None:
    """A new user's demo raced 1 of 3 opening candidates and neither `tune` nor `journal show` said why (only
    the log's opening.budget_drop): each candidate left out is named, with the cost of the screens and the
    proof against the time left, in the race's notes and the session's result (tune's summary)."""
    source = candidates(
        ("winner", {"work_mem": "8MB"}),
        ("placebo", {"random_page_cost": "1.1"}),
        ("io", {"effective_io_concurrency": "8"}),
    )
    s = Session(tmp_path, {"time_budget_s": 7.0, "opening": True, "max_rounds": 3}, VirtualClock(), opening=source)
    result = s.run()
    race = s.events("race")[0].data
    raced = [row["candidate"] for row in race["table"]]
    assert len(raced) < 3, race
    left_out = result.opening_left_out
    assert len(left_out) == 3 - len(raced), left_out
    assert all(n in race["notes"] for n in left_out)
    assert "left out of the race: 3 screens and the proof cost " in left_out[0], left_out
    assert "s of the time budget left (the most generic candidate is left out first)" in left_out[0], left_out
    assert {n.split("'")[1] for n in left_out} == {"winner", "placebo", "io"} - set(raced)
