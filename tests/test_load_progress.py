"""A data load's plain progress when no bar can be drawn (issue 20: a piped or systemd run must not go
silent for the minutes a large load takes): one ``workload.load_progress`` line per 10 % of a known
total, at most one per 30 s otherwise; nothing extra when the bar is shown or for a measured run.

The milestone logic is checked with a scripted clock; one real TPC-H load into a private PostgreSQL
sandbox runs in a child process whose stdout is a pipe and whose logging is the CLI's default (quiet:
warnings only), as in ``agenticdb tune --workload tpch | cat``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import structlog

from agenticdb.sandbox.postgres import PostgresSandboxInfo
from agenticdb.workloads.common import LoadProgressLog, progress_bar, run_tool


class _Clock:
    """A clock the test moves by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _lines(logs: list[dict[str, object]]) -> list[dict[str, object]]:
    return [e for e in logs if e["event"] == "workload.load_progress"]


def test_a_known_total_logs_once_per_ten_percent_passed() -> None:
    clock = _Clock()
    with structlog.testing.capture_logs() as logs:
        update = LoadProgressLog("TPC-H load", 1000, "bytes", clock=clock)
        for done, text in [(0, "TPC-H load region"), (50, None), (99, None), (100, None), (101, None)]:
            clock.now += 1
            update(done, text)
        clock.now += 1
        update(250, "TPC-H load lineitem")  # 10 % → 25 %: one line, not one per step passed
        for done in (260, 999, 1000, 1000):
            clock.now += 1
            update(done)
    lines = _lines(logs)
    assert [e["percent"] for e in lines] == [10.0, 25.0, 99.9, 100.0]
    assert [e["bytes"] for e in lines] == [100, 250, 999, 1000]
    assert {e["total_bytes"] for e in lines} == {1000}
    assert [e["what"] for e in lines] == ["TPC-H load region"] + ["TPC-H load lineitem"] * 3
    assert [e["elapsed_s"] for e in lines] == [4.0, 6.0, 8.0, 9.0]


def test_percent_done_from_the_tool_names_no_bytes() -> None:
    with structlog.testing.capture_logs() as logs:
        update = LoadProgressLog("pgbench -i -s 10", 100.0, "percent", clock=_Clock())
        for pct in (5.0, 20.0, 40.0, 40.0, 100.0):
            update(pct)
    lines = _lines(logs)
    assert [e["percent"] for e in lines] == [20.0, 40.0, 100.0]
    assert all("bytes" not in e for e in lines)


def test_an_estimated_time_or_no_total_logs_at_most_every_30_s() -> None:
    clock = _Clock()
    with structlog.testing.capture_logs() as logs:
        estimated = LoadProgressLog("sysbench-oltp-read-only: loading", 120.0, "seconds", clock=clock)
        unknown = LoadProgressLog("tpchgen SF 10", None, "seconds", clock=clock)
        for second in range(1, 100):
            clock.now += 1
            estimated(min(second, 120))
            unknown(second)
    lines = _lines(logs)
    timed = [e for e in lines if e["what"] == "sysbench-oltp-read-only: loading"]
    assert [e["elapsed_s"] for e in timed] == [30.0, 60.0, 90.0]
    # time against an estimate is no measure of the rows loaded: no percent, the estimate instead
    assert all("percent" not in e and e["estimate_s"] == 120 for e in timed)
    untimed = [e for e in lines if e["what"] == "tpchgen SF 10"]
    assert [e["elapsed_s"] for e in untimed] == [30.0, 60.0, 90.0]
    assert all("estimate_s" not in e and "percent" not in e for e in untimed)


def test_nothing_extra_with_the_bar_shown_or_for_a_measured_run() -> None:
    with structlog.testing.capture_logs() as logs:
        with progress_bar(True, "TPC-H load", 10, load_unit="bytes") as update:  # a terminal: the bar
            for done in range(11):
                update(done)
        with progress_bar(False, "pgbench 15s", 10) as update:  # a measured run, piped
            for done in range(11):
                update(done)
        # a tool run that is a load, with its bar off: its percent lines are read and logged
        script = "import time\nfor n in (25, 50, 100):\n    print(f'{n} of 100 tuples', flush=True); time.sleep(0.6)"
        run_tool(
            [sys.executable, "-c", script],
            timeout_s=30,
            description="fake load",
            progress_of=lambda out: float(m[-1]) if (m := re.findall(r"(\d+) of 100", out)) else None,
            load=True,
        )
    lines = _lines(logs)
    assert [e["what"] for e in lines] and {e["what"] for e in lines} == {"fake load"}
    assert [e["percent"] for e in lines] == sorted(e["percent"] for e in lines)
    assert lines[0]["percent"] == 25.0


_CHILD = textwrap.dedent(
    """
    import sys
    from agenticdb.config.sections import WorkloadConfig
    from agenticdb.logs import configure_logging
    from agenticdb.workloads import build_workload, connection_from_dsn

    configure_logging()  # the CLI's default without --verbose: warnings only, plus load progress
    conn = connection_from_dsn("postgresql", sys.argv[1], "wl_tpch_progress")
    # progress left to the workload: stdout is a pipe here, so no bar
    build_workload(WorkloadConfig(kind="tpch", scale=0.02), conn).prepare()
    """
)


def test_a_piped_tpch_load_logs_its_progress(pg_sandbox: PostgresSandboxInfo) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TERM")}
    r = subprocess.run(
        [sys.executable, "-c", _CHILD, pg_sandbox.dsn],
        capture_output=True,  # stdout a pipe, as under `| cat` or systemd
        text=True,
        timeout=300,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""  # no bar, no stray output on stdout
    lines = [line for line in r.stderr.splitlines() if "workload.load_progress" in line]
    percents = [float(m.group(1)) for line in lines if (m := re.search(r"percent=([\d.]+)", line))]
    assert len(percents) == len(lines) >= 5, r.stderr  # ~20 MB copied in 1-MiB chunks: most 10 % steps
    assert percents == sorted(percents) and len(set(percents)) == len(percents) and percents[-1] == 100.0
    assert all(re.search(r"what='TPC-H load \w+'", line) and "elapsed_s=" in line for line in lines), r.stderr
    assert "what='TPC-H load lineitem'" in lines[-1] and "bytes=" in lines[-1]
    # the quiet level still hides the other INFO lines (the size line is printed, not logged)
    assert "workload.prepared" not in r.stderr and "loading tpch data at workload.scale = 0.02" in r.stderr
