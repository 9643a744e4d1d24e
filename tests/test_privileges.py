"""Least privilege and secrets on real private servers (issue 21).

PostgreSQL 15: ``setup-role --apply`` creates a password-auth role (pg_hba forces scram-sha-256 for it),
a superuser DSN is refused with a message naming ``setup-role``, and a short ``tune`` through the role
completes; the role's password is planted as a secret and searched for in every output of the session
(stdout/stderr of every command, structlog JSON lines, journal and memory SQL dumps, report, journal
export, memory export, an error message). MariaDB 10.11: the same role flow, tune included.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from agenticdb.host.privileges import role_sql
from agenticdb.sandbox.mariadb import MariaDBSandbox
from agenticdb.sandbox.postgres import PostgresSandbox

pytestmark = pytest.mark.usefixtures("no_opening")  # diagnosis rounds, not the opening (tests/test_race.py)

CLI = [sys.executable, "-m", "agenticdb.cli"]


def _shared_tmp(prefix: str) -> Path:
    """A temp dir the server's OS user (postgres, mysql) can traverse."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(path, 0o755)
    return path


SECRET = "Pl4nted-S3cret_pw"
SHORT = ["--rounds", "1", "--duration", "2", "--baseline-runs", "1", "--max-pairs", "1"]


def cli(home: Path, *args: str, superuser_ok: bool = False, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTICDB_HOME": str(home)}
    env.pop("AGENTICDB_POLICY__ALLOW_SUPERUSER", None)  # the default: superuser refused
    if superuser_ok:
        env["AGENTICDB_POLICY__ALLOW_SUPERUSER"] = "true"
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
    )


@pytest.fixture(scope="module")
def pg() -> Iterator[tuple[Path, str, str]]:
    """(home, superuser DSN, port) of a private PostgreSQL without the agenticdb role."""
    base = _shared_tmp("agenticdb-priv-pg-")
    sandbox = PostgresSandbox(base / "srv")
    info = sandbox.up()
    try:
        yield base, info.dsn, str(info.port)
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)


def test_role_sql_names_every_knob_and_no_superuser() -> None:
    stmts, notes = role_sql("postgresql", parameters=["shared_buffers", "work_mem", "DateStyle"])
    text = ";\n".join(stmts)
    assert "GRANT ALTER SYSTEM ON PARAMETER datestyle, shared_buffers, work_mem TO agenticdb" in text
    assert "NOSUPERUSER" in text and "GRANT pg_monitor TO agenticdb" in text
    my, my_notes = role_sql("mariadb")
    assert any("SUPER" in s for s in my) and any("SET GLOBAL" in n for n in my_notes)
    mysql, _ = role_sql("mysql")
    assert any("SYSTEM_VARIABLES_ADMIN, PERSIST_RO_VARIABLES_ADMIN" in s for s in mysql)
    assert not any(" SUPER" in s for s in mysql)


def _session_events(home: Path, event: str) -> list[dict[str, object]]:
    """The ``event`` rows of the last session in the journal (``journal export``)."""
    r = cli(home, "journal", "export")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    last = [row["session_id"] for row in rows if row["event"] == "session.start"][-1]
    return [row for row in rows if row["session_id"] == last and row["event"] == event]


def _grep_everything(home: Path, outputs: list[str], tmp: Path) -> dict[str, str]:
    """Every place a secret could reach, as text."""
    places = {f"output {i}": text for i, text in enumerate(outputs)}
    for name in ("journal.db", "memory.db"):
        with sqlite3.connect(home / name) as conn:
            places[f"{name} dump"] = "\n".join(conn.iterdump())
    r = cli(home, "journal", "export")
    places["journal export"] = r.stdout + r.stderr
    r = cli(home, "report")
    places["report"] = r.stdout + r.stderr
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli(home, "memory", "export", str(tmp / "mem.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    places["memory export"] = (tmp / "mem.json").read_text() + r.stdout + r.stderr
    return places


@pytest.mark.slow
def test_setup_role_refusal_tune_and_planted_secret(pg: tuple[Path, str, str], tmp_path: Path) -> None:
    base, super_dsn, port = pg
    home = base / "home"
    pw_file = tmp_path / "pw"
    pw_file.write_text(SECRET + "\n")
    outputs: list[str] = []

    r = cli(home, "setup-role", "--target", super_dsn, "--password-file", str(pw_file), "--apply")
    outputs.append(r.stdout + r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "GRANT ALTER SYSTEM ON PARAMETER" in r.stdout and "role agenticdb created" in r.stdout
    with psycopg.connect(super_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT rolsuper, has_parameter_privilege('agenticdb', 'shared_buffers', 'ALTER SYSTEM'),"
            " (SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'agenticdb_bench')"
            " FROM pg_roles WHERE rolname = 'agenticdb'"
        ).fetchone()
        assert row == (False, True, "agenticdb")
        # nothing the validator never allows: durability, protected, dangerous parameters
        for guarded in ("fsync", "full_page_writes", "synchronous_commit", "session_replication_role"):
            sql = "SELECT has_parameter_privilege('agenticdb', %s, 'ALTER SYSTEM')"
            assert conn.execute(sql, (guarded,)).fetchone() == (False,), guarded
        # password authentication for the role (the sandbox trusts everyone else)
        hba = conn.execute("SHOW hba_file").fetchone()[0]
        text = Path(hba).read_text()
        Path(hba).write_text("host all agenticdb 127.0.0.1/32 scram-sha-256\n" + text)
        conn.execute("SELECT pg_reload_conf()")
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(f"postgresql://agenticdb:wrong@127.0.0.1:{port}/postgres", connect_timeout=5).close()
    role_dsn = f"postgresql://agenticdb:{SECRET}@127.0.0.1:{port}/postgres"

    # a superuser DSN is refused, with the message that names setup-role
    r = cli(home, "tune", "--target", super_dsn, "--scale", "1", *SHORT)
    outputs.append(r.stdout + r.stderr)
    assert r.returncode == 2, r.stdout + r.stderr
    said = " ".join((r.stdout + r.stderr).split())
    assert "superuser" in said and "agenticdb setup-role" in said and "policy.allow_superuser" in said, said

    # a short full session through the role completes; structlog lines as JSON on stderr
    r = cli(home, "--json-logs", "--verbose", "tune", "--target", role_dsn, "--scale", "1", *SHORT)
    outputs.append(r.stdout + r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr
    assert '"event": "round.decided"' in r.stderr or '"event"' in r.stderr  # structlog output was produced
    # piped stdout: each baseline run has its line between the header and round 1 (a fresh user's piped tune
    # printed nothing there for the 8 minutes of a busy host's baseline)
    lines = r.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("agenticdb session "))
    first = next(i for i, line in enumerate(lines) if line.startswith("round 1 "))
    assert any(line.startswith("baseline 1: ") for line in lines[head:first]), r.stdout
    applied = _session_events(home, "applied")
    assert applied, "the role's session applied no change: ALTER SYSTEM through the role was not exercised"
    # an error path that carries the DSN (nothing listens on port 1)
    r = cli(home, "tune", "--target", role_dsn.replace(f":{port}/", ":1/"), "--scale", "1", *SHORT)
    outputs.append(r.stdout + r.stderr)
    assert r.returncode != 0

    places = _grep_everything(home, outputs, tmp_path)
    leaks = [name for name, text in places.items() if SECRET in text]
    assert leaks == [], f"the planted secret appears in: {leaks}"
    assert "agenticdb:***@127.0.0.1" in places["output 2"]  # the DSN was printed, redacted
    # journal and memory files are private to the service user
    for name in ("journal.db", "memory.db", "journal.key"):
        assert (home / name).stat().st_mode & 0o077 == 0, name
    r = cli(home, "journal", "verify")
    assert r.returncode == 0 and "keyed" in r.stdout, r.stdout + r.stderr


@pytest.fixture(scope="module")
def mariadb() -> Iterator[tuple[Path, str, int]]:
    base = _shared_tmp("agenticdb-priv-my-")
    sandbox = MariaDBSandbox(base / "srv")
    info = sandbox.up()
    try:
        yield base, info.dsn, info.port
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_mariadb_setup_role_then_tune_with_it(mariadb: tuple[Path, str, int]) -> None:
    base, root_dsn, port = mariadb
    home = base / "home"
    r = cli(home, "setup-role", "--target", root_dsn, "--host", "127.0.0.1", "--apply")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SET GLOBAL" in r.stdout and "SUPER" in r.stdout  # the note says why SUPER is still needed
    opt = ["--workload", "sysbench-oltp-read-write", "--scale", "1000", *SHORT]
    r = cli(home, "tune", "--target", root_dsn, *opt)
    assert r.returncode == 2 and "agenticdb setup-role" in " ".join((r.stdout + r.stderr).split()), r.stdout + r.stderr
    r = cli(home, "tune", "--target", f"mysql://agenticdb@127.0.0.1:{port}/", *opt)
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli(home, "journal", "export")
    ends = [json.loads(line) for line in r.stdout.splitlines() if '"session.end"' in line]
    assert ends and ends[-1]["data"]["status"] == "completed"
    assert _session_events(home, "applied"), "the account's session applied no change (SET GLOBAL not exercised)"
