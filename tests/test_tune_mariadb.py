"""End to end on a real private MariaDB 10.11 (issue 4, session level): the CLI as a user runs it.

The instance is created through ``agenticdb sandbox up mariadb`` in its own home (the tuned
configuration stays behind, and the tests restore it), then tuned with sysbench OLTP read-write, and
the ``validate`` / ``catalog`` / ``rollback`` commands are checked against it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenticdb.sandbox.mariadb import MariaDBSandbox, MariaDBSandboxInfo
from agenticdb.store.journal import Journal

pytestmark = pytest.mark.usefixtures("no_opening")  # diagnosis rounds, not the opening (tests/test_race.py)

CLI = [sys.executable, "-m", "agenticdb.cli"]


def cli(home: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTICDB_HOME": str(home), "COLUMNS": "200"}
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
    )


@pytest.fixture(scope="module")
def home() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="agenticdb-tune-maria-"))
    base.chmod(0o755)  # mariadbd runs as the mysql OS user and must traverse it
    r = cli(base, "sandbox", "up", "mariadb")
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        yield base
    finally:
        cli(base, "sandbox", "down", "mariadb")


@pytest.fixture(scope="module")
def info(home: Path) -> MariaDBSandboxInfo:
    i = MariaDBSandbox(home).info()
    assert i is not None
    return i


def variables(info: MariaDBSandboxInfo, names: list[str]) -> dict[str, str]:
    conn = info.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT LOWER(VARIABLE_NAME), GLOBAL_VALUE FROM information_schema.SYSTEM_VARIABLES "
                "WHERE LOWER(VARIABLE_NAME) IN %s",
                ([n.lower() for n in names],),
            )
            return {str(k): str(v) for k, v in cur.fetchall()}
    finally:
        conn.close()


@pytest.mark.slow
def test_full_tune_session_via_cli(home: Path, info: MariaDBSandboxInfo) -> None:
    r = cli(
        home,
        "tune",
        "--sandbox",
        "mariadb",
        "--workload",
        "sysbench-oltp-read-write",
        "--rounds",
        "3",
        "--duration",
        "4",
        "--warmup",
        "1",
        "--scale",
        "5000",
        "--clients",
        "2",
        "--baseline-runs",
        "2",
        "--max-pairs",
        "1",
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "baseline" in r.stdout and "best" in r.stdout
    print(r.stdout)

    journal = Journal(home / "journal.db")
    sid = journal.sessions()[-1].id  # the newest: another test of this module may have journaled one first
    events = journal.events(sid)
    kinds = [e.event for e in events]
    for needed in ("session.start", "baseline", "proposal", "verdict", "decision", "final", "session.end"):
        assert needed in kinds, f"{needed} missing from journal: {kinds}"
    decisions = [e for e in events if e.event == "decision"]
    assert len(decisions) >= 1 and all(e.round_no for e in decisions)
    assert journal.verify().ok
    assert not journal.open_intents(), "an intent was left open"
    start = next(e for e in events if e.event == "session.start").data
    assert start["target"] == "mariadb"

    end = [e for e in events if e.event == "session.end"][-1].data
    assert end["status"] == "completed"
    # Every round moved an InnoDB/server variable the MariaDB catalog lists (no PostgreSQL names).
    applied = {k for e in decisions for k in e.data.get("changes", {})}
    assert applied and not applied & {"shared_buffers", "work_mem", "wal_buffers"}, applied
    # The best configuration is what the server runs afterwards (read back over SQL).
    best = end["best_changes"]
    if best:
        live = variables(info, list(best))
        for name, value in best.items():
            assert live[name.lower()].lower() == str(value).lower(), f"{name}: best {value}, server {live}"
    else:
        # nothing kept: the baseline values are back
        baseline = next(e for e in events if e.event == "intent").data["snapshot"]["values"]
        live = variables(info, sorted(applied))
        for name in applied:
            assert live[name.lower()] == baseline[name], (name, live, baseline[name])

    with sqlite3.connect(home / "memory.db") as db:
        n = db.execute("SELECT count(*) FROM experience WHERE session_id = ?", (sid,)).fetchone()[0]
        rounds = db.execute("SELECT count(*) FROM rounds WHERE session_id = ?", (sid,)).fetchone()[0]
    assert n == 1 and rounds == len(decisions)

    # rollback --dbms puts the session's baseline back and names what it changed
    rb = cli(home, "rollback", "--dbms", "--sandbox", "mariadb")
    assert rb.returncode == 0, rb.stdout + rb.stderr
    assert "verified" in rb.stdout and f"session {sid}" in rb.stdout
    baseline = next(e for e in events if e.event == "intent").data["snapshot"]["values"]
    live = variables(info, list(best) or sorted(applied))
    for name in live:
        assert live[name] == baseline[name], (name, live[name], baseline[name])
    for name in best:
        assert f"{name}: " in rb.stdout and f"→ {baseline[name]}" in rb.stdout, rb.stdout


def test_validate_rejects_protected_durability_and_unknown(home: Path, tmp_path: Path) -> None:
    f = tmp_path / "changes.toml"
    f.write_text(
        'transaction_isolation = "READ-COMMITTED"\ninnodb_flush_log_at_trx_commit = 2\n'
        "innodb_no_such_knob = 5\ninnodb_io_capacity = 400\n"
    )
    r = cli(home, "validate", "--sandbox", "mariadb", str(f), "--format", "json")
    assert r.returncode == 1, r.stdout + r.stderr
    rows = {c["parameter"]: " ".join(c.values()) for c in json.loads(r.stdout)["changes"]}
    assert "rejected" in rows["transaction_isolation"] and "protected" in rows["transaction_isolation"]
    flush = rows["innodb_flush_log_at_trx_commit"]
    assert "rejected" in flush and "durability" in flush
    assert "rejected" in rows["innodb_no_such_knob"] and "unknown" in rows["innodb_no_such_knob"]
    assert "ok" in rows["innodb_io_capacity"] and "was 200" in rows["innodb_io_capacity"]
    assert "unknown (exists)" in rows["innodb_no_such_knob"]

    ok = tmp_path / "ok.toml"
    ok.write_text("innodb_io_capacity = 400\n")
    r = cli(home, "validate", "--sandbox", "mariadb", str(ok))
    assert r.returncode == 0 and "ACCEPT" in r.stdout, r.stdout + r.stderr


def test_catalog_shows_innodb_knobs_with_current_values(home: Path, info: MariaDBSandboxInfo) -> None:
    r = cli(home, "catalog", "--sandbox", "mariadb", "--like", "innodb_buffer_pool_size", "--format", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    line = next(" ".join(x.values()) for x in json.loads(r.stdout)["rows"] if x["name"] == "innodb_buffer_pool_size")
    live = int(variables(info, ["innodb_buffer_pool_size"])["innodb_buffer_pool_size"])
    assert str(live) in line and "MiB" in line and "dynamic" in line
    assert "mariadb 10.11" in r.stdout
    ex = cli(home, "catalog", "--sandbox", "mariadb", "--excluded", "--like", "datadir")
    assert ex.returncode == 0 and "datadir" in ex.stdout


def test_rollback_without_a_session_says_so(tmp_path: Path, home: Path) -> None:
    # A fresh home has the sandbox pointer missing: the command explains what to run.
    r = cli(tmp_path, "rollback", "--dbms", "--sandbox", "mariadb")
    assert r.returncode == 2 and "agenticdb sandbox up mariadb" in (r.stdout + r.stderr)


def test_default_workload_on_mariadb_is_a_one_line_error(home: Path, info: MariaDBSandboxInfo) -> None:
    """pgbench is the default workload and needs PostgreSQL: on MariaDB the error says what to choose
    (found by trying it: it was a traceback), exit 2, and nothing is changed."""
    before = variables(info, ["innodb_buffer_pool_size", "innodb_io_capacity"])
    r = cli(home, "tune", "--sandbox", "mariadb", "--rounds", "1", "--duration", "2")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert "needs PostgreSQL" in r.stdout + r.stderr and "--workload sysbench-oltp-read-write" in r.stdout + r.stderr
    assert variables(info, ["innodb_buffer_pool_size", "innodb_io_capacity"]) == before
