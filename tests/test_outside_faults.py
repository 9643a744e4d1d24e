"""Faults from outside the loop on real servers (issue 38): a statistics reset and an outside restart inside
a benchmark run (pgbench) and inside a live window, and an OOM kill that stays the candidate's failure.

Timing is forced by events, never by sleeps near the noise: the benchmark faults fire once pgbench's
sessions are seen active in pg_stat_activity (a 6-s run leaves seconds of margin); the live faults fire
from the statistics reader itself at its third snapshot of the window (a reader that really runs
``pg_stat_statements_reset()`` / ``pg_ctl restart`` on the server before reading it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from agenticdb.config.sections import LiveConfig, WorkloadConfig
from agenticdb.host.services import run_as
from agenticdb.loop.executor import Executor
from agenticdb.loop.runwatch import OutsideRestart, RunWatch
from agenticdb.models import Bottleneck, Layer, RoundOutcome
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.store.journal import Journal
from agenticdb.store.memory.experience import _lessons
from agenticdb.targets.postgres import PostgresTarget
from agenticdb.workloads.base import WorkloadError
from agenticdb.workloads.live import LiveWorkload
from agenticdb.workloads.livestats import PgStatReader, StatSnapshot
from agenticdb.workloads.registry import build_workload, connection_from_dsn

APP = [sys.executable, str(Path(__file__).with_name("live_app.py"))]


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresSandboxInfo]:
    base = Path(tempfile.mkdtemp(prefix="agenticdb-outside-"))
    base.chmod(0o755)
    sb = PostgresSandbox(base)
    info = sb.up()
    subprocess.run([*APP, info.dsn, "0", "--setup"], check=True, timeout=120)
    try:
        yield info
    finally:
        sb.down()
        shutil.rmtree(base, ignore_errors=True)


def outside_restart(info: PostgresSandboxInfo) -> None:
    """What a DBA types: pg_ctl restart -m fast (as postgres), logging on to the same file."""
    pg_ctl = str(Path(info.bindir) / "pg_ctl")
    run_as([pg_ctl, "restart", "-m", "fast", "-w", "-D", info.data_dir, "-l", info.log_file], info.os_user, timeout=120)


def wait_for_pgbench(info: PostgresSandboxInfo, timeout_s: float = 60.0) -> None:
    """Return once a pgbench session is active (an event, polled every 20 ms)."""
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(info.dsn, autocommit=True) as c:
        while time.monotonic() < deadline:
            if c.execute(
                "SELECT 1 FROM pg_stat_activity WHERE application_name = 'pgbench' AND state = 'active'"
            ).fetchone():
                return
            time.sleep(0.02)
    raise AssertionError("pgbench never became active")


def bench_executor(info: PostgresSandboxInfo, journal: Journal) -> Executor:
    target = PostgresTarget.from_config(info.target_config())
    wl = build_workload(
        WorkloadConfig(kind="pgbench", scale=1, clients=2, threads=1, duration_s=6),
        connection_from_dsn("postgresql", info.dsn, "wl_outside"),
        progress=False,
    )
    wl.prepare()
    return Executor(target, [target.runtime_state], wl, journal, "outside", warmup_s=0, duration_s=6, watch_host=False)


def during_pgbench(info: PostgresSandboxInfo, action: str) -> threading.Thread:
    def act() -> None:
        wait_for_pgbench(info)
        if action == "reset":
            with psycopg.connect(info.dsn, autocommit=True) as c:
                c.execute("SELECT pg_stat_statements_reset()")
        elif action == "rival":
            with psycopg.connect(info.dsn, autocommit=True) as c:
                c.execute("ALTER SYSTEM SET work_mem = '7MB'")
                c.execute("SELECT pg_reload_conf()")
        else:
            outside_restart(info)

    t = threading.Thread(target=act, daemon=True)
    t.start()
    return t


def test_a_statistics_reset_inside_a_benchmark_run_makes_it_disturbed(pg: PostgresSandboxInfo, tmp_path: Path) -> None:
    executor = bench_executor(pg, Journal(tmp_path / "j.db"))
    t = during_pgbench(pg, "reset")
    m, _ = executor.measure(1, "candidate")
    t.join(60)
    d = m.disturbance
    assert d is not None and d.disturbed, d
    assert any("pg_stat_statements_info.stats_reset" in w for w in d.world), d.world
    # a quiet run after it is not disturbed by the world (the marks agree)
    m2, _ = executor.measure(1, "candidate")
    assert m2.disturbance is None or not m2.disturbance.world


def test_a_rival_config_change_inside_a_benchmark_run_makes_it_disturbed(
    pg: PostgresSandboxInfo, tmp_path: Path
) -> None:
    executor = bench_executor(pg, Journal(tmp_path / "j.db"))
    t = during_pgbench(pg, "rival")
    try:
        m, _ = executor.measure(1, "candidate")
        t.join(60)
    finally:
        with psycopg.connect(pg.dsn, autocommit=True) as c:
            c.execute("ALTER SYSTEM RESET work_mem")
            c.execute("SELECT pg_reload_conf()")
    d = m.disturbance
    assert d is not None and d.disturbed
    said = " ".join(d.world)
    assert "reloaded by someone else" in said and "work_mem 4096 → 7168" in said, d.world


def test_an_outside_restart_inside_a_benchmark_run_is_not_the_candidates_failure(
    pg: PostgresSandboxInfo, tmp_path: Path
) -> None:
    journal = Journal(tmp_path / "j.db")
    executor = bench_executor(pg, journal)
    t = during_pgbench(pg, "restart")
    with pytest.raises(OutsideRestart) as info:
        executor.measure(1, "candidate")
    t.join(120)
    assert "received fast shutdown request" in info.value.evidence, info.value.evidence
    failure = executor.failure(info.value, "workload", [], 1)
    assert failure.outside and "interrupted by an outside restart" in failure.message
    # the round is interrupted, never a failed lesson
    outcome = RoundOutcome(
        session_id="outside", round_no=1, stage=Layer.dbms, bottleneck=Bottleneck.unknown, decision="continue",
        reason="", changes={"work_mem": "8MB"}, verdict_ok=True, interrupted=failure.outside,
    )  # fmt: skip
    assert _lessons([outcome])["failed"] == []


class FaultyReader(PgStatReader):
    """The real pg_stat_statements reader; at its ``at``-th snapshot it first does ``action`` on the server."""

    def __init__(self, info: PostgresSandboxInfo, action: str, at: int) -> None:
        super().__init__(connection_from_dsn("postgresql", info.dsn, "postgres"), "postgres")
        self.info, self.action, self.at, self.calls = info, action, at, 0

    def snapshot(self) -> StatSnapshot:
        self.calls += 1
        if self.calls == self.at:
            if self.action == "reset":
                with psycopg.connect(self.info.dsn, autocommit=True) as c:
                    c.execute("SELECT pg_stat_statements_reset()")
            elif self.action == "restart":
                outside_restart(self.info)
        return super().snapshot()


def live_executor(info: PostgresSandboxInfo, reader: PgStatReader, journal: Journal) -> Executor:
    target = PostgresTarget.from_config(info.target_config("postgres"))
    wl = LiveWorkload(WorkloadConfig(kind="live"), LiveConfig(min_calls=2, turnover_max_s=0), reader)
    wl.prepare()
    # no host CPU sampling: this host's noise must not be what makes a window disturbed here
    return Executor(
        target, [target.runtime_state], wl, journal, "live-outside", warmup_s=0, duration_s=4, watch_host=False
    )


@pytest.fixture()
def app(pg: PostgresSandboxInfo) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([*APP, pg.dsn, "120"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield proc
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_a_reset_inside_a_live_candidate_window_makes_it_disturbed(
    pg: PostgresSandboxInfo, app: subprocess.Popen[str], tmp_path: Path
) -> None:
    # snapshots: baseline window 1 + 4, candidate window 1 + 4; the reset comes before the 8th (3rd second)
    executor = live_executor(pg, FaultyReader(pg, "reset", at=8), Journal(tmp_path / "j.db"))
    base, _ = executor.measure(0, "baseline 1")
    assert base.disturbance is None or not base.disturbance.world
    m, _ = executor.measure(1, "candidate")
    d = m.disturbance
    assert d is not None and d.disturbed, m
    assert any("went down" in w or "stats_reset" in w for w in d.world), d.world


def test_an_outside_restart_inside_a_live_window_is_called_outside(
    pg: PostgresSandboxInfo, app: subprocess.Popen[str], tmp_path: Path
) -> None:
    executor = live_executor(pg, FaultyReader(pg, "restart", at=8), Journal(tmp_path / "j.db"))
    executor.measure(0, "baseline 1")
    with pytest.raises(OutsideRestart) as info:
        executor.measure(1, "candidate")
    assert "57P01" in info.value.evidence or "administrator command" in info.value.evidence, info.value.evidence


def test_a_failure_without_a_requested_shutdown_stays_the_candidates(pg: PostgresSandboxInfo) -> None:
    """A backend killed with SIGKILL (what the OOM killer does): crash recovery, no requested shutdown in the
    log: not outside."""
    target = PostgresTarget.from_config(pg.target_config("postgres"))
    watch = RunWatch(target, lambda: int((Path(pg.data_dir) / "postmaster.pid").read_text().split()[0]))
    watch.begin()
    with psycopg.connect(pg.dsn, autocommit=True) as victim:
        pid = victim.info.backend_pid
        os.kill(pid, 9)
        with pytest.raises(psycopg.OperationalError) as err:
            victim.execute("SELECT 1")
    outside, why = watch.outside(WorkloadError(str(err.value)))
    assert not outside, why
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not target.available():  # crash recovery ends
        time.sleep(0.2)
    assert target.available()


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a cgroup needs root")
def test_an_oom_kill_caused_by_the_candidate_stays_its_failure(tmp_path: Path) -> None:
    """A private PostgreSQL confined to 256 MiB; the 'candidate' (work_mem = 2GB) sorts 3 M rows in memory and
    the kernel kills its backend. Even with a requested restart after it in the log, the run is not called
    an outside restart: the server's cgroup counted an OOM kill."""
    from agenticdb.host.services import build_service
    from benchmarks.harness.cgroup import CgroupError, MemoryCgroup

    try:
        cg = MemoryCgroup(f"agenticdb-test-oom-{os.getpid()}", 256 * 2**20)
    except CgroupError as exc:
        pytest.skip(f"no writable memory cgroup: {exc}")
    base = Path(tempfile.mkdtemp(prefix="agenticdb-oom-"))
    base.chmod(0o755)
    sb = PostgresSandbox(base)
    try:
        info = sb.up()
        cfg = info.target_config("postgres")
        cfg = cfg.model_copy(update={"service": cfg.service.model_copy(update={"cgroup": str(cg.path)})})
        build_service(cfg.service, lambda: sb.service(info).is_ready()).restart()  # the server now in the cgroup
        target = PostgresTarget.from_config(cfg)
        pid = int((Path(info.data_dir) / "postmaster.pid").read_text().split()[0])
        assert str(pid) in (cg.path / "cgroup.procs").read_text().split()
        watch = RunWatch(target, lambda: pid)
        watch.begin()
        assert watch.oom_before == 0
        with psycopg.connect(info.dsn, autocommit=True) as c:
            c.execute("SET work_mem = '2GB'")
            with pytest.raises(psycopg.OperationalError) as err:
                c.execute(
                    "SELECT count(*) FROM (SELECT md5(g::text) || md5((g * 7)::text) AS m "
                    "FROM generate_series(1, 3000000) g ORDER BY 1) s"
                )
        assert cg.oom_kills() >= 1
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not target.available():  # crash recovery
            time.sleep(0.2)
        outside_restart(info)  # someone restarts it afterwards: the log now shows a requested shutdown
        text = f"{err.value}\nterminating connection due to administrator command"
        outside, why = watch.outside(WorkloadError(text))
        assert not outside and "OOM kill" in why, why
    finally:
        sb.down()
        shutil.rmtree(base, ignore_errors=True)
        cg.remove()
