"""Prometheus metrics of issue 19: the collector over a real journal, and a real daemon process with a
short cycle whose /metrics (``curl -s``) and node_exporter textfile match its journal."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from agenticdb.config.sections import DaemonConfig, parse_listen
from agenticdb.report.metrics import JournalCollector
from agenticdb.sandbox import free_port
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.store.journal import Journal

pytestmark = pytest.mark.usefixtures("no_opening")  # diagnosis rounds, not the opening (tests/test_race.py)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Exposition text → {(sample name, sorted labels): value}."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    return out


def test_collector_counts_what_the_journal_says(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    with Journal(path) as j:
        j.append("s1", "session.start", {"target": "postgresql"})
        j.append("s1", "baseline", {"objectives": [100.0, 110.0, 90.0], "higher_is_better": True})
        fail = {"check": "range", "parameter": "work_mem", "value": "1", "message": "too small"}
        j.append("s1", "verdict", {"ok": False, "failed": [fail, {**fail, "check": "harmful"}]}, 1)
        j.append("s1", "verdict", {"ok": True, "failed": []}, 1)
        j.append("s1", "judged", {"gain": 0.2, "low": 0.1, "high": 0.3}, 1)
        j.append("s1", "decision", {"decision": "continue", "judged": "better", "kept": True, "objective": 120.0}, 1)
        j.append("s1", "judged", {"gain": -0.05, "low": -0.1, "high": 0.0}, 2)
        j.append("s1", "reverted", {"to": "best"}, 2)
        j.append("s1", "decision", {"decision": "terminate", "judged": "worse", "kept": False}, 2)
        j.append("s1", "session.end", {"status": "completed"})
        j.append("s2", "session.start", {})
        j.append("s2", "recovery", {"action": "restored"}, 1)
        j.append("s2", "session.end", {"status": "failed"})
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JournalCollector(path))
    got = samples(generate_latest(registry).decode())
    assert got[("agenticdb_sessions_started_total", ())] == 2
    assert got[("agenticdb_sessions_completed_total", ())] == 1
    assert got[("agenticdb_sessions_failed_total", ())] == 1
    assert got[("agenticdb_rounds_total", ())] == 2
    assert got[("agenticdb_trials_kept_total", ())] == 1
    assert got[("agenticdb_trials_reverted_total", ())] == 1
    assert got[("agenticdb_trials_recovered_total", ())] == 1
    assert got[("agenticdb_validator_rejections_total", (("kind", "range"),))] == 1
    assert got[("agenticdb_validator_rejections_total", (("kind", "harmful"),))] == 1
    assert got[("agenticdb_baseline_objective", ())] == 100.0
    assert got[("agenticdb_objective", ())] == 120.0
    assert got[("agenticdb_gain", ())] == pytest.approx(0.2)
    assert got[("agenticdb_last_trial_gain", ())] == pytest.approx(-0.05)
    last = (("decision", "terminate"), ("judged", "worse"), ("kept", "false"))
    assert got[("agenticdb_last_decision", last)] == 1.0
    assert got[("agenticdb_last_change_timestamp_seconds", ())] < got[("agenticdb_last_decision_timestamp_seconds", ())]


def test_metrics_listen_is_validated() -> None:
    assert parse_listen("127.0.0.1:9187") == ("127.0.0.1", 9187)
    for bad in ("9187", "localhost:", "127.0.0.1:0", "127.0.0.1:http", ":80"):
        with pytest.raises(ValueError, match="daemon.metrics_listen"):
            parse_listen(bad)
    with pytest.raises(ValueError, match="metrics_listen"):
        DaemonConfig(metrics_listen="127.0.0.1:99999")


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresSandboxInfo]:
    base = Path(tempfile.mkdtemp(prefix="agenticdb-metrics-"))
    base.chmod(0o755)
    sb = PostgresSandbox(base)
    info = sb.up()
    try:
        yield info
    finally:
        sb.down()


def _config(path: Path, info: PostgresSandboxInfo, home: Path, port: int, textfile: Path) -> None:
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
duration_s = 2
warmup_s = 0
[loop]
max_rounds = 2
baseline_runs = 1
min_pairs = 1
max_pairs = 1
[storage]
home = "{home}"
[daemon]
run_on_start = true
interval_hours = 100
watchdog_s = 3
metrics_listen = "127.0.0.1:{port}"
metrics_textfile = "{textfile}"
""")


def _session_ended(journal: Path) -> bool:
    if not journal.exists():
        return False
    with Journal(journal, read_only=True) as j:
        return any(e.event == "session.end" for e in j.events())


def _scrape(port: int) -> str:
    """``curl -s 127.0.0.1:PORT/metrics`` as an operator would type it (urllib when curl is missing)."""
    curl = shutil.which("curl")
    if curl:
        r = subprocess.run([curl, "-s", "-f", f"127.0.0.1:{port}/metrics"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        return r.stdout
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        assert resp.status == 200
        return str(resp.read().decode())


def test_daemon_serves_metrics_matching_its_journal(pg: PostgresSandboxInfo, tmp_path: Path) -> None:
    home, cfg, textfile = tmp_path / "home", tmp_path / "agenticdb.toml", tmp_path / "textfile" / "agenticdb.prom"
    port = free_port()
    _config(cfg, pg, home, port, textfile)
    log = open(tmp_path / "daemon.log", "a")
    proc = subprocess.Popen(
        [sys.executable, "-m", "agenticdb.cli", "daemon", "--config", str(cfg)],
        env={**os.environ},
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not _session_ended(home / "journal.db"):
            assert proc.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
            time.sleep(0.5)
        assert _session_ended(home / "journal.db"), "no session ended in time"
        got = samples(_scrape(port))
        time.sleep(6)  # the textfile is rewritten every 5 s while idle
        from_file = samples(textfile.read_text())
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    with Journal(home / "journal.db", read_only=True) as j:
        ev = [e for e in j.events() if e.session_id != "daemon"]
    decisions = [e.data for e in ev if e.event == "decision"]
    end = next(e.data for e in ev if e.event == "session.end")
    rejected = sum(len(e.data.get("failed", [])) for e in ev if e.event == "verdict" and not e.data.get("ok"))
    for metrics in (got, from_file):
        assert metrics[("agenticdb_sessions_started_total", ())] == 1
        assert metrics[("agenticdb_sessions_completed_total", ())] == (end["status"] == "completed")
        assert metrics[("agenticdb_rounds_total", ())] == len(decisions) >= 1
        assert metrics[("agenticdb_trials_kept_total", ())] == sum(bool(d["kept"]) for d in decisions)
        assert metrics[("agenticdb_trials_reverted_total", ())] == sum(e.event == "reverted" for e in ev)
        assert metrics[("agenticdb_trials_recovered_total", ())] == sum(e.event == "recovery" for e in ev)
        rej = sum(v for (name, _), v in metrics.items() if name == "agenticdb_validator_rejections_total")
        assert rej == rejected
        last = decisions[-1]
        key = (
            "agenticdb_last_decision",
            (
                ("decision", last["decision"]),
                ("judged", str(last["judged"] or "none")),
                ("kept", str(last["kept"]).lower()),
            ),
        )
        assert metrics[key] == 1.0
        base = next(e.data for e in ev if e.event == "baseline")
        assert metrics[("agenticdb_baseline_objective", ())] == pytest.approx(base["objectives"][0])
        kept = [d for d in decisions if d["kept"]]
        expected_objective = kept[-1]["objective"] if kept else base["objectives"][0]
        assert metrics[("agenticdb_objective", ())] == pytest.approx(expected_objective)
        assert metrics[("agenticdb_sessions_failed_total", ())] == (end["status"] in ("failed", "crashed"))
        sign = 1 if base.get("higher_is_better", True) else -1
        gain = sign * (expected_objective - base["objectives"][0]) / base["objectives"][0]
        assert metrics[("agenticdb_gain", ())] == pytest.approx(gain)
        judged = [e.data["gain"] for e in ev if e.event == "judged" and isinstance(e.data.get("gain"), int | float)]
        if judged:
            assert metrics[("agenticdb_last_trial_gain", ())] == pytest.approx(judged[-1])
        decided = [e for e in ev if e.event == "decision"]
        stamp = datetime.fromisoformat(decided[-1].ts).timestamp()
        assert metrics[("agenticdb_last_decision_timestamp_seconds", ())] == pytest.approx(stamp, abs=0.01)
        kept_at = [datetime.fromisoformat(e.ts).timestamp() for e in decided if e.data["kept"]]
        change = metrics.get(("agenticdb_last_change_timestamp_seconds", ()))
        assert change == (pytest.approx(kept_at[-1], abs=0.01) if kept_at else None)


def test_daemon_uploads_pending_experience_on_its_cycle(pg: PostgresSandboxInfo, tmp_path: Path) -> None:
    """Experience learned while the central Memory Book was away is pushed by the daemon's next cycle
    (here: its start), once."""
    import psycopg

    from agenticdb.models.planning import Experience, Fingerprint
    from agenticdb.store.memory import MemoryBook

    with psycopg.connect(pg.dsn, autocommit=True) as c:
        c.execute("DROP DATABASE IF EXISTS central_daemon")
        c.execute("CREATE DATABASE central_daemon")
    url = f"postgresql://postgres@127.0.0.1:{pg.port}/central_daemon"
    home, cfg = tmp_path / "home", tmp_path / "agenticdb.toml"
    fp = Fingerprint(
        dbms="postgresql", version_major="15", benchmark="pgbench", workload_class="oltp", read_fraction=0.5
    )
    with MemoryBook(home / "memory.db", host="host-d") as book:
        book.write_experience(Experience(fingerprint=fp, session_id="learned-offline"))
        assert book.has_pending()
    _config(cfg, pg, home, free_port(), tmp_path / "t.prom")
    text = cfg.read_text().replace("run_on_start = true", "run_on_start = false")
    cfg.write_text(text.replace("[storage]\n", f'[storage]\nmemory_url = "{url}"\nhost_label = "host-d"\n'))
    log = open(tmp_path / "daemon.log", "a")
    proc = subprocess.Popen(
        [sys.executable, "-m", "agenticdb.cli", "daemon", "--config", str(cfg)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    rows: list[tuple[str, str]] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not rows:
            assert proc.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
            try:
                with psycopg.connect(url) as c:
                    rows = [(r[0], r[1]) for r in c.execute("SELECT host, session_id FROM agenticdb.experience")]
            except psycopg.errors.UndefinedTable:
                pass
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    assert rows == [("host-d", "learned-offline")]
    with MemoryBook(home / "memory.db", host="host-d") as book:
        assert not book.has_pending()
