"""A stop request during the opening's race (a first Ctrl-C, a service stop): no further screen, no proof.

Fast mechanics on a real TuningSession (real journal and Memory Book files) over the in-memory target of
tests/memtarget.py, as tests/test_race.py. The stop request is the session's ``should_stop``, set from inside a
screen's run the way the signal handler sets it while the run goes on. A workload that honours
``Workload.stop`` (as pgbench, sysbench, the command workload and TPC-H do) ends that run at once; one that
does not lets it end, and the race stops before the next screen. The real thing (SIGINT to a real ``agenticdb
tune``'s process group on a private PostgreSQL) is tests/test_ctrl_c_group.py.

``run_tool``'s stop is checked on a real process: ``sleep 30`` is ended within a second.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from memtarget import InMemoryTarget, ScriptedPlanner, ScriptedWorkload, VirtualClock
from rich.console import Console

from agenticdb.cli.tune_cmd import RACE_STOP, ROUND_STOP, START_STOP, _on_sigint, _summary, stop_message
from agenticdb.config import Settings
from agenticdb.config.loop_section import LoopConfig
from agenticdb.config.sections import StorageConfig, WorkloadConfig
from agenticdb.loop.race import race_lines
from agenticdb.loop.session import TuningSession
from agenticdb.models import Measurement
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.opening_types import Candidate, Opening
from agenticdb.store.journal import Journal
from agenticdb.store.journal_events import JournalEvent
from agenticdb.store.memory import MemoryBook
from agenticdb.workloads.base import RunStopped
from agenticdb.workloads.common import run_tool

SETS = {
    "first": {"random_page_cost": "1.1"},
    "second": {"work_mem": "8MB"},
    "third": {"random_page_cost": "2"},
}


class StopDuringScreen(ScriptedWorkload):
    """The scripted workload; during the run labelled ``stop_in`` the stop is requested (the signal handler
    sets the flag while the run goes on). ``honours``: the run then ends at once, as a tool run does when
    ``Workload.stop`` says so (``RunStopped``); else it runs to its end."""

    def __init__(self, target: InMemoryTarget, clock: VirtualClock, stop_in: str, honours: bool) -> None:
        super().__init__(target, lambda values: 100.0, clock)
        self.stop_in, self.honours = stop_in, honours
        self.requested = False
        self.label = ""
        self.labels: list[str] = []
        self.racing: Callable[[], bool] = lambda: False  # the session's racing flag, once it is built
        self.racing_at: list[tuple[str, bool]] = []  # each run's label and the flag during it
        self.message: Callable[[], str] = lambda: ""  # what a first Ctrl-C would print now (tune_cmd.stop_message)
        self.message_at: list[tuple[str, str]] = []  # each run's label and that message during it

    def next_run(self, label: str) -> None:
        self.label = label
        self.labels.append(label)

    def run(
        self, seconds: float, warmup_max_s: float = 0.0, on_tool_start: Callable[[int], object] | None = None
    ) -> Measurement:
        self.racing_at.append((self.label, self.racing()))
        self.message_at.append((self.label, self.message()))
        if self.label == self.stop_in:
            self.requested = True
        if self.honours and self.stop is not None and self.stop():
            raise RunStopped("scripted run ended by agenticdb after 0.3 s")
        return super().run(seconds, warmup_max_s, on_tool_start)


def _session(
    tmp_path: Path, stop_in: str, honours: bool, opening: bool = True
) -> tuple[TuningSession, InMemoryTarget, StopDuringScreen]:
    target, clock = InMemoryTarget(), VirtualClock()
    workload = StopDuringScreen(target, clock, stop_in, honours)

    def source(ctx: PlanningContext, k: int) -> Opening:
        made = [Candidate(name, dict(ch), f"test set {name}", {n: "test" for n in ch}) for name, ch in SETS.items()]
        return Opening(candidates=made[:k])

    cfg = Settings(
        workload=WorkloadConfig(kind="pgbench", duration_s=1, warmup_s=0),
        loop=LoopConfig(max_rounds=3, baseline_runs=2, plateau_rounds=5, search=False, opening=opening),
        storage=StorageConfig(home=tmp_path),
    )
    s = TuningSession(
        cfg,
        target,
        workload,
        ScriptedPlanner([{"effective_io_concurrency": "8"}]),
        Journal(tmp_path / "j.db"),
        MemoryBook(tmp_path / "m.db"),
        should_stop=lambda: workload.requested,
        opening=source,
        clock=clock.now,
    )
    workload.racing = lambda: s.racing
    workload.message = lambda: stop_message([s])
    return s, target, workload


def _events(s: TuningSession, name: str) -> list[JournalEvent]:
    return [e for e in s.journal.events(s.session_id) if e.event == name]


def _nothing_after_the_race(s: TuningSession, target: InMemoryTarget, start: dict[str, str]) -> None:
    """No proof, no diagnosis round; the start in effect; no failure anywhere, no failed lesson."""
    assert not _events(s, "judged") and not _events(s, "failure")
    assert target.values == start
    assert not s.journal.open_intents()
    assert s.memory.list_experience()[-1].experience.failed == []


def test_a_stop_during_a_screen_ends_its_run_and_the_race(tmp_path: Path) -> None:
    s, target, workload = _session(tmp_path, "race first", honours=True)
    start = dict(target.values)
    result = s.run()

    # the screen's run ended at the stop: an interruption (run.interrupted), never a failure or a cut-off
    assert workload.labels[-1] == "race first", workload.labels  # nothing measured after it
    assert [r.round_no for r in result.rounds] == [1]
    screen = result.rounds[0]
    assert screen.failure is None and screen.measurement is None and "stop request" in screen.interrupted
    interrupted = _events(s, "run.interrupted")
    assert len(interrupted) == 1 and interrupted[0].round_no == 1
    race = _events(s, "race")[-1].data
    assert "interrupted in round 1" in race["stopped"] and race["leader"] is None
    assert race["table"][0]["interrupted"] and not race["table"][0]["failed"] and not race["table"][0]["cut_off"]
    assert "interrupted in round 1" in race_lines(race)[-1]
    # no further screen and no proof: one proposal only; the start put back and verified
    assert [e.round_no for e in _events(s, "proposal")] == [1]
    assert _events(s, "stop.requested")
    assert result.status == "stopped" and "the opening's race was interrupted in round 1" in result.reason
    assert "no further screen and no proof started" in result.reason
    # the end summary tells the stop reason once: in the session's line, not again as "opening not proven"
    out = io.StringIO()
    _summary(Console(file=out, soft_wrap=True, width=300), Settings(), result)
    assert out.getvalue().count("the opening's race was interrupted in round 1") == 1, out.getvalue()
    assert "opening not proven" not in out.getvalue(), out.getvalue()
    _nothing_after_the_race(s, target, start)


def test_a_stop_during_the_last_screen_that_runs_to_its_end_starts_no_proof(tmp_path: Path) -> None:
    """A workload that cannot end a run early (the live workload's window): the screen ends normally, the
    race stops before the next screen and before the proof."""
    s, target, workload = _session(tmp_path, "race second", honours=False)
    start = dict(target.values)
    result = s.run()

    assert workload.labels[-1] == "race second", workload.labels
    assert [r.round_no for r in result.rounds] == [1, 2]
    assert all(r.failure is None and not r.interrupted and r.measurement is not None for r in result.rounds)
    assert not _events(s, "run.interrupted")
    race = _events(s, "race")[-1].data
    assert "interrupted after round 2" in race["stopped"] and [row["round"] for row in race["table"]] == [1, 2]
    assert result.status == "stopped" and "interrupted after round 2" in result.reason
    assert [e.data["reason"] for e in _events(s, "reverted")] == [f"opening: {race['stopped']}"]
    _nothing_after_the_race(s, target, start)


def test_the_session_says_it_races_during_the_screens_only(tmp_path: Path) -> None:
    """``TuningSession.racing`` (what the command line's first Ctrl-C says a stop does: end the race at once, or
    let the round finish) is True during every screen's run and False during the baseline, the proof and the rounds
    after it, and after the session."""
    s, _, workload = _session(tmp_path, "no such run", honours=True)
    s.run()
    assert not s.racing
    screens = [racing for label, racing in workload.racing_at if label.startswith("race ")]
    others = [(label, racing) for label, racing in workload.racing_at if not label.startswith("race ")]
    assert len(screens) == len(SETS) and all(screens), workload.racing_at
    assert any(label.startswith("baseline") for label, _ in others), others
    assert len(others) > 2 and not any(racing for _, racing in others), others  # baseline, proof pairs, rounds
    assert _events(s, "judged"), "the proof ran"


def test_the_first_ctrl_c_says_what_it_does_where_the_session_is(tmp_path: Path) -> None:
    """The baseline is no round: a first Ctrl-C there said "stopping after this round". The message follows the
    session: the start (not built yet, the baseline), the opening's race, the proof and the rounds after it."""
    s, _, workload = _session(tmp_path, "no such run", honours=True)
    assert stop_message([]) == START_STOP  # before the session is built: the start is still ahead
    s.run()
    said = dict(workload.message_at)
    baseline = [message for label, message in workload.message_at if label.startswith("baseline")]
    screens = [message for label, message in workload.message_at if label.startswith("race ")]
    later = [message for label, message in workload.message_at if not label.startswith(("baseline", "race "))]
    assert baseline and all(m == START_STOP for m in baseline), said
    assert len(screens) == len(SETS) and all(m == RACE_STOP for m in screens), said
    assert later and all(m == ROUND_STOP for m in later), said  # the proof's pairs and the rounds
    assert "after this round" not in START_STOP and "before the first round" in START_STOP
    assert "the baseline's remaining runs" in START_STOP and "no run is cut short" in START_STOP
    # the first Ctrl-C requests the stop and prints it; the second stops now
    out, stop = io.StringIO(), {"requested": 0}
    handler = _on_sigint(Console(file=out, width=300), stop, lambda: stop_message([]))
    handler(2, None)
    assert stop["requested"] == 1 and "stopping before the first round: the start finishes first" in out.getvalue()
    with pytest.raises(KeyboardInterrupt):
        handler(2, None)


@pytest.mark.parametrize("opening", [True, False])
def test_a_stop_during_the_baseline_measures_its_remaining_runs_then_no_round(tmp_path: Path, opening: bool) -> None:
    """What ``START_STOP`` says happens: the baseline run in flight ends normally, the baseline's remaining run is
    measured (the start does not look at the stop), then the session stops before the opening and round 1, saying
    so (it said "ended after the last full round" with no round run)."""
    s, target, workload = _session(tmp_path, "baseline 1", honours=True, opening=opening)
    start = dict(target.values)
    result = s.run()
    assert workload.labels == ["baseline 1", "baseline 2"], workload.labels
    assert [m for _, m in workload.message_at] == [START_STOP, START_STOP]
    assert result.rounds == [] and not _events(s, "proposal")
    assert result.status == "stopped", result
    assert result.reason == "stop requested (signal): ended after the baseline, before any round", result.reason
    assert target.values == start and not s.journal.open_intents()


def test_run_tool_ends_the_tool_when_the_stop_is_requested() -> None:
    """A real process (``sleep 30``) is killed, its group with it, within a poll or two of the request."""
    began = time.monotonic()
    asked = {"n": 0}

    def stop() -> bool:
        asked["n"] += 1
        return asked["n"] >= 2  # the second poll (0.5 s in)

    with pytest.raises(RunStopped, match="sleep ended by agenticdb"):
        run_tool(["sleep", "30"], timeout_s=60, stop=stop)
    assert time.monotonic() - began < 10  # far below the tool's 30 s
