"""The live workload's arithmetic (no server): window deltas, the baseline's top statements, the
mix-normalised index, own-statement filtering, the per-statement report and the live diagnosis signals."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from agenticdb.models import Bottleneck, Disturbance, Layer, Measurement, RuntimeProfile, StateDelta
from agenticdb.planner.diagnosis import diagnose
from agenticdb.report.live import live_report_lines, round_changes, round_windows
from agenticdb.workloads.live import baseline_of, time_index, window_delta
from agenticdb.workloads.livestats import QueryStat, StatSnapshot, is_own_statement, short_text


def snap(**queries: tuple[int, float]) -> StatSnapshot:
    return StatSnapshot({q: QueryStat(calls=c, total_ms=t, text=q) for q, (c, t) in queries.items()}, 0, 0, 0)


def test_window_delta_subtracts_and_restarts_reset_counters() -> None:
    a = snap(fast=(100, 10.0), slow=(10, 1000.0), gone=(5, 5.0))
    b = snap(fast=(150, 16.0), slow=(4, 400.0), new=(3, 3.0))  # slow was reset (calls went down)
    d = window_delta(a, b)
    assert (d["fast"].calls, d["fast"].total_ms) == (50, pytest.approx(6.0))
    assert (d["slow"].calls, d["slow"].total_ms) == (4, 400.0)  # counted from zero
    assert d["new"].calls == 3 and "gone" not in d


def test_index_ignores_a_change_of_the_mix() -> None:
    base_window = window_delta(snap(), snap(cheap=(1000, 100.0), heavy=(10, 900.0)))
    base = baseline_of(base_window, top=10, min_calls=5)
    assert base is not None
    assert base.weights == {"heavy": pytest.approx(0.9), "cheap": pytest.approx(0.1)}
    # Ten times more heavy calls, a tenth of the cheap ones, same per-call times: the index stays 1 …
    mixed = window_delta(snap(), snap(cheap=(100, 10.0), heavy=(100, 9000.0)))
    index, covered = time_index(mixed, base, min_calls=5)
    assert index == pytest.approx(1.0) and covered == pytest.approx(1.0)
    # … while the heavy statement twice as fast gives 0.9 × 0.5 + 0.1 × 1 = 0.55.
    faster = window_delta(snap(), snap(cheap=(1000, 100.0), heavy=(10, 450.0)))
    assert time_index(faster, base, min_calls=5)[0] == pytest.approx(0.55)


def test_statements_with_too_few_calls_are_left_out_and_reported_as_uncovered() -> None:
    base = baseline_of(window_delta(snap(), snap(a=(10, 90.0), b=(10, 10.0))), top=10, min_calls=5)
    assert base is not None
    index, covered = time_index(window_delta(snap(), snap(a=(2, 90.0), b=(10, 20.0))), base, min_calls=5)
    assert index == pytest.approx(2.0) and covered == pytest.approx(0.1)
    assert time_index({}, base, min_calls=5) == (None, 0.0)
    assert baseline_of(window_delta(snap(), snap(a=(2, 1.0))), top=10, min_calls=5) is None


def test_own_statements_are_recognised() -> None:
    assert is_own_statement("SELECT name, setting FROM pg_settings")
    assert is_own_statement("SELECT s.queryid FROM pg_stat_statements s")
    assert is_own_statement("ALTER SYSTEM SET work_mem = $1")
    assert is_own_statement("SHOW shared_preload_libraries")
    assert is_own_statement("SELECT * FROM performance_schema.events_statements_summary_by_digest")
    assert not is_own_statement("SELECT v FROM app_items WHERE id = $1")
    assert not is_own_statement("UPDATE app_items SET v = v + $1 WHERE id = $2")
    assert short_text("SELECT  a,\n  b FROM t", 12) == "SELECT a, b…"


def _measured(label: str, **means: float) -> dict[str, object]:
    queries = [
        {"queryid": q, "text": f"SELECT {q}", "weight": 0.5, "baseline_mean_ms": 1.0, "calls": 10, "mean_ms": ms}
        for q, ms in means.items()
    ]
    return {"label": label, "measurement": {"live_queries": queries}}


def test_round_changes_pair_windows_and_rank_the_largest_change() -> None:
    data = [
        _measured("candidate", sort=100.0, point=1.0),
        _measured("confirm best 1", sort=400.0, point=1.1),
        _measured("confirm best 2", sort=410.0, point=0.9),
        _measured("confirm candidate 2", sort=110.0, point=1.0),
        _measured("confirm candidate 3", sort=95.0, point=1.05),
        _measured("confirm best 3", sort=390.0, point=1.0),
        _measured("baseline 1", sort=1.0, point=1.0),  # not part of a pair
    ]
    changes = round_changes(1, data)
    assert [c.queryid for c in changes] == ["sort", "point"]
    sort = changes[0]
    assert sort.pairs == 3 and sort.change == pytest.approx(
        math.exp(sum(map(math.log, [0.25, 110 / 410, 95 / 390])) / 3) - 1
    )
    assert sort.low is not None and sort.high is not None and sort.low < sort.change < sort.high < 0
    events = [SimpleNamespace(event="measured", round_no=1, data=d) for d in data]
    lines = live_report_lines(events)
    assert any("`sort` SELECT sort: 400.00 ms → 100.00 ms" in ln for ln in lines), lines
    assert live_report_lines([SimpleNamespace(event="measured", round_no=1, data={"measurement": {}})]) == []


def test_round_changes_leave_out_a_screen_whose_best_window_was_the_baselines() -> None:
    # pair 1 reused the baseline's last window (journaled outside the round); pair 2 was measured again
    # after a disturbed best window: its later windows count
    data = [
        _measured("candidate", sort=100.0),
        _measured("confirm candidate 2", sort=999.0),
        _measured("confirm best 2", sort=1.0),
        _measured("confirm best 2", sort=400.0),
        _measured("confirm candidate 2", sort=110.0),
    ]
    (sort,) = round_changes(1, data)
    assert sort.pairs == 1 and sort.best_ms == 400.0 and sort.candidate_ms == 110.0


def test_live_signals_point_at_the_spill_and_discount_outside_cpu() -> None:
    delta = StateDelta(
        totals={
            "live.exec_ms": 10_000.0,
            "live.spill_exec_ms": 9_000.0,
            "host.cpu_user": 9.8,
            "host.cpu_system": 0.2,
            "host.cpu_idle": 0.0,
        },
        seconds=5.0,
    )
    d = Disturbance(
        samples=5, seconds=5.0, other_cpu_cores=1.8, other_cpu_spread=0.1, ours_cpu_cores=0.2, host_busy_cores=2.0
    )
    m = Measurement(
        workload="live", objective=1.0, objective_name="live_time_index", higher_is_better=False, disturbance=d
    )
    profile = RuntimeProfile.model_construct(hardware=SimpleNamespace(data_device=None))
    hyps = {h.bottleneck: h for h in diagnose(delta, profile, "postgresql", Layer.dbms, m)}
    assert hyps[Bottleneck.temp_spill].score == 1.0
    assert any("90% of the application's time" in e for e in hyps[Bottleneck.temp_spill].evidence)
    assert hyps[Bottleneck.cpu].score < 0.25  # the server used 10 % of the busy CPU
    # Without the live window (a benchmark run), the host CPU counts in full as before.
    bench = m.model_copy(update={"workload": "pgbench"})
    assert {h.bottleneck: h for h in diagnose(delta, profile, "postgresql", Layer.dbms, bench)}[
        Bottleneck.cpu
    ].score == 1.0


class _ScriptedReader:
    """Cumulative snapshots from per-second increments (a fake pg_stat_statements)."""

    def __init__(self, per_second: list[dict[str, tuple[int, float]]]) -> None:
        self.per_second, self.i = per_second, 0
        self.totals: dict[str, tuple[int, float]] = {}

    def check(self) -> None:
        pass

    def sessions(self) -> None:
        return None

    def snapshot(self) -> StatSnapshot:
        if self.i > 0:
            for q, (c, t) in self.per_second[self.i - 1].items():
                c0, t0 = self.totals.get(q, (0, 0.0))
                self.totals[q] = (c0 + c, t0 + t)
        self.i += 1
        return StatSnapshot({q: QueryStat(calls=c, total_ms=t, text=q) for q, (c, t) in self.totals.items()}, 0, 0, 0)


def test_window_se_is_not_taken_from_batches_without_the_heavy_statement() -> None:
    """A 4-s window whose second 2-s batch has no call of the heavy statement (90 % of the baseline
    time): that batch would be scored on the cheap statement alone, a different quantity; its spread
    would inflate the window's standard error (a 4× faster candidate was judged a tie on a loaded host:
    objective_se 2.1× the objective). The window gets no batch standard error instead."""
    from agenticdb.config.sections import LiveConfig, WorkloadConfig
    from agenticdb.workloads.live import LiveWorkload

    base_s = {"heavy": (1, 900.0), "cheap": (100, 100.0)}
    # candidate: heavy 4× faster; the cheap statement slower in the second batch (another shape's load)
    window = [{"heavy": (2, 450.0), "cheap": (100, 100.0)}] * 2 + [{"cheap": (100, 300.0)}] * 2
    clock = [0.0]
    w = LiveWorkload(
        WorkloadConfig(kind="live"),
        LiveConfig(min_calls=1, turnover_max_s=0),
        _ScriptedReader([base_s] * 4 + [{}] + window),  # {}: the second between the windows
        clock=lambda: clock[0],
        sleep=lambda s: clock.__setitem__(0, clock[0] + s),
    )
    w.prepare()
    assert w.run(4).objective == pytest.approx(1.0)
    w.guard_armed = False
    m = w.run(4)
    assert m.objective < 0.5
    assert m.objective_se is None  # not |1.75 − 0.25| / 2 from a batch that saw only the cheap statement


def test_round_windows_add_the_reused_best_window_before_the_screen() -> None:
    def ev(event: str, round_no: int | None, data: dict[str, object]) -> SimpleNamespace:
        return SimpleNamespace(event=event, round_no=round_no, data=data)

    events = [
        ev("measured", None, _measured("baseline 1", sort=390.0)),
        ev("measured", None, _measured("baseline 2", sort=400.0)),
        ev("measured", 1, _measured("candidate", sort=100.0)),
        ev("measured", 1, _measured("confirm candidate 2", sort=110.0)),
        ev("measured", 1, _measured("confirm best 2", sort=410.0)),
        ev("judged", 1, {"reused_best_run": True}),
    ]
    (sort,) = round_changes(1, round_windows(events, 1))
    assert sort.pairs == 2 and sort.best_ms == 405.0 and sort.candidate_ms == 105.0
    events[-1] = ev("judged", 1, {"reused_best_run": False})
    (sort,) = round_changes(1, round_windows(events, 1))
    assert sort.pairs == 1
    lines = live_report_lines(events[:-1] + [ev("judged", 1, {"reused_best_run": True})])
    assert any("2 pairs" in ln for ln in lines), lines
