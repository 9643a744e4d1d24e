"""Bounded bad trials (issue 14, agenticdb.measure.trial_limit): the rules (pure), a real pgbench run stopped
early on a private PostgreSQL, and the session counting a stopped trial as worse unless the host
disturbed it (in-memory target of tests/memtarget.py; the mechanics tests force their trial)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from memtarget import InMemoryTarget, ScriptedPlanner, ScriptedWorkload

from agenticdb.config import Settings
from agenticdb.config.loop_section import LoopConfig
from agenticdb.config.sections import StorageConfig, WorkloadConfig
from agenticdb.loop.session import TuningSession
from agenticdb.measure.trial_limit import QUERY_FLOOR_S, TrialLimit, interval_tps, progress_tps
from agenticdb.models import Measurement
from agenticdb.sandbox.mariadb import MariaDBSandboxInfo
from agenticdb.sandbox.postgres import PostgresSandboxInfo
from agenticdb.store.journal import Journal
from agenticdb.store.memory import MemoryBook
from agenticdb.workloads import build_workload, connection_from_dsn

PROGRESS = """progress: 1.0 s, 90.0 tps, lat 10.0 ms stddev 1.0
progress: 2.0 s, 40.0 tps, lat 20.0 ms stddev 1.0
progress: 3.0 s, 41.0 tps, lat 20.0 ms stddev 1.0
progress: 4.0 s, 39.0 tps, lat 20.0 ms stddev 1.0
"""


def test_oltp_rule_needs_steady_points_and_a_far_lower_median() -> None:
    limit = TrialLimit(best_objective=50.0, best_tps=100.0)
    assert progress_tps(PROGRESS, skip_s=1.0) == [40.0, 41.0, 39.0]
    assert limit.oltp(progress_tps(PROGRESS, skip_s=1.0)).startswith("cut off after 3 steady seconds")
    assert limit.oltp([40.0, 41.0]) == ""  # too few points yet
    assert TrialLimit(best_objective=50.0, best_tps=70.0).oltp([40.0, 41.0, 39.0]) == ""  # 40 >= 0.5 × 70
    assert limit.estimate([40.0, 41.0, 39.0], higher_is_better=True) == 50.0 * 0.40


def test_olap_rule_is_a_multiple_of_the_best_query_set_time() -> None:
    limit = TrialLimit(best_objective=10.0, best_seconds=10.0, time_factor=3.0)
    assert limit.olap(29.0) == ""
    assert "past 3 × the best configuration's query-set time of 10.0 s" in limit.olap(31.0)
    assert TrialLimit(best_objective=10.0).olap(1e6) == ""  # best time unknown: never cut


def test_a_real_pgbench_run_far_below_the_best_is_stopped_early(pg_sandbox: PostgresSandboxInfo) -> None:
    conn = connection_from_dsn("postgresql", pg_sandbox.dsn, "agenticdb_bench")
    w = build_workload(WorkloadConfig(kind="pgbench", scale=1, clients=2, threads=1), conn, progress=False)
    w.prepare()
    # forced: no configuration of this sandbox reaches a best of 10^9 TPS, so the run must be cut
    w.limit = TrialLimit(best_objective=1e9, best_tps=1e9, min_points=2)
    t0 = time.monotonic()
    m = w.run(20, warmup_max_s=0)
    took = time.monotonic() - t0
    assert m.cut_off and "below 0.5 × the best configuration's" in m.cut_off, m.raw_tail
    assert took < 12, took  # 20 s asked; cut after 2 progress seconds (+ start-up and the 1-s check)
    assert 0 < m.objective < 1e9 * 0.5 and m.tps > 0


def test_sysbench_interval_lines_are_read_after_the_warmup() -> None:
    text = "[ 1s ] thds: 2 tps: 99.00 qps: 1.0\n[ 2s ] thds: 2 tps: 12.50 qps: 1.0\n[ 3s ] thds: 2 tps: 13.00 qps: 1\n"
    assert interval_tps(text, skip_s=1.0) == [12.5, 13.0]


def test_a_real_sysbench_run_far_below_the_best_is_stopped_early(mariadb_sandbox: MariaDBSandboxInfo) -> None:
    conn = connection_from_dsn("mariadb", mariadb_sandbox.dsn, "wl_trial_limit")
    cfg = WorkloadConfig(kind="sysbench-oltp-read-only", scale=2000, tables=1, clients=2, max_error_rate=0.05)
    w = build_workload(cfg, conn, progress=False)
    w.prepare()
    w.limit = TrialLimit(best_objective=1e9, best_tps=1e9, min_points=2)  # forced: no run reaches it
    t0 = time.monotonic()
    m = w.run(20, warmup_max_s=0)
    assert m.cut_off and "below 0.5 × the best configuration's" in m.cut_off, m.raw_tail
    assert time.monotonic() - t0 < 12 and m.tps > 0


class LimitedWorkload(ScriptedWorkload):
    """The scripted workload honouring ``limit`` like pgbench does: a run below ``ratio`` × the best TPS is
    returned stopped, with the objective estimated from the best level."""

    def run(
        self, seconds: float, warmup_max_s: float = 0.0, on_tool_start: Callable[[int], object] | None = None
    ) -> Measurement:
        m = super().run(seconds, warmup_max_s, on_tool_start)
        if self.limit is None or not self.limit.best_tps:
            return m
        reason = self.limit.oltp([m.tps or 0.0] * 3)
        if not reason:
            return m
        return m.model_copy(update={"cut_off": reason, "objective": self.limit.estimate([m.tps or 0.0], True)})


def objective(values: dict[str, str]) -> float:
    return 10.0 if values.get("autovacuum_naptime") == "4min" else 100.0


def _session(tmp_path: Path, disturb: set[int]) -> tuple[TuningSession, LimitedWorkload, Journal]:
    target = InMemoryTarget()
    workload = LimitedWorkload(target, objective)
    workload.disturb_runs = disturb
    journal = Journal(tmp_path / "journal.db")
    cfg = Settings(
        workload=WorkloadConfig(kind="pgbench", duration_s=1, warmup_s=0),
        loop=LoopConfig(opening=False, max_rounds=1, baseline_runs=2, max_pairs=2, search=False),
        storage=StorageConfig(home=tmp_path),
    )
    planner = ScriptedPlanner([{"autovacuum_naptime": "4min"}])
    s = TuningSession(cfg, target, workload, planner, journal, MemoryBook(tmp_path / "memory.db"))
    return s, workload, journal


def test_a_stopped_trial_is_counted_worse_after_one_run(tmp_path: Path) -> None:
    s, workload, journal = _session(tmp_path, set())
    result = s.run()
    r = result.rounds[0]
    assert r.judged == "worse" and not r.kept
    judged = [e.data for e in journal.events(s.session_id) if e.event == "judged"][0]
    assert judged["candidate"] == [10.0] and judged["best"] == [], judged  # one run, no pairs
    assert "cut off after 3 steady seconds" in judged["reason"] and "counted as worse" in judged["reason"]
    measured = [e.data for e in journal.events(s.session_id) if e.event == "measured"]
    assert any(m["measurement"].get("cut_off") for m in measured)
    assert workload.runs == 3  # two baseline runs + the stopped trial; the best was never re-measured


def test_a_stopped_trial_the_host_disturbed_is_measured_again_in_pairs(tmp_path: Path) -> None:
    s, workload, journal = _session(tmp_path, {3})  # run 3 = the trial's run
    result = s.run()
    judged = [e.data for e in journal.events(s.session_id) if e.event == "judged"][0]
    assert "cut off" not in judged["reason"], judged["reason"]
    assert judged["best"], judged  # paired runs were measured: the disturbed stop was not a verdict
    assert result.rounds[0].judged == "worse"
    assert workload.runs > 3


# ---- the race form (issue 36): total and per-query bounds for query sets ------------------------------


def _best_run(per_query: dict[str, float]) -> Measurement:
    total = sum(per_query.values())
    return Measurement(
        workload="tpch",
        objective=total,
        objective_name="total_time",
        higher_is_better=False,
        total_time_s=total,
        per_query_s=per_query,
    )


def test_race_bound_is_k_times_the_best_query_with_a_floor_and_the_total_left() -> None:
    limit = TrialLimit.race(_best_run({"q01": 4.0, "q02": 0.003, "q03": 2.0}), k=2.0)
    assert limit.best_seconds == 6.003 and limit.time_factor == 2.0
    seconds, why = limit.query_bound("q01", 0.0) or (0.0, "")
    assert seconds == 8.0 and "q01 ran past 2 × the best configuration's 4.000 s" in why
    # a 3-ms query gets the 1-s floor, not 6 ms
    assert (limit.query_bound("q02", 0.0) or (0.0, ""))[0] == QUERY_FLOOR_S
    # 11.5 s of the 12.006-s total bound used: the total left bounds q03, not 2 × 2 s
    seconds, why = limit.query_bound("q03", 11.5) or (0.0, "")
    assert seconds == pytest.approx(0.506) and "query set past 2 ×" in why
    assert (limit.query_bound("q03", 20.0) or (0.0, ""))[0] == 0.001  # never 0 (= no timeout)
    assert TrialLimit(best_objective=1.0, best_seconds=5.0).query_bound("q01", 0.0) is None  # not a race
    # the estimate of a stopped run: what ran, plus the best's time of what did not
    assert limit.estimate_total_s({"q01": 8.0}, ["q01", "q02", "q03"]) == pytest.approx(10.003)


def test_race_bound_refuses_what_cannot_bound_a_race() -> None:
    best = _best_run({"q01": 1.0})
    with pytest.raises(ValueError, match="race k=1: must be > 1"):
        TrialLimit.race(best, k=1.0)
    with pytest.raises(ValueError, match="floor_s=0: must be > 0"):
        TrialLimit.race(best, k=2.0, floor_s=0.0)
    with pytest.raises(ValueError, match="cut off"):
        TrialLimit.race(best.model_copy(update={"cut_off": "cut"}), k=2.0)
    with pytest.raises(ValueError, match="without per-query times"):
        TrialLimit.race(best.model_copy(update={"per_query_s": {}}), k=2.0)


@pytest.mark.parametrize("dbms", ["postgresql", "mariadb"])
def test_a_real_query_past_its_race_bound_is_a_cut_off_not_an_error(request: pytest.FixtureRequest, dbms: str) -> None:
    sandbox = request.getfixturevalue("pg_sandbox" if dbms == "postgresql" else "mariadb_sandbox")
    conn = connection_from_dsn(dbms, sandbox.dsn, "wl_race_bound")
    w = build_workload(WorkloadConfig(kind="tpch", scale=0.01, query_timeout_s=60), conn, progress=False)
    w.prepare()
    best = w.run(0)
    assert not best.cut_off and len(best.per_query_s) == 22
    # forced: the best's q01 "took" 10 µs and the floor is 1 ms, so q01 (lineitem scan, > 1 ms) is stopped
    # by the statement timeout; every other query keeps a generous bound
    fast = {q: (1e-5 if q == "q01" else 100.0) for q in best.per_query_s}
    w.limit = TrialLimit.race(_best_run(fast), k=2.0, floor_s=0.001)
    m = w.run(0)
    assert m.cut_off and "q01 ran past 2 × the best configuration's 0.000 s (at least 0.001 s)" in m.cut_off, m
    assert list(m.per_query_s) == ["q01"] and m.per_query_s["q01"] == 0.001
    assert m.total_time_s == pytest.approx(0.001 + sum(v for q, v in fast.items() if q != "q01"))
    assert m.objective == m.total_time_s and m.errors == 0
    # the statement timeout went back to workload.query_timeout_s for the next run without a limit
    w.limit = None
    again = w.run(0)
    assert not again.cut_off and len(again.per_query_s) == 22 and again.errors == 0
