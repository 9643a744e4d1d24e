"""The daemon as a real process: READY on a real NOTIFY_SOCKET, SIGTERM, kill -9 mid-trial and crash
reconciliation, SIGHUP with an invalid config. Private PostgreSQL per module."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import psutil
import psycopg
import pytest

from agenticdb.daemon import in_window
from agenticdb.host.notify import Notifier
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.store.journal import Journal

pytestmark = pytest.mark.usefixtures("no_opening")  # diagnosis rounds, not the opening (tests/test_race.py)


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresSandboxInfo]:
    base = Path(tempfile.mkdtemp(prefix="agenticdb-daemon-"))
    base.chmod(0o755)
    sb = PostgresSandbox(base)
    info = sb.up()
    try:
        yield info
    finally:
        sb.down()


def write_config(
    path: Path,
    info: PostgresSandboxInfo,
    home: Path,
    duration: float = 2,
    rounds: int = 1,
    run_on_start: bool = True,
) -> None:
    path.write_text(f"""
[target]
kind = "postgresql"
dsn = "{info.dsn}"
database = "agenticdb_bench"
[target.service]
kind = "pg_ctl"
data_dir = "{info.data_dir}"
bindir = "{info.bindir}"
os_user = "{info.os_user or ""}"
log_file = "{info.log_file}"
[workload]
kind = "pgbench"
scale = 1
clients = 2
threads = 1
duration_s = {duration}
warmup_s = 0
[loop]
max_rounds = {rounds}
baseline_runs = 1
min_pairs = 1
max_pairs = 1
[storage]
home = "{home}"
[daemon]
run_on_start = {str(run_on_start).lower()}
interval_hours = 100
watchdog_s = 3
""")


class NotifySocket:
    """A real AF_UNIX datagram socket standing where systemd's notify socket would be."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.5)
        self.messages: list[str] = []

    def wait_for(self, text: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in m for m in self.messages):
                return True
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except TimeoutError:
                pass
        return any(text in m for m in self.messages)

    def close(self) -> None:
        self.sock.close()


def start_daemon(config: Path, notify: Path) -> subprocess.Popen[str]:
    """The daemon as systemd would run it; its log goes to a file beside the config (a pipe nobody
    reads would fill up and block the daemon)."""
    env = {**os.environ, "NOTIFY_SOCKET": str(notify)}
    log = open(config.with_suffix(".log"), "a")
    return subprocess.Popen(
        [sys.executable, "-m", "agenticdb.cli", "daemon", "--config", str(config)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def has_event(journal_path: Path, event: str) -> bool:
    """True when the journal already holds ``event``."""
    if not journal_path.exists():
        return False
    j = Journal(journal_path)
    try:
        return any(e.event == event for e in j.tail(500))
    finally:
        j.close()


def wait_event(journal_path: Path, event: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if journal_path.exists():
            j = Journal(journal_path)
            try:
                if any(e.event == event for e in j.tail(500)):
                    return True
            finally:
                j.close()
        time.sleep(0.2)
    return False


def wait_for_benchmark(proc: subprocess.Popen[str], timeout: float) -> bool:
    """True once a pgbench child of the daemon runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if any(p.name() == "pgbench" for p in psutil.Process(proc.pid).children(recursive=True)):
                return True
        except psutil.Error:
            pass
        time.sleep(0.2)
    return False


def setting(info: PostgresSandboxInfo, name: str) -> str:
    with psycopg.connect(info.dsn, autocommit=True) as c:
        row = c.execute("SELECT current_setting(%s)", (name,)).fetchone()
        assert row is not None
        return str(row[0])


def test_daemon_without_a_target_refuses_to_start(tmp_path: Path) -> None:
    """A DBA's trial: with no target the daemon logged "session_failed … no target given" and kept running.
    It exits 2 at once with one error naming every way to choose a target, and writes nothing."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTICDB_")}
    home = tmp_path / "home"
    r = subprocess.run(
        [sys.executable, "-m", "agenticdb.cli", "daemon", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    assert out.startswith("error: no target given: ") and out.count("\n") == 1, out
    for way in ("--target DSN", "--sandbox postgres|mariadb", "[target] dsn", "AGENTICDB_TARGET__DSN"):
        assert way in out
    assert not home.exists()  # no journal, no Memory Book: nothing started


def test_notifier_speaks_the_datagram_protocol(tmp_path: Path) -> None:
    ns = NotifySocket(tmp_path / "n.sock")
    try:
        n = Notifier(str(ns.path))
        assert n.ready("up") and n.watchdog() and n.status("round 1/3: checkpoint pressure")
        assert ns.wait_for("READY=1", 2) and ns.wait_for("WATCHDOG=1", 2) and ns.wait_for("STATUS=round 1/3", 2)
    finally:
        ns.close()
    assert not Notifier("").enabled and Notifier("").send(READY=1) is False


def test_windows() -> None:
    assert in_window([], datetime(2026, 1, 1, 12, 0))
    assert in_window(["01:00-05:00"], datetime(2026, 1, 1, 3, 0))
    assert not in_window(["01:00-05:00"], datetime(2026, 1, 1, 6, 0))
    assert in_window(["22:00-02:00"], datetime(2026, 1, 1, 23, 30))
    assert in_window(["22:00-02:00"], datetime(2026, 1, 1, 1, 0))


@pytest.mark.slow
def test_daemon_ready_session_and_sigterm(pg: PostgresSandboxInfo, tmp_path: Path) -> None:
    home = tmp_path / "home"
    cfg = tmp_path / "agenticdb.toml"
    write_config(cfg, pg, home)
    ns = NotifySocket(tmp_path / "notify.sock")
    proc = start_daemon(cfg, ns.path)
    try:
        assert ns.wait_for("READY=1", 30), (ns.messages, proc.poll())
        assert wait_event(home / "journal.db", "session.end", 180), "session did not finish"
        assert ns.wait_for("WATCHDOG=1", 10)
        assert ns.wait_for("STATUS=", 5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, cfg.with_suffix(".log").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        ns.close()
    j = Journal(home / "journal.db")
    assert not j.open_intents()
    assert j.verify().ok


@pytest.mark.slow
def test_kill_9_mid_trial_is_reconciled_on_next_start(pg: PostgresSandboxInfo, tmp_path: Path) -> None:
    home = tmp_path / "home"
    cfg = tmp_path / "agenticdb.toml"
    # 10-s runs: the kill comes within about a second of the "applied" event, inside the trial's run, with
    # room to spare on a loaded host (30-s runs made the baseline alone 30 s; the test took ~100 s).
    write_config(cfg, pg, home, duration=10, rounds=2)
    ns = NotifySocket(tmp_path / "notify.sock")
    proc = start_daemon(cfg, ns.path)
    orphans: list[psutil.Process] = []
    try:
        assert ns.wait_for("READY=1", 30)
        assert wait_event(home / "journal.db", "applied", 300), (
            "no trial was applied; daemon log tail:\n" + cfg.with_suffix(".log").read_text()[-4000:]
        )
        orphans = psutil.Process(proc.pid).children(recursive=True)
        proc.kill()  # SIGKILL: no handler runs, the trial configuration stays in effect
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    for child in orphans:  # the benchmark the dead daemon started (only ours, never other processes)
        try:
            child.kill()
        except psutil.Error:
            pass
    j = Journal(home / "journal.db")
    intents = j.open_intents()
    assert intents, "the kill left no open intent"
    safe = intents[-1].snapshot
    assert safe is not None
    j.close()

    write_config(cfg, pg, home, run_on_start=False)
    proc = start_daemon(cfg, ns.path)
    try:
        assert ns.wait_for("reconciliation", 60), ns.messages
        j = Journal(home / "journal.db")
        assert any(e.event == "reconcile" for e in j.tail(200))
        assert not j.open_intents()
        for name, value in safe.values.items():
            assert setting(pg, name).lower() == value.lower(), name
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        ns.close()


def test_sighup_with_invalid_config_keeps_running(pg: PostgresSandboxInfo, tmp_path: Path) -> None:
    home = tmp_path / "home"
    cfg = tmp_path / "agenticdb.toml"
    write_config(cfg, pg, home, run_on_start=False)
    ns = NotifySocket(tmp_path / "notify.sock")
    proc = start_daemon(cfg, ns.path)
    try:
        assert ns.wait_for("READY=1", 30)
        cfg.write_text(cfg.read_text() + "\n[loop]\nmax_rounds = 0\n")  # duplicate table: invalid TOML
        proc.send_signal(signal.SIGHUP)
        assert ns.wait_for("reload rejected", 15), ns.messages
        assert proc.poll() is None, "daemon died on an invalid config"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        ns.close()
    j = Journal(home / "journal.db")
    reloads = [e for e in j.tail(100) if e.event == "config.reload"]
    assert reloads and reloads[-1].data["ok"] is False


def test_workload_mix_from_counters() -> None:
    from agenticdb.daemon import workload_mix
    from agenticdb.models import StateDelta

    pg = StateDelta(totals={"pg_stat_database.tup_fetched": 900, "pg_stat_database.tup_inserted": 100}, seconds=10)
    assert workload_mix(pg) == (100.0, 0.9)
    my = StateDelta(totals={"global_status.Com_select": 50, "global_status.Com_update": 150}, seconds=2)
    assert workload_mix(my) == (100.0, 0.25)
    assert workload_mix(StateDelta(totals={}, seconds=5)) is None


@pytest.mark.slow
def test_monitoring_detects_drift_and_retunes(pg: PostgresSandboxInfo, tmp_path: Path) -> None:
    home = tmp_path / "home"
    cfg = tmp_path / "agenticdb.toml"
    write_config(cfg, pg, home, run_on_start=False)
    cfg.write_text(
        cfg.read_text().replace("watchdog_s = 3", "watchdog_s = 3\nmonitor_interval_s = 1\ndrift_threshold = 0.3")
    )
    with psycopg.connect(pg.dsn, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS drift_probe")
        c.execute("CREATE TABLE drift_probe (id int primary key, v text)")
        c.execute("INSERT INTO drift_probe SELECT g, 'x' FROM generate_series(1, 1000) g")
    ns = NotifySocket(tmp_path / "notify.sock")
    proc = start_daemon(cfg, ns.path)
    try:
        assert ns.wait_for("READY=1", 30)
        log = cfg.with_suffix(".log")
        with psycopg.connect(pg.dsn, autocommit=True) as c:
            # Read-only phase until the daemon has sampled its reference mix (not a fixed time: a busy
            # host may take a while to sample twice).
            deadline, i = time.monotonic() + 120, 0
            while "daemon.monitor_reference" not in log.read_text(errors="replace"):
                assert time.monotonic() < deadline, "the daemon never sampled a reference mix"
                for _ in range(50):
                    c.execute("SELECT v FROM drift_probe WHERE id = %s", (i % 1000 + 1,))
                    i += 1
            # Write-only phase until the drift is journaled: 500 rows per statement, so the inserted rows
            # outweigh every row read beside them (the daemon's own catalog queries, other tests' in this
            # shared sandbox) however slowly a busy host commits; one-row inserts did not at load 4
            # (no drift in 120 s, 2026-12-07).
            deadline = time.monotonic() + 120
            try:
                while not has_event(home / "journal.db", "drift.detected"):
                    assert time.monotonic() < deadline, "no drift detected"
                    c.execute(
                        "INSERT INTO drift_probe SELECT g, 'y' FROM generate_series(%s::int, %s::int) g",
                        (100000 + i, 100000 + i + 499),
                    )
                    i += 500
            except psycopg.OperationalError:
                pass  # the re-tune the drift triggered restarted the server under this load: expected
        assert wait_event(home / "journal.db", "drift.detected", 60), "no drift detected"
        assert wait_event(home / "journal.db", "session.start", 120), "drift did not start a session"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        ns.close()
        with psycopg.connect(pg.dsn, autocommit=True) as c:
            c.execute("DROP TABLE IF EXISTS drift_probe")  # the shared sandbox keeps no test's rows


@pytest.mark.slow
def test_second_sigterm_stops_waiting_for_the_benchmark(pg: PostgresSandboxInfo, tmp_path: Path) -> None:
    home = tmp_path / "home"
    cfg = tmp_path / "agenticdb.toml"
    write_config(cfg, pg, home, duration=60, rounds=2)
    with psycopg.connect(pg.dsn, autocommit=True) as c:
        before = c.execute("SELECT name, setting FROM pg_settings ORDER BY name").fetchall()
    ns = NotifySocket(tmp_path / "notify.sock")
    proc = start_daemon(cfg, ns.path)
    try:
        assert ns.wait_for("READY=1", 30)
        # The baseline alone runs 60 s: interrupt inside it, then insist.
        assert wait_event(home / "journal.db", "session.start", 60)
        assert wait_for_benchmark(proc, 60), "pgbench never started"
        proc.send_signal(signal.SIGTERM)
        time.sleep(1)  # two signals in one instant may reach the daemon as one
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0, cfg.with_suffix(".log").read_text()[-3000:]
        # Not a wall-clock bound: the daemon killed the benchmark instead of waiting it out.
        log = cfg.with_suffix(".log").read_text(errors="replace")
        assert "daemon.benchmark_killed" in log, log[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        ns.close()
    j = Journal(home / "journal.db")
    assert not j.open_intents()
    with psycopg.connect(pg.dsn, autocommit=True) as c:
        after = c.execute("SELECT name, setting FROM pg_settings ORDER BY name").fetchall()
    assert after == before, "configuration changed by an interrupted session"


def test_open_intent_of_a_live_tune_is_not_reconciled(pg: PostgresSandboxInfo, tmp_path: Path) -> None:
    """A `tune` holding the target lock owns its open intent: the daemon must not roll it back."""
    from agenticdb.models import Snapshot
    from agenticdb.store.lock import TargetLock

    home = tmp_path / "home"
    home.mkdir()
    cfg = tmp_path / "agenticdb.toml"
    write_config(cfg, pg, home, run_on_start=False)
    live = Snapshot(target="postgresql", values={"work_mem": "64kB"}, label="live tune's safe snapshot")
    j = Journal(home / "journal.db")
    j.append("live-tune", "intent", {"target": "postgresql", "snapshot": live.model_dump(mode="json")}, 1)
    j.close()
    ns = NotifySocket(tmp_path / "notify.sock")
    with TargetLock(home, pg.dsn):  # the live tune
        proc = start_daemon(cfg, ns.path)
        try:
            assert ns.wait_for("READY=1", 30), cfg.with_suffix(".log").read_text()[-2000:]
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
            ns.close()
    j = Journal(home / "journal.db")
    assert not any(e.event == "reconcile" for e in j.tail(100))
    assert len(j.open_intents()) == 1
    assert setting(pg, "work_mem") == "4MB"


def test_a_reload_says_which_target_and_storage_settings_it_did_not_apply(tmp_path: Path) -> None:
    """A reload keeps the running target and storage (it never re-points the daemon), and says so: a DBA who
    moved storage.memory_db or target.dsn in the file and sent SIGHUP read 'config.reload ok' and nothing else.
    The reload's other sections apply; a file that only repeats the running target and storage reports none."""
    from agenticdb.config import load_config
    from agenticdb.daemon import Daemon
    from agenticdb.store.journal import Journal

    cfg = tmp_path / "agenticdb.toml"
    dsn = "postgresql://agenticdb@127.0.0.1:1/postgres"
    cfg.write_text(f'[target]\ndsn = "{dsn}"\n[storage]\nhome = "{tmp_path / "h"}"\n[loop]\nmax_rounds = 4\n')
    daemon = Daemon(load_config(cfg), cfg)
    with Journal(tmp_path / "j.db") as j:
        cfg.write_text(cfg.read_text().replace("max_rounds = 4", "max_rounds = 2"))
        daemon._reload(j)
        cfg.write_text(
            f'[target]\ndsn = "{dsn.replace(":1/", ":2/")}"\n[storage]\nhome = "{tmp_path / "h"}"\n'
            f'memory_db = "{tmp_path / "book.db"}"\n[loop]\nmax_rounds = 3\n'
        )
        daemon._reload(j)
        reloads = [e.data for e in j.tail(10) if e.event == "config.reload"]
    assert reloads[0] == {"ok": True} and daemon.cfg.loop.max_rounds == 3
    assert reloads[1]["ok"] is True and reloads[1]["not_applied"] == ["target.dsn", "storage.memory_db"], reloads
    assert daemon.cfg.target.dsn == dsn and daemon.cfg.storage.memory_db == tmp_path / "h" / "memory.db"


def test_a_reload_inconsistent_with_the_running_target_is_refused(tmp_path: Path) -> None:
    """A reload keeps the running [target], so the file's other sections must fit it: a fresh start refuses
    workload.kind = 'pgbench' with a MariaDB target (config.check_settings), but a reload checked the file alone
    (its own [target], or the default PostgreSQL one) and then put the running MariaDB target back under it, so
    the next scheduled session would run pgbench against MariaDB. The reload is refused as an invalid file is:
    journaled with the rule, the running configuration kept."""
    from agenticdb.config import load_config
    from agenticdb.daemon import Daemon
    from agenticdb.store.journal import Journal

    cfg = tmp_path / "agenticdb.toml"
    target = '[target]\nkind = "mariadb"\ndsn = "mysql://agenticdb@127.0.0.1:1/test"\n'
    cfg.write_text(f'{target}[storage]\nhome = "{tmp_path / "h"}"\n[workload]\nkind = "sysbench-oltp-read-write"\n')
    daemon = Daemon(load_config(cfg), cfg)
    running = daemon.cfg
    with Journal(tmp_path / "j.db") as j:
        # the file re-pointed at a PostgreSQL server (valid alone; a target changes on restart only)
        cfg.write_text(
            f'[target]\ndsn = "postgresql://agenticdb@127.0.0.1:1/postgres"\n[storage]\nhome = "{tmp_path / "h"}"\n'
            '[workload]\nkind = "pgbench"\n[loop]\nmax_rounds = 2\n'
        )
        load_config(cfg)  # valid on its own
        daemon._reload(j)
        cfg.write_text(f'[storage]\nhome = "{tmp_path / "h"}"\n[workload]\nkind = "pgbench"\n')  # no [target]
        daemon._reload(j)
        reloads = [e.data for e in j.tail(10) if e.event == "config.reload"]
    assert daemon.cfg is running and daemon.cfg.workload.kind == "sysbench-oltp-read-write"
    assert [r["ok"] for r in reloads] == [False, False], reloads
    for r in reloads:
        assert "workload.kind = 'pgbench' runs only on PostgreSQL, but target.kind = 'mariadb'" in r["error"], r
        assert "the running [target]" in r["error"], r
