"""Per-second series of the workload tools without a server: sysbench interval reports, pgbench
per-transaction logs, the command workload's ``series`` field, and scoring on the steady window."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agenticdb.config.sections import WorkloadConfig
from agenticdb.models import SeriesPoint
from agenticdb.workloads import WorkloadError, build_workload, connection_from_dsn
from agenticdb.workloads.pgbench import read_logs
from agenticdb.workloads.steady import WindowStats, score_steady, stats_from_points
from agenticdb.workloads.sysbench import SysbenchWorkload, interval_points

PG = connection_from_dsn("postgresql", "postgresql://postgres@127.0.0.1:5432/postgres", "bench")

# sysbench 1.0.20 output of a 3-s run: the third interval report did not come out before the end.
SYSBENCH_OUT = """Threads started!

[ 1s ] thds: 2 tps: 505.80 qps: 10125.96 (r/w/o: 7090.17/2023.20/1012.60) lat (ms,95%): 10.09 err/s: 0.00 reconn/s: 0.00
[ 2s ] thds: 2 tps: 728.19 qps: 14593.72 (r/w/o: 10220.60/2914.74/1458.37) lat (ms,95%): 7.84 err/s: 1.00 reconn/s: 0.00
Latency histogram (values are in milliseconds)
       value  ------------- distribution ------------- count
       2.000 |****************************************  1700
       8.000 |****                                      150
      20.000 |*                                         40
SQL statistics:
    transactions:                        1890   (628.26 per sec.)
    queries:                             37817  (12570.80 per sec.)
    ignored errors:                      1      (0.33 per sec.)
    reconnects:                          0      (0.00 per sec.)

General statistics:
    total time:                          3.0069s
    total number of events:              1890

Latency (ms):
         min:                                    0.78
         avg:                                    3.17
         max:                                   21.82
         95th percentile:                        8.58
         sum:                                 6000.64
"""


def test_sysbench_interval_points_fill_the_missing_last_second() -> None:
    points = interval_points(SYSBENCH_OUT, 3, 1890, 3.0069)
    assert [p.t_s for p in points] == [0.0, 1.0, 2.0]
    assert (points[0].tps, points[0].latency_p95_ms, points[0].errors) == (505.80, 10.09, 0)
    assert (points[1].tps, points[1].latency_p95_ms, points[1].errors) == (728.19, 7.84, 1)
    # the unreported last second: the remaining transactions over the remaining time, no latency
    assert points[2].latency_p95_ms is None
    assert points[2].tps == pytest.approx((1890 - 505.80 - 728.19) / 1.0069)
    assert sum(p.tps for p in points[:2]) + points[2].tps * 1.0069 == pytest.approx(1890)


def test_sysbench_parse_scores_the_window_and_keeps_whole_run_counts() -> None:
    w = SysbenchWorkload(WorkloadConfig(kind="sysbench-oltp-read-write", scale=100), PG, "oltp_read_write")
    m = w._parse(SYSBENCH_OUT, 3)
    assert len(m.series) == 3 and (m.steady_start_s, m.steady_s) == (0.0, 3.0)
    assert m.tps == pytest.approx(sum(p.tps for p in m.series) / 3)
    # p95 over the window: TPS-weighted mean of the interval p95s (the filled second has none)
    assert m.latency_p95_ms == pytest.approx((505.80 * 10.09 + 728.19 * 7.84) / (505.80 + 728.19))
    assert m.latency_p99_ms == 20.0  # whole run, from the histogram
    assert m.objective == pytest.approx(m.tps / m.latency_p95_ms)
    assert (m.transactions, m.errors, m.duration_s) == (1890, 1, 3.0069)


def test_sysbench_p99_objective_reads_p99_per_interval() -> None:
    out = SYSBENCH_OUT.replace("lat (ms,95%)", "lat (ms,99%)").replace("95th percentile", "99th percentile")
    w = SysbenchWorkload(
        WorkloadConfig(kind="sysbench-oltp-read-write", scale=100, objective="p99"), PG, "oltp_read_write"
    )
    assert w._percentile() == 99
    m = w._parse(out, 3)
    assert m.series[0].latency_p99_ms == 10.09 and m.series[0].latency_p95_ms is None
    assert m.objective_name == "p99" and not m.higher_is_better
    assert m.objective == m.latency_p99_ms
    assert m.latency_p95_ms == 8.0  # whole run, from the histogram


def test_pgbench_log_lines(tmp_path: Path) -> None:
    log = tmp_path / "pgbench_log.123"
    log.write_text(
        "0 1 186161 0 1796084716 868586\n"
        "0 2 2928 0 1796084716 871523\n"
        "1 1 failed 0 1796084717 100000\n"
        "1 2 skipped 0 1796084717 200000 5000\n"
        "1 3 1179 0 1796084717 689002 0 1\n"
        "garbage\n"
    )
    events = read_logs([str(log)])
    assert events == [
        (pytest.approx(1796084716.868586), 186.161),
        (pytest.approx(1796084716.871523), 2.928),
        (pytest.approx(1796084717.1), None),
        (pytest.approx(1796084717.689002), 1.179),
    ]


def _points(tps: list[float], p95: float = 10.0) -> list[SeriesPoint]:
    return [SeriesPoint(t_s=float(i), tps=v, latency_p95_ms=p95) for i, v in enumerate(tps)]


def test_score_steady_drops_a_ramp_and_estimates_the_error() -> None:
    ramp = [100.0, 300.0, 500.0, 700.0, 900.0]
    flat = [1000.0 + (17 * i % 7) * 10 for i in range(25)]
    points = _points(ramp + flat)
    steady = score_steady(points, 10, "tps", lambda a, b: stats_from_points(points, a, b))
    assert steady.start == 5 and steady.length == 25
    assert steady.objective == pytest.approx(sum(flat) / 25)
    assert steady.objective_se is not None and steady.objective_se > 0
    assert steady.series_cv is not None and 0 < steady.series_cv < 0.1
    whole = score_steady(points, 0, "tps", lambda a, b: stats_from_points(points, a, b))
    assert whole.start == 0 and whole.objective < steady.objective


def test_score_steady_without_latency_has_no_error_estimate_or_fails() -> None:
    points = [SeriesPoint(t_s=float(i), tps=100.0) for i in range(9)]
    with pytest.raises(WorkloadError, match="positive p95"):
        score_steady(points, 0, "tps_per_p95", lambda a, b: stats_from_points(points, a, b))

    def partly(a: int, b: int) -> WindowStats:  # only the whole window has a p95
        return WindowStats(tps=100.0, p95_ms=5.0 if (a, b) == (0, 9) else None, p99_ms=None)

    steady = score_steady(points, 0, "tps_per_p95", partly)
    assert steady.objective == 20.0 and steady.objective_se is None


def test_command_series_is_scored_on_its_steady_window() -> None:
    series = [{"t_s": i, "tps": 100.0 * (i + 1) if i < 5 else 600.0 + (i * i) % 7, "p95_ms": 5.0} for i in range(20)]
    line = json.dumps({"agenticdb": 1, "tps": 500, "p95_ms": 6, "p99_ms": 9, "series": series})
    script = f"echo warmup=$AGENTICDB_WARMUP_MAX_S duration=$AGENTICDB_DURATION_S; echo '{line}'"
    w = build_workload(WorkloadConfig(kind="command", command=script), PG, progress=False)
    pids: list[int] = []
    m = w.run(15, warmup_max_s=5, on_tool_start=pids.append)
    assert len(pids) == 1 and pids[0] > 0
    assert "warmup=5 duration=20" in m.raw_tail
    assert len(m.series) == 20 and m.steady_start_s == 5.0 and m.steady_s == 15.0
    assert m.tps == pytest.approx(sum(600.0 + (i * i) % 7 for i in range(5, 20)) / 15)
    assert m.latency_p95_ms == 5.0 and m.latency_p99_ms == 9  # p99 not in the series: whole-run value
    assert m.objective == pytest.approx(m.tps / 5.0)
    assert m.objective_se is not None and m.objective_se > 0

    bad = json.dumps({"agenticdb": 1, "tps": 5, "p95_ms": 1, "series": [{"t_s": 1, "tps": 1}, {"t_s": 0, "tps": 1}]})
    w = build_workload(WorkloadConfig(kind="command", command=f"echo '{bad}'"), PG, progress=False)
    with pytest.raises(WorkloadError, match="t_s must increase"):
        w.run(1)
