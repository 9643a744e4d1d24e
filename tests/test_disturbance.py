"""Host disturbance: the pure summary and classifier on synthetic samples (constant background load is
not a disturbance, a change within the run or against the paired run is), our processes' CPU
accounting on real processes, and a real CPU hog started in the middle of a measured pgbench run on the
private PostgreSQL, which makes the run journaled as disturbed."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenticdb.config.loop_section import LoopConfig
from agenticdb.config.sections import WorkloadConfig
from agenticdb.loop.baseline import measure_baseline
from agenticdb.loop.executor import Executor
from agenticdb.measure.disturbance import DisturbanceThresholds, HostSample, classified, classify, summarize
from agenticdb.measure.procstats import OursCpu
from agenticdb.models import Disturbance, Measurement, StateDelta
from agenticdb.report.labels import baseline_run_text
from agenticdb.sandbox.postgres import PostgresSandboxInfo
from agenticdb.store.journal import Journal
from agenticdb.targets.postgres import PostgresTarget
from agenticdb.workloads import build_workload, connection_from_dsn

LIMITS = DisturbanceThresholds()
HOG = [sys.executable, "-c", "while True: pass"]


def _samples(other: list[float], share: list[float | None] | None = None, steal: float = 0.0) -> list[HostSample]:
    share = share or [40.0] * len(other)
    return [
        HostSample(
            t_s=i + 1.0,
            seconds=1.0,
            busy_cores=0.8 + o,
            ours_cores=0.8,
            ours_share_pct=s,
            steal_pct=steal,
            psi_some_pct=None,
        )
        for i, (o, s) in enumerate(zip(other, share, strict=True))
    ]


# --------------------------------------------------------------------------- pure: summary


def test_summary_keeps_the_scored_window_only() -> None:
    samples = _samples([1.5] * 5 + [0.2] * 10)
    whole = summarize(samples)
    window = summarize(samples, from_s=5.0)
    assert whole is not None and window is not None
    assert whole.samples == 15 and whole.other_cpu_spread == pytest.approx(1.3)
    assert window.samples == 10 and window.other_cpu_cores == pytest.approx(0.2)
    assert window.other_cpu_spread == 0.0 and window.ours_cpu_cores == pytest.approx(0.8)
    assert window.psi_cpu_some_pct is None and window.ours_share_shift == pytest.approx(1.0)
    assert summarize([]) is None


def test_summary_weights_steal_by_interval_length() -> None:
    samples = [
        HostSample(
            t_s=1.0, seconds=1.0, busy_cores=1, ours_cores=1, ours_share_pct=None, steal_pct=30.0, psi_some_pct=5
        ),
        HostSample(
            t_s=4.0, seconds=3.0, busy_cores=1, ours_cores=1, ours_share_pct=None, steal_pct=10.0, psi_some_pct=7
        ),
    ]
    d = summarize(samples)
    assert d is not None
    assert d.steal_pct == pytest.approx(15.0) and d.psi_cpu_some_pct == pytest.approx(6.0)
    assert d.ours_share_pct is None and d.ours_share_shift is None and d.ours_share_series == [None, None]


# --------------------------------------------------------------------------- pure: classifier


@given(
    st.floats(min_value=0.0, max_value=64.0),
    st.lists(st.floats(min_value=-0.2, max_value=0.2), min_size=3, max_size=40),
)
def test_constant_background_load_in_both_runs_is_not_a_disturbance(level: float, jitter: list[float]) -> None:
    run = summarize(_samples([max(level + j, 0.0) for j in jitter]))
    paired = summarize(_samples([level] * 10))
    assert run is not None and paired is not None
    disturbed, reason = classify(run, paired, LIMITS)
    assert not disturbed, reason
    assert reason.startswith("outside CPU load steady")


def test_other_cpu_change_within_the_run_is_a_disturbance() -> None:
    d = summarize(_samples([0.1] * 6 + [1.1] * 6))
    assert d is not None
    disturbed, reason = classify(d, None, LIMITS)
    assert disturbed
    assert "outside CPU load changed within the run" in reason
    assert "other-CPU went between 0.10 and 1.10 cores" in reason and "loop.disturbance_cpu_cores=0.5" in reason


def test_cpu_share_drop_on_a_saturated_host_is_a_disturbance() -> None:
    # other-CPU can hardly grow (the host is full), but our share of the CPU halves after second 6
    d = summarize(_samples([1.6] * 6 + [1.8] * 6, share=[16.0] * 6 + [6.0] * 6))
    assert d is not None and d.ours_share_shift == pytest.approx(16 / 6, rel=1e-3)
    disturbed, reason = classify(d, None, LIMITS)
    assert disturbed
    assert "CPU share fell from 16 % to 6 %" in reason and "after 6 of 12 s" in reason
    assert "other-CPU went from 1.60 to 1.80 cores" in reason
    assert classified(d, None, LIMITS).disturbed


def test_steal_and_a_different_paired_run_are_disturbances() -> None:
    steady = summarize(_samples([0.3] * 10))
    stolen = summarize(_samples([0.3] * 10, steal=25.0))
    busier = summarize(_samples([1.5] * 10))
    assert steady is not None and stolen is not None and busier is not None
    disturbed, reason = classify(stolen, None, LIMITS)
    assert disturbed and "steal time 25.0 %" in reason
    disturbed, reason = classify(busier, steady, LIMITS)
    assert disturbed and "differs from the paired run: other-CPU 1.50 vs 0.30 cores" in reason
    # on its own, the busier run is steady: only the comparison makes it disturbed
    assert not classify(busier, None, LIMITS)[0]


def test_thresholds_come_from_the_loop_config() -> None:
    cfg = LoopConfig(disturbance_cpu_cores=2.0, disturbance_share_ratio=3.0, disturbance_steal_pct=50)
    limits = DisturbanceThresholds.from_config(cfg)
    assert (limits.cpu_cores, limits.share_ratio, limits.steal_pct) == (2.0, 3.0, 50)
    d = summarize(_samples([0.1] * 6 + [1.1] * 6))
    assert d is not None and not classify(d, None, limits)[0]
    d = Disturbance(samples=0, seconds=0, other_cpu_cores=0, other_cpu_spread=0)
    assert not classify(d, None, LIMITS)[0]


# --------------------------------------------------------------------------- our processes, real


@pytest.fixture()
def hog() -> Iterator[subprocess.Popen[bytes]]:
    """A busy-loop process of its own session: a child of this test process, never one of ours."""
    proc = subprocess.Popen(HOG, start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_ours_counts_a_root_tree_and_not_other_children(hog: subprocess.Popen[bytes]) -> None:
    # a root whose children are short busy loops that it reaps: their CPU must neither vanish nor double
    script = "for i in 1 2 3 4; do timeout 0.3 sh -c 'while :; do :; done'; done; sleep 30"
    root = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    try:
        ours, own_only = OursCpu(), OursCpu()
        ours.add_root(root.pid)
        proc, hog_proc = psutil.Process(root.pid), psutil.Process(hog.pid)
        first = ours.read()
        own_only.read()
        assert (first.cpu_s, first.run_s, first.wait_s) == (0.0, 0.0, 0.0)
        t0, h0 = proc.cpu_times(), hog_proc.cpu_times()
        used = own_used = 0.0
        for _ in range(8):
            time.sleep(0.25)
            used += ours.read().cpu_s
            own_used += own_only.read().cpu_s
        t1, h1 = proc.cpu_times(), hog_proc.cpu_times()
    finally:
        os.killpg(root.pid, signal.SIGKILL)  # the root's session: its `sleep 30` too, not just the shell
        root.wait()
    root_total = sum(t1[:4]) - sum(t0[:4])  # user, system, children_user, children_system
    hog_used = sum(h1[:2]) - sum(h0[:2])
    # What the root's tree used, reaped children included, is what ours counted (give or take a clock
    # tick per process and a child still running at the last read).
    assert used == pytest.approx(root_total, abs=0.15)
    # The hog, a child of this process but not a root, is not ours: this process alone used far less.
    assert hog_used > 0.05 and own_used < hog_used / 2


# --------------------------------------------------------------------------- a real hog mid-run


def _hog_size() -> int:
    """Busy loops enough to about double the host's runnable tasks (at least one per CPU), so the hog
    at least halves our CPU share however busy the host is: on a saturated host it can only take CPU
    from the tasks already there. Capped to stay a short nuisance for whatever else runs here."""
    running = []
    for _ in range(10):
        with open("/proc/stat") as f:
            running += [int(line.split()[1]) for line in f if line.startswith("procs_running")]
        time.sleep(0.05)
    return min(max(os.cpu_count() or 1, math.ceil(sum(running) / len(running))), 16)


def test_cpu_hog_mid_run_makes_the_measured_run_disturbed(pg_sandbox: PostgresSandboxInfo, tmp_path: Path) -> None:
    target = PostgresTarget(pg_sandbox.dsn, None, data_dir=pg_sandbox.data_dir)
    cfg = WorkloadConfig(kind="pgbench", scale=1, clients=4, threads=2)
    workload = build_workload(cfg, connection_from_dsn("postgresql", pg_sandbox.dsn, "wl_disturb"), progress=False)
    workload.prepare()
    journal = Journal(tmp_path / "journal.db")
    executor = Executor(
        target, [target.runtime_state], workload, journal, "hog", warmup_s=0, duration_s=9, warmup_max_s=5
    )
    hogs: list[subprocess.Popen[bytes]] = []

    def start_hogs() -> None:  # 9 s into the 14-s run: after the longest transient MSER may cut
        time.sleep(9)
        hogs.extend(subprocess.Popen(HOG, start_new_session=True) for _ in range(_hog_size()))

    timer = threading.Thread(target=start_hogs, daemon=True)
    timer.start()
    try:
        measurement, _ = executor.measure(1, "candidate")
    finally:
        timer.join()
        for h in hogs:
            h.kill()
            h.wait()
    assert len(measurement.series) == 14 and measurement.steady_start_s in (0.0, 5.0)
    d = measurement.disturbance
    assert d is not None and d.samples >= 8  # the samples of the scored window
    assert d.ours_cpu_cores > 0  # the server tree and pgbench were found and counted as ours
    assert d.disturbed, (len(hogs), d.reason, d.other_cpu_series, d.ours_share_series)
    assert "outside CPU load changed within the run" in d.reason and "other-CPU" in d.reason
    measured = [e for e in journal.events("hog") if e.event == "measured"]
    assert measured[-1].data["measurement"]["disturbance"]["disturbed"] is True
    assert measured[-1].data["measurement"]["disturbance"]["reason"] == d.reason


# --------------------------------------------------------------------------- the baseline's share of the budget


class _Runs:
    """Stands in for ``Executor.measure``: each run takes ``seconds`` of a fake clock; the runs numbered in
    ``disturbed`` (1-based, repeats included) are flagged as disturbed."""

    def __init__(self, disturbed: set[int], seconds: float = 60.0) -> None:
        self.now = 0.0
        self.count = 0
        self.disturbed = disturbed
        self.seconds = seconds

    def measure(self, round_no: int, label: str) -> tuple[Measurement, StateDelta]:
        self.count += 1
        self.now += self.seconds
        flagged = self.count in self.disturbed
        d = (
            Disturbance(
                samples=30, seconds=30, other_cpu_cores=0.1, other_cpu_spread=0.0, steal_pct=20.0, disturbed=True
            )
            if flagged
            else None
        )
        m = Measurement(workload="w", tps=100.0 + self.count, objective=100.0 + self.count, disturbance=d)
        return m, StateDelta()


@pytest.mark.parametrize(
    ("budget_s", "runs", "kept_disturbed"),
    [
        # 8 min, 1-min runs: 144 s is 30 %; run 3 ends at 180 s, past it, so it is kept and no run repeats
        (480.0, 3, [True]),
        # 1 h: runs 3-6 are repeated (4 repeats, within 1080 s), run 7 is kept as the third baseline run
        (3600.0, 7, [False, False, False, False, True]),
    ],
)
def test_the_baseline_stops_repeating_disturbed_runs_after_its_share_of_the_budget(
    budget_s: float, runs: int, kept_disturbed: list[bool]
) -> None:
    fake = _Runs(disturbed=set(range(3, 40)))
    told: list[tuple[str, str]] = []
    loop = LoopConfig(time_budget_s=budget_s, opening=False)  # baseline_runs 3, baseline_budget_share 0.3
    kept, _, _ = measure_baseline(
        cast(Executor, fake), loop, lambda label, m, k: told.append((label, k)), clock=lambda: fake.now
    )
    assert fake.count == runs and len(kept) == loop.baseline_runs
    assert [bool(k) for _, k in told] == kept_disturbed
    # a repeat says so, and a kept run says which of the reasons to keep it applied (only that one)
    assert [label for label, _ in told] == ["baseline 3"] + [f"baseline 3, repeat {i}" for i in range(1, len(told))]
    why, other = ("max_disturbed_repeats=4", "share") if budget_s == 3600.0 else ("baseline_budget_share", "repeat")
    assert why in told[-1][1] and other not in told[-1][1] and " or " not in told[-1][1], told
    assert [m.disturbance is not None for m in kept] == [False, False, True]


def test_extra_baseline_runs_for_a_high_cv_stop_after_the_share() -> None:
    fake = _Runs(disturbed=set(), seconds=60.0)
    fake.measure = _noisy(fake)  # type: ignore[method-assign]
    kept, _, cv = measure_baseline(
        cast(Executor, fake), LoopConfig(time_budget_s=480.0, opening=False), clock=lambda: fake.now
    )
    assert len(kept) == 3 and cv > 0.15  # 180 s > 144 s: no fourth run although the CV is high
    fake2 = _Runs(disturbed=set(), seconds=60.0)
    fake2.measure = _noisy(fake2)  # type: ignore[method-assign]
    kept2, _, _ = measure_baseline(
        cast(Executor, fake2), LoopConfig(time_budget_s=3600.0, opening=False), clock=lambda: fake2.now
    )
    assert len(kept2) == 5  # baseline_max_runs within 1080 s


def _noisy(fake: _Runs) -> Callable[[int, str], tuple[Measurement, StateDelta]]:
    def measure(round_no: int, label: str) -> tuple[Measurement, StateDelta]:
        fake.count += 1
        fake.now += fake.seconds
        value = 100.0 if fake.count % 2 else 200.0  # CV far above 15 %
        return Measurement(workload="w", objective=value), StateDelta()

    return measure


@pytest.mark.parametrize(("run_s", "runs"), [(90.0, 2), (80.0, 2), (60.0, 3)])
def test_the_baseline_leaves_room_for_one_decision(run_s: float, runs: int) -> None:
    # 8-min budget: with 90-s runs (TPC-H SF 0.3 in the harness) a third run would leave 210 s for the
    # smallest decision, 2 pairs less the baseline's last run = 3 runs = 270 s, so the baseline stops at 2;
    # with 80-s runs (pg-tpch, 2026-12-07 09:56) it would leave exactly the decision's 240 s if the third run
    # took no longer than the mean: it took 92 s, so the next run is priced 15 % over the mean (RUN_SPREAD);
    # with 60-s runs the third leaves 291 s >= 207 s.
    fake = _Runs(disturbed=set(), seconds=run_s)
    loop = LoopConfig(time_budget_s=480.0, opening=False)
    kept, _, _ = measure_baseline(
        cast(Executor, fake), loop, clock=lambda: fake.now, budget_left=lambda: 480.0 - fake.now
    )
    assert len(kept) == runs == fake.count


@pytest.mark.parametrize(("run_s", "repeated"), [(120.0, False), (40.0, True)])
def test_a_disturbed_run_is_kept_when_its_repeat_would_leave_no_room_for_a_decision(
    run_s: float, repeated: bool
) -> None:
    # 8-min budget, the first run disturbed. 120-s runs (TPC-H SF 1 on a slow hour here): discarding it
    # needs 2 more runs, leaving 480 - 120 - 240 = 120 s < the smallest decision's 3 runs = 360 s, so it
    # is kept and the baseline is 2 runs. 40-s runs: 480 - 40 - 80 = 360 s >= 120 s: measured again.
    fake = _Runs(disturbed={1}, seconds=run_s)
    told: list[str] = []
    loop = LoopConfig(time_budget_s=480.0, opening=False)
    kept, _, _ = measure_baseline(
        cast(Executor, fake),
        loop,
        lambda label, m, k: told.append(k),
        clock=lambda: fake.now,
        budget_left=lambda: 480.0 - fake.now,
    )
    assert [bool(k) for k in told] == [not repeated]
    assert not repeated or told[0] == ""
    assert repeated or told[0].startswith("a repeat would leave the time budget no room for one decision (360s left")
    assert (kept[0].disturbance is not None) is not repeated
    assert fake.count == len(kept) + (1 if repeated else 0)
    assert len(kept) == (2 if not repeated else loop.baseline_runs)


@pytest.mark.parametrize(("budget_s", "run_s", "runs"), [(240.0, 57.0, 1), (240.0, 40.0, 2), (240.0, 80.0, 2)])
def test_a_short_budget_takes_one_baseline_run_when_only_that_leaves_a_decision(
    budget_s: float, run_s: float, runs: int
) -> None:
    # pg-pgbench-badstart at 4 min (2026-12-07 16:19): 57-s runs, 2 baseline runs left 125 s for a 3-run decision
    # and the session judged nothing; 1 run leaves 183 s >= 171 s. 40-s runs: a second still leaves 160 s >= 120 s.
    # 80-s runs: even 1 run leaves 160 s < 240 s, so the second is measured (a noise estimate for the journal).
    fake = _Runs(disturbed=set(), seconds=run_s)
    loop = LoopConfig(time_budget_s=budget_s)
    kept, _, cv = measure_baseline(
        cast(Executor, fake), loop, clock=lambda: fake.now, budget_left=lambda: budget_s - fake.now
    )
    assert len(kept) == runs == fake.count
    assert runs > 1 or cv == 0.10  # one run: the spread is unknown, the conservative prior stands (noise_cv)


def test_every_baseline_run_is_told_as_it_ends_with_what_became_of_a_disturbed_one() -> None:
    """A piped `tune` printed nothing between its header and round 1 for the 8 minutes of a busy host's baseline:
    each run is told as it ends (``on_run``, tune's line ``baseline_run_text``), a disturbed one with its fate."""
    fake = _Runs(disturbed={1, 4}, seconds=40.0)
    lines: list[str] = []
    loop = LoopConfig(time_budget_s=480.0, opening=False, max_disturbed_repeats=1)
    kept, _, _ = measure_baseline(
        cast(Executor, fake),
        loop,
        clock=lambda: fake.now,
        budget_left=lambda: 480.0 - fake.now,
        on_run=lambda *run: lines.append(baseline_run_text(*run)),
    )
    assert len(lines) == fake.count == 4 and len(kept) == 3, lines
    assert lines[0] == "baseline 1: 101.000 TPS/p95 (disturbed: the host's other load; measured again)", lines
    assert lines[1:3] == ["baseline 1, repeat 1: 102.000 TPS/p95", "baseline 2: 103.000 TPS/p95"], lines
    assert lines[3].startswith("baseline 3: 104.000 TPS/p95 (disturbed: the host's other load; used all the same: "), (
        lines
    )
    assert "max_disturbed_repeats=1" in lines[3], lines
