"""Workload plumbing without a server: DSN parsing, the factory, objective rules, percentiles, the
sysbench report parser and the command result format."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agenticdb.config.sections import WorkloadConfig
from agenticdb.resources import data_dir
from agenticdb.workloads import WorkloadError, build_workload, connection_from_dsn
from agenticdb.workloads.command import parse_result
from agenticdb.workloads.common import objective, percentile, progress_enabled
from agenticdb.workloads.sysbench import SysbenchWorkload, histogram_percentile

PG = connection_from_dsn("postgresql", "postgresql://postgres@127.0.0.1:5432/postgres", "bench")
MY = connection_from_dsn("mariadb", "mysql://root@127.0.0.1:3306/", "bench")


def test_connection_from_dsn_postgres_uri_and_keywords() -> None:
    c = connection_from_dsn("postgresql", "postgresql://alice:s3cret@db.example:6543/app?sslmode=require", "b")
    assert (c.kind, c.host, c.port, c.user, c.password, c.database) == (
        "postgresql",
        "db.example",
        6543,
        "alice",
        "s3cret",
        "b",
    )
    assert c.socket is None and c.extra == {"sslmode": "require"}
    assert c.admin_dsn.startswith("postgresql://alice")
    k = connection_from_dsn("postgresql", "host=/var/run/postgresql port=5433 user=postgres", "b")
    assert (k.socket, k.port) == ("/var/run/postgresql", 5433)


def test_connection_from_dsn_mysql_socket_and_quoting() -> None:
    c = connection_from_dsn("mysql", "mysql://bob:p%40ss@10.0.0.5:3307/x?unix_socket=/run/m.sock", "b")
    assert (c.kind, c.host, c.port, c.user, c.password, c.socket) == (
        "mysql",
        "10.0.0.5",
        3307,
        "bob",
        "p@ss",
        "/run/m.sock",
    )
    assert connection_from_dsn("mariadb", "mysql://root@localhost/", "b").port == 3306


@pytest.mark.parametrize(
    ("kind", "dsn", "message"),
    [
        ("oracle", "x", "target.kind='oracle'"),
        ("mariadb", "postgresql://h/", "expected mysql://"),
        ("mysql", "mysql://h:notaport/", "port is not a number"),
    ],
)
def test_connection_from_dsn_rejects(kind: str, dsn: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        connection_from_dsn(kind, dsn, "b")


def test_factory_builds_every_load_generating_kind() -> None:
    expected = {
        "pgbench": ("pgbench-tpcb", "oltp", "uniform", 0.2),
        "sysbench-oltp-read-only": ("sysbench-oltp-read-only", "oltp", "uniform", 1.0),
        "sysbench-oltp-write-only": ("sysbench-oltp-write-only", "oltp", "uniform", 0.0),
        "sysbench-oltp-read-write": ("sysbench-oltp-read-write", "oltp", "uniform", 0.778),
        "ycsb-a": ("ycsb-a", "oltp", "zipfian", 0.5),
        "ycsb-b": ("ycsb-b", "oltp", "zipfian", 0.95),
        "ycsb-c": ("ycsb-c", "oltp", "zipfian", 1.0),
        "ycsb-d": ("ycsb-d", "oltp", "latest", 0.95),
        "ycsb-e": ("ycsb-e", "oltp", "zipfian", 0.95),
        "ycsb-f": ("ycsb-f", "oltp", "zipfian", 0.5),
        "command": ("command", "oltp", "unknown", 0.5),
    }
    for kind, (bench, cls, pattern, rf) in expected.items():
        w = build_workload(WorkloadConfig(kind=kind, scale=100, clients=3, command="true"), PG, progress=False)
        t = w.traits()
        assert (t.benchmark, t.workload_class, t.access_pattern, t.read_fraction) == (bench, cls, pattern, rf)
        assert (t.concurrency, t.scale, t.objective) == (3, 100.0, "tps_per_p95")
    tpch = build_workload(WorkloadConfig(kind="tpch", scale=0.1), MY, progress=False).traits()
    assert (tpch.workload_class, tpch.objective, tpch.scale, tpch.read_fraction) == (
        "olap",
        "total_time",
        0.1,
        1.0,
    )
    over = build_workload(WorkloadConfig(kind="ycsb-a", scale=10, objective="p95"), MY, progress=False)
    assert over.traits().objective == "p95"


def test_factory_rejects_bad_settings() -> None:
    with pytest.raises(ValidationError, match="kind"):
        WorkloadConfig(kind="observe")  # type: ignore[arg-type]  # not a load generator: not a workload kind
    with pytest.raises(WorkloadError, match="workload.command"):
        build_workload(WorkloadConfig(kind="command"), PG)
    with pytest.raises(WorkloadError, match=r"workload.scale=0.5"):
        build_workload(WorkloadConfig(kind="ycsb-c", scale=0.5), PG)
    with pytest.raises(WorkloadError, match=r"workload.tables=0"):
        build_workload(WorkloadConfig(kind="sysbench-oltp-read-only", tables=0), PG)
    with pytest.raises(WorkloadError, match=r"workload.scale=0"):
        build_workload(WorkloadConfig(kind="tpch", scale=0), PG)


def test_objective_rules() -> None:
    assert objective("tps_per_p95", tps=1000, p95_ms=4) == (250.0, True)
    assert objective("tps", tps=1000, p95_ms=4) == (1000, True)
    assert objective("p95", tps=1000, p95_ms=4) == (4, False)
    assert objective("p99", tps=1000, p95_ms=4, p99_ms=9) == (9, False)
    with pytest.raises(WorkloadError, match="p99"):
        objective("p99", tps=1000, p95_ms=4)
    assert objective("total_time", total_time_s=12.5) == (12.5, False)
    with pytest.raises(WorkloadError, match="positive p95"):
        objective("tps_per_p95", tps=10, p95_ms=0)
    with pytest.raises(WorkloadError, match="total time"):
        objective("total_time", tps=10)


@given(st.lists(st.floats(min_value=0, max_value=1e6), min_size=1, max_size=200))
def test_percentile_is_a_sample_value_and_monotonic(values: list[float]) -> None:
    p50, p95, p99 = (percentile(values, p) for p in (50, 95, 99))
    assert p50 <= p95 <= p99 <= max(values)
    assert p95 in values


def test_percentile_nearest_rank() -> None:
    assert percentile(list(range(1, 101)), 95) == 95
    assert percentile([5.0], 99) == 5.0
    with pytest.raises(ValueError):
        percentile([], 95)


SYSBENCH_HIST = """Latency histogram (values are in milliseconds)
       value  ------------- distribution ------------- count
       0.100 |****************************************  90
       0.500 |**                                        5
       2.000 |*                                         4
      50.000 |                                          1
"""


def test_histogram_percentile() -> None:
    assert histogram_percentile(SYSBENCH_HIST, 90) == 0.1
    assert histogram_percentile(SYSBENCH_HIST, 95) == 0.5
    assert histogram_percentile(SYSBENCH_HIST, 99) == 2.0
    assert histogram_percentile(SYSBENCH_HIST, 100) == 50.0
    assert histogram_percentile("no histogram here", 99) is None


def test_sysbench_report_without_numbers_is_a_failure() -> None:
    w = SysbenchWorkload(WorkloadConfig(kind="sysbench-oltp-read-only", scale=100), PG, "oltp_read_only")
    with pytest.raises(WorkloadError, match="no report") as exc:
        w._parse("FATAL: something went wrong", 2)
    assert "FATAL" in exc.value.output


def test_command_result_last_line_wins_and_validation() -> None:
    out = 'noise\n{"agenticdb": 1, "tps": 1}\n{"not": "ours"}\n{"agenticdb": 1, "tps": 2, "p95_ms": 3}\ntail'
    r = parse_result(out)
    assert (r.tps, r.p95_ms) == (2, 3)
    with pytest.raises(WorkloadError, match="format 1"):
        parse_result('{"agenticdb": 2, "tps": 1}')
    with pytest.raises(WorkloadError, match="invalid"):
        parse_result('{"agenticdb": 1, "tps": -5}')
    with pytest.raises(WorkloadError, match="no result line"):
        parse_result("")


def test_progress_auto_off_without_tty() -> None:
    assert progress_enabled(False) is False
    assert progress_enabled(True) is True
    assert progress_enabled(None) is False  # pytest captures stdout: not a terminal


def test_shipped_query_files_cover_22_queries_per_dialect() -> None:
    base: Path = data_dir("benchmarks") / "tpch"
    for dialect in ("postgresql", "mysql"):
        files = sorted(p.name for p in (base / dialect).glob("q*.sql"))
        assert files == [f"q{n:02d}.sql" for n in range(1, 23)], dialect
    assert "AS c_orders (" not in (base / "mysql" / "q13.sql").read_text()
    assert (data_dir("benchmarks") / "ycsb.lua").read_text().count("MIXES") >= 2
