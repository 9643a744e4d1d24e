"""End to end on a real private PostgreSQL: the CLI as a user runs it, plus the executor/recovery cases
of issue 2 (forced wal_level=minimal, postmaster knob claimed as reload, durability rejection).

The instance here is created through ``agenticdb sandbox up postgres`` (the user's path) in its own home,
because these tests restart it and leave a tuned configuration behind.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from agenticdb.config.sections import PolicyConfig, WorkloadConfig
from agenticdb.host.hardware import detect_hardware
from agenticdb.loop.executor import Executor
from agenticdb.loop.recovery import Recovery
from agenticdb.models import ApplyMode, Bottleneck, Change, Layer, NormalizedChange, Proposal, Verdict
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.store.journal import Journal
from agenticdb.targets.postgres import PostgresTarget
from agenticdb.validation.validator import validate
from agenticdb.workloads import build_workload, connection_from_dsn

pytestmark = pytest.mark.usefixtures("no_opening")  # diagnosis rounds, not the opening (tests/test_race.py)

CLI = [sys.executable, "-m", "agenticdb.cli"]


def _shared_tmp(prefix: str) -> Path:
    """A temp dir the postgres OS user can traverse (pytest's own tmp dirs are 0700)."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    return path


def cli(home: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTICDB_HOME": str(home)}
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
    )


@pytest.fixture(scope="module")
def home() -> Iterator[Path]:
    base = _shared_tmp("agenticdb-tune-")
    r = cli(base, "sandbox", "up", "postgres")
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        yield base
    finally:
        cli(base, "sandbox", "down", "postgres")


@pytest.fixture(scope="module")
def info(home: Path) -> PostgresSandboxInfo:
    i = PostgresSandbox(home).info()
    assert i is not None
    return i


def setting(info: PostgresSandboxInfo, name: str) -> str:
    with psycopg.connect(info.dsn, autocommit=True) as c:
        row = c.execute("SELECT current_setting(%s)", (name,)).fetchone()
        assert row is not None
        return str(row[0])


@pytest.mark.slow
def test_full_tune_session_via_cli(home: Path, info: PostgresSandboxInfo) -> None:
    # the module's home is shared: in random order another test's session (e.g. the interrupted one of
    # test_ctrl_c_twice_or_sigterm_mid_trial…) may already be in its journal, so read this test's own
    with Journal(home / "journal.db") as before:
        earlier = {s.id for s in before.sessions()}
    r = cli(
        home,
        "tune",
        "--sandbox",
        "postgres",
        "--workload",
        "pgbench",
        "--rounds",
        "3",
        "--duration",
        "5",
        "--warmup",
        "1",
        "--scale",
        "1",
        "--clients",
        "2",
        "--baseline-runs",
        "2",
        "--max-pairs",
        "1",
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "baseline" in r.stdout and "best" in r.stdout

    journal = Journal(home / "journal.db")
    sessions = [s for s in journal.sessions() if s.id not in earlier]
    assert len(sessions) == 1, f"expected this test's one session, got {[s.id for s in sessions]}"
    sid = sessions[0].id
    events = journal.events(sid)
    kinds = [e.event for e in events]
    for needed in ("session.start", "baseline", "proposal", "verdict", "decision", "session.end"):
        assert needed in kinds, f"{needed} missing from journal: {kinds}"
    assert kinds.count("decision") >= 1
    assert journal.verify().ok
    assert not journal.open_intents(), "a trial intent was left open"

    end = [e for e in events if e.event == "session.end"][-1].data
    assert end["status"] == "completed"
    # The best configuration is what is in effect on the server afterwards.
    for name, value in end["best_changes"].items():
        live = setting(info, name)
        assert live.lower() == str(value).lower(), f"{name}: best {value}, server has {live}"

    with sqlite3.connect(home / "memory.db") as db:
        n = db.execute("SELECT count(*) FROM experience WHERE session_id = ?", (sid,)).fetchone()[0]
        rounds = db.execute("SELECT count(*) FROM rounds WHERE session_id = ?", (sid,)).fetchone()[0]
    assert n == 1 and rounds >= 1

    show = cli(home, "journal", "show", sid)
    assert show.returncode == 0 and "round" in show.stdout.lower()


def _executor(target: PostgresTarget, info: PostgresSandboxInfo, journal: Journal) -> Executor:
    wl = build_workload(
        WorkloadConfig(kind="pgbench", scale=1, clients=2, threads=1, duration_s=2),
        connection_from_dsn("postgresql", info.dsn, "agenticdb_bench"),
    )
    return Executor(target, [target.runtime_state], wl, journal, "test", warmup_s=0, duration_s=2)


def test_forced_wal_level_minimal_is_recovered(home: Path, info: PostgresSandboxInfo, tmp_path: Path) -> None:
    """wal_level=minimal with max_wal_senders=10 stops the server from starting; recovery restores the
    snapshot and brings it back (case pg-wal-level-minimal.toml, also_recover)."""
    target = PostgresTarget.from_config(info.target_config())
    journal = Journal(tmp_path / "j.db")
    safe = target.snapshot(["wal_level", "max_wal_senders"], label="safe")
    forced = Verdict(
        ok=True,
        apply_requirement=ApplyMode.restart,
        changes=[NormalizedChange(name="wal_level", value="minimal", apply=ApplyMode.restart)],
    )
    execution = _executor(target, info, journal).trial(forced, safe, round_no=1)
    assert execution.failure is not None and execution.failure.phase in ("restart", "apply")
    assert not target.available()
    result = Recovery(target).recover(execution.failure, safe)
    assert result.action == "restored" and result.service_available and result.verified, result
    assert setting(info, "wal_level") == "replica"
    assert any("wal_level" in line or "max_wal_senders" in line for line in execution.failure.logs + result.log_excerpt)


def test_postmaster_knob_claimed_as_reload_is_applied_by_restart(info: PostgresSandboxInfo, tmp_path: Path) -> None:
    target = PostgresTarget.from_config(info.target_config())
    catalog = target.catalog()
    current = target.current_values(list(catalog.knobs))
    # Half the current value: always a real change, always inside the per-round step bound (an earlier
    # tune in this module may have raised shared_buffers).
    with psycopg.connect(info.dsn, autocommit=True) as c:
        row = c.execute("SELECT setting::bigint FROM pg_settings WHERE name = 'shared_buffers'").fetchone()
    assert row is not None
    target_value = f"{int(row[0]) * 8 // 2 // 1024}MB"
    proposal = Proposal(
        bottleneck=Bottleneck.buffer_cache,
        changes=[Change(name="shared_buffers", value=target_value)],
        apply_requirement=ApplyMode.reload,
    )
    verdict = validate(proposal, catalog, current, detect_hardware(info.data_dir), PolicyConfig(), Layer.dbms)
    assert verdict.ok, verdict.feedback()
    assert verdict.apply_requirement == ApplyMode.restart
    journal = Journal(tmp_path / "j.db")
    before = setting(info, "shared_buffers")  # an earlier tune in this module may have kept another value
    safe = target.snapshot(["shared_buffers"], label="safe")
    try:
        ex = _executor(target, info, journal)
        restarted, effective = ex.apply(verdict.changes, verdict.apply_requirement, 1, safe)
        assert restarted
        assert setting(info, "shared_buffers") == target_value
        with psycopg.connect(info.dsn, autocommit=True) as c:
            pending = c.execute("SELECT count(*) FROM pg_settings WHERE pending_restart").fetchone()
        assert pending is not None and pending[0] == 0
    finally:
        target.restore(safe)
    assert setting(info, "shared_buffers") == before


def test_validate_cli_rejects_durability_knob(home: Path, tmp_path: Path) -> None:
    f = tmp_path / "changes.toml"
    f.write_text('fsync = "off"\nwork_mem = "8MB"\n')
    r = cli(home, "validate", "--sandbox", "postgres", str(f))
    assert r.returncode == 1
    out = r.stdout
    assert "fsync" in out and "durability" in out
    ok = tmp_path / "ok.toml"
    ok.write_text('work_mem = "8MB"\n')
    r = cli(home, "validate", "--sandbox", "postgres", str(ok))
    assert r.returncode == 0, r.stdout + r.stderr


def test_start_from_with_durability_violation_is_refused(home: Path, tmp_path: Path) -> None:
    f = tmp_path / "start.toml"
    f.write_text('synchronous_commit = "off"\n')
    r = cli(
        home,
        "tune",
        "--sandbox",
        "postgres",
        "--workload",
        "pgbench",
        "--rounds",
        "1",
        "--duration",
        "2",
        "--warmup",
        "0",
        "--scale",
        "1",
        "--start-from",
        str(f),
    )
    assert r.returncode != 0
    assert "synchronous_commit" in (r.stdout + r.stderr)


@pytest.mark.slow
def test_reset_data_restores_pristine_copy_before_each_run(home: Path, info: PostgresSandboxInfo) -> None:
    bench_dsn = info.dsn.rsplit("/", 1)[0] + "/agenticdb_bench"

    def history_rows() -> int:
        try:
            with psycopg.connect(bench_dsn, autocommit=True) as c:
                row = c.execute("SELECT count(*) FROM pgbench_history").fetchone()
                return int(row[0]) if row else 0
        except psycopg.Error:
            return 0

    before = history_rows()
    r = cli(
        home,
        "tune",
        "--sandbox",
        "postgres",
        "--workload",
        "pgbench",
        "--rounds",
        "1",
        "--duration",
        "2",
        "--warmup",
        "0",
        "--scale",
        "1",
        "--baseline-runs",
        "4",
        "--max-pairs",
        "1",
        "--reset-data",
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    journal = Journal(home / "journal.db")
    sid = journal.sessions()[-1].id  # oldest first: the newest is this test's
    kinds = [e.event for e in journal.events(sid)]
    assert "pristine.captured" in kinds
    assert not Path(info.data_dir + ".pristine").exists(), "pristine copy left behind"
    # Every run started from the pristine copy: only the last warm-up's and run's history rows remain.
    # Without resets the table would hold every run's rows (and every warm-up's): more than sum(runs).
    runs = [e.data["measurement"]["transactions"] for e in journal.events(sid) if e.event == "measured"]
    assert len(runs) >= 4
    added = history_rows() - before
    assert 0 < added < sum(runs), (added, runs)


def test_reset_data_is_refused_outside_a_sandbox(home: Path, info: PostgresSandboxInfo) -> None:
    sessions_before = len(Journal(home / "journal.db").sessions())
    r = cli(
        home,
        "tune",
        "--target",
        info.dsn,
        "--workload",
        "pgbench",
        "--rounds",
        "1",
        "--duration",
        "1",
        "--scale",
        "1",
        "--reset-data",
    )
    assert r.returncode == 2  # a usage error: nothing ran
    assert "allowed only on a sandbox" in r.stdout + r.stderr
    assert len(Journal(home / "journal.db").sessions()) == sessions_before  # no half-journaled session


@pytest.mark.slow
@pytest.mark.parametrize("signals", [("SIGINT", "SIGINT"), ("SIGTERM",)], ids=["ctrl-c-twice", "sigterm"])
def test_ctrl_c_twice_or_sigterm_mid_trial_restores_and_journals(
    home: Path, info: PostgresSandboxInfo, signals: tuple[str, ...]
) -> None:
    """Two Ctrl-C, or one SIGTERM (kill, timeout, a service manager), while a candidate is applied: the
    best configuration is back, the journal holds the interruption and the session end, exit 130."""
    import signal
    import time

    with psycopg.connect(info.dsn, autocommit=True) as c:
        before = c.execute("SELECT name, setting FROM pg_settings ORDER BY name").fetchall()
    env = {**os.environ, "AGENTICDB_HOME": str(home)}
    proc = subprocess.Popen(
        [
            *CLI,
            "tune",
            "--sandbox",
            "postgres",
            "--workload",
            "pgbench",
            "--rounds",
            "3",
            "--duration",
            "8",  # the signals come within ~1 s of "applied", inside the trial's run; 20 s made the baseline 20 s
            "--warmup",
            "0",
            "--scale",
            "1",
            "--baseline-runs",
            "1",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    journal = Journal(home / "journal.db")
    try:
        deadline = time.monotonic() + 400  # a loaded host may take minutes to reach the first trial
        while time.monotonic() < deadline:
            newest = journal.sessions()[-1] if journal.sessions() else None
            if (
                newest is not None
                and newest.status == "unfinished"
                and any(e.event == "applied" for e in journal.events(newest.id))
            ):
                break
            time.sleep(0.3)
        else:
            pytest.fail("no trial was applied")
        for name in signals:
            proc.send_signal(getattr(signal, name))
            time.sleep(0.5)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out[-2000:]
    assert "Traceback" not in out
    sid = journal.sessions()[-1].id
    kinds = [e.event for e in journal.events(sid)]
    assert "interrupted" in kinds
    end = [e for e in journal.events(sid) if e.event == "session.end"][-1]
    # told as what ended it (issue 39): a SIGTERM is a stop, not a Ctrl-C
    sigterm = signals == ("SIGTERM",)
    assert end.data["status"] == ("stopped" if sigterm else "interrupted"), end.data
    words = "stopped (SIGTERM)" if sigterm else "interrupted (Ctrl-C)"
    assert words in end.data["reason"] and words in out, out[-2000:]
    assert ("Ctrl-C)" in end.data["reason"]) is not sigterm
    assert not journal.open_intents()
    with psycopg.connect(info.dsn, autocommit=True) as c:
        after = c.execute("SELECT name, setting FROM pg_settings ORDER BY name").fetchall()
    assert after == before
