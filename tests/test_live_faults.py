"""Live windows and faults from outside (issue 38), fast branch tests with a scripted statistics reader
(real-server windows: tests/test_outside_faults.py): a reset mid-window makes it disturbed, never judged
and never tripping the guard; the guard leaves statements too short to time alone; the 'no statements'
message says which database was watched and how to choose another."""

from __future__ import annotations

from pathlib import Path

import pytest

from agenticdb.config.sections import LiveConfig, WorkloadConfig
from agenticdb.measure.disturbance import DisturbanceThresholds, classify
from agenticdb.models import Disturbance
from agenticdb.workloads.base import WorkloadError
from agenticdb.workloads.live import GuardTripped, LiveWorkload
from tests.test_live_unit import _ScriptedReader


class _ResettingReader(_ScriptedReader):
    """Cumulative snapshots; at snapshot ``reset_at`` every counter starts again from zero (a
    pg_stat_statements_reset())."""

    def __init__(self, per_second: list[dict[str, tuple[int, float]]], reset_at: int) -> None:
        super().__init__(per_second)
        self.reset_at = reset_at
        self.watched = "database shop (live.database = unset: the database of target.dsn)"

    def snapshot(self):  # type: ignore[no-untyped-def]
        if self.i == self.reset_at:
            self.totals = {}
        return super().snapshot()


def _workload(reader: _ScriptedReader, **live: object) -> LiveWorkload:
    clock = [0.0]
    return LiveWorkload(
        WorkloadConfig(kind="live"),
        LiveConfig(**{"min_calls": 1, "turnover_max_s": 0, **live}),  # type: ignore[arg-type]
        reader,
        clock=lambda: clock[0],
        sleep=lambda s: clock.__setitem__(0, clock[0] + s),
    )


def test_a_reset_mid_candidate_window_is_disturbed_and_does_not_trip_the_guard() -> None:
    steady = {"q": (100, 500.0)}  # 5 ms a call
    # baseline window 5 s, 1 s between windows, candidate window: reset at its 3rd second; after it the
    # counters restart, so a plain difference would read 'q' as 3× slower (calls went down)
    reader = _ResettingReader([steady] * 5 + [{}] + [steady] * 2 + [{"q": (10, 500.0)}] * 3, reset_at=9)
    w = _workload(reader)
    w.prepare()
    base = w.run(5)
    assert base.disturbance is None and base.objective == pytest.approx(1.0)
    w.next_run("candidate")
    m = w.run(5)  # no GuardTripped: the guard does not judge a window whose counters went down
    assert m.disturbance is not None and m.disturbance.disturbed
    assert "went down" in m.disturbance.reason and m.disturbance.world
    disturbed, reason = classify(m.disturbance, None, DisturbanceThresholds())
    assert disturbed and "changed under the run" in reason  # the pairing keeps it out of the decision


def test_the_guard_ignores_statements_too_short_to_time() -> None:
    # 'tiny' is 0.02 ms a call and carries most of the time (many calls); in the candidate it reads 0.08 ms
    base_s = {"tiny": (50_000, 1000.0), "real": (10, 50.0)}
    cand_s = {"tiny": (50_000, 4000.0), "real": (10, 50.0)}
    w = _workload(_ScriptedReader([base_s] * 3 + [{}] + [cand_s] * 3))
    w.prepare()
    w.run(3)
    w.next_run("candidate")
    m = w.run(3)  # the 4x of a 20-µs statement is noise: no trip
    assert m.objective > 2.0  # the objective still reports it (the decision, not the guard, judges it)
    # the same 4x on a statement of 5 ms trips the guard
    w2 = _workload(_ScriptedReader([{"real": (100, 500.0)}] * 3 + [{}] + [{"real": (100, 2000.0)}] * 3))
    w2.prepare()
    w2.run(3)
    w2.next_run("candidate")
    with pytest.raises(GuardTripped, match="real"):
        w2.run(3)
    # a sub-ms statement that becomes long enough to time (0.3 → 5 ms: a temp table sent to disk) trips it
    w4 = _workload(_ScriptedReader([{"q": (100, 30.0)}] * 3 + [{}] + [{"q": (100, 500.0)}] * 3))
    w4.prepare()
    w4.run(3)
    w4.next_run("candidate")
    with pytest.raises(GuardTripped):
        w4.run(3)
    # and with the floor at 0 the tiny one trips it too (the setting is what decides)
    w3 = _workload(_ScriptedReader([base_s] * 3 + [{}] + [cand_s] * 3), guard_min_mean_ms=0.0)
    w3.prepare()
    w3.run(3)
    w3.next_run("candidate")
    with pytest.raises(GuardTripped):
        w3.run(3)


def test_no_statements_message_names_the_database_and_live_database() -> None:
    reader = _ResettingReader([{}] * 40, reset_at=-1)
    w = _workload(reader, min_calls=5, max_extend=1)
    w.prepare()
    with pytest.raises(WorkloadError) as info:
        w.run(2)
    msg = str(info.value)
    assert "no statement had live.min_calls = 5 calls in database shop" in msg
    assert "set live.database" in msg and "AGENTICDB_LIVE__DATABASE" in msg


def test_world_changes_make_any_run_disturbed() -> None:
    d = Disturbance(samples=3, seconds=3.0, other_cpu_cores=0.1, other_cpu_spread=0.0, world=["the server restarted"])
    disturbed, reason = classify(d, None, DisturbanceThresholds())
    assert disturbed and "the server restarted" in reason


def test_world_marks_compare_and_outside_restart_needs_all_evidence() -> None:
    from agenticdb.measure.worldwatch import lines_after, outside_restart, world_changes

    a = {"server_started": "t0", "config_loaded": "c0", "database_stats_reset": "", "statements_reset": "r0"}
    a |= {"statements_dealloc": "0", "statements_calls": "500"}
    assert world_changes(a, dict(a)) == []
    said = world_changes(a, {**a, "statements_reset": "r1", "statements_calls": "3"})
    assert len(said) == 1 and "pg_stat_statements_info.stats_reset" in said[0]
    assert "went down" in world_changes(a, {**a, "statements_calls": "3"})[0]  # a partial reset
    assert world_changes(a, {**a, "statements_calls": "3", "statements_dealloc": "4"}) == []  # evictions
    assert "restarted" in world_changes(a, {**a, "server_started": "t1"})[0]
    my = {"server_started_s": "1000", "digest_calls": "900"}
    assert world_changes(my, {"server_started_s": "1001", "digest_calls": "950"}) == []  # 1-s rounding
    assert len(world_changes(my, {"server_started_s": "1090", "digest_calls": "5"})) == 2

    log = ["old: LOG:  received fast shutdown request", "anchor 1", "anchor 2"]
    now = [*log, "LOG:  received fast shutdown request", "LOG:  database system is ready to accept connections"]
    since = lines_after(log[-2:], now)
    assert since == now[3:]
    cut = "terminating connection due to administrator command"
    assert outside_restart(cut, since, 0, 0)[0]
    assert not outside_restart(cut, since, 0, 1)[0]  # an OOM kill in the cgroup: the candidate's
    assert not outside_restart("syntax error", since, 0, 0)[0]
    assert not outside_restart(cut, lines_after(log[-2:], log), 0, 0)[0]  # the old shutdown line does not count
    crash = [*since, "LOG:  server process (PID 7) was terminated by signal 9: Killed"]
    assert not outside_restart(cut, crash, None, None)[0]


def test_memory_forget_lessons_drops_single_failed_lessons(tmp_path: Path) -> None:
    """A lesson recorded 'failed' because an outsider restarted the server is removed alone; the row and
    the candidate's other lessons stay (``agenticdb memory forget --lessons``)."""
    from typer.testing import CliRunner

    from agenticdb.cli.memory_cmd import memory_app
    from agenticdb.models.planning import Experience, Fingerprint
    from agenticdb.store.memory import MemoryBook

    f = Fingerprint(dbms="postgresql", version_major="15", benchmark="live", workload_class="mixed", read_fraction=0.5)
    outsider = {
        "changes": {"jit": "off"},
        "phase": "workload",
        "why": "terminating connection due to administrator command",
    }
    own = {"changes": {"wal_level": "minimal"}, "phase": "restart", "why": "server did not start"}
    old = {"changes": {"work_mem": "64kB"}, "why": "FATAL: terminating connection due to administrator command"}
    e = Experience(fingerprint=f, session_id="s1", best_gain=0.1, created_at=1.0, failed=[outsider, own, old])
    home = tmp_path / "home"
    with MemoryBook(home / "memory.db") as book:
        book.write_experience(e)
    runner = CliRunner()
    r = runner.invoke(memory_app, ["forget", "--lessons", "administrator command", "--home", str(home)])
    assert r.exit_code == 0, r.output
    assert "forgot 2 lesson(s)" in r.output and "rows stay" in r.output
    with MemoryBook(home / "memory.db") as book:
        (row,) = book.list_experience()
        assert row.experience.failed == [own]  # the old row without a phase matched on its reason
    again = runner.invoke(memory_app, ["forget", "--lessons", "administrator command", "--home", str(home)])
    assert again.exit_code == 1 and "no failed lesson matched" in again.output
    assert runner.invoke(memory_app, ["forget", "--lessons", " ", "--home", str(home)]).exit_code == 2


def test_an_interrupted_round_may_be_repeated_once_then_the_stage_stops() -> None:
    from agenticdb.loop.next_move import _after
    from agenticdb.models import Bottleneck, Decision, Failure, Layer, RoundOutcome

    def rnd(no: int, interrupted: str = "", failed: bool = False) -> RoundOutcome:
        return RoundOutcome(
            session_id="s", round_no=no, stage=Layer.dbms, bottleneck=Bottleneck.cpu, decision=Decision.continue_,
            reason="", interrupted=interrupted, verdict_ok=True,
            failure=Failure(phase="workload", message="x") if failed else None,
        )  # fmt: skip

    first = [rnd(1, "57P01; fast shutdown")]
    assert _after(first[-1], first)[0] == Decision.continue_
    twice = [rnd(1, "a"), rnd(2, "b")]
    decision, reason = _after(twice[-1], twice)
    assert decision == Decision.terminate and "interrupted by an outside restart" in reason
    failed = [rnd(1, failed=True)]
    assert "never repeat it" in _after(failed[-1], failed)[1]
