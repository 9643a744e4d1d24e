"""Faults at the edge to the central Memory Book (issue 38), on a real private PostgreSQL.

The killed-upload tests are deterministic: a second connection inserts the same (host, session_id)
row and keeps its transaction open, so the upload's ``INSERT ... ON CONFLICT`` waits on that row's
transaction lock; the test finds the waiting backend in pg_stat_activity and ends it with
``pg_terminate_backend`` (SQLSTATE 57P01 on the client). No sleep decides anything.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from agenticdb.models.planning import Experience, Fingerprint
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.store.memory import MemoryBook
from agenticdb.store.memory.backends import SqliteBackend
from agenticdb.store.memory.central import NewerSchemaError, PostgresBackend, attach_central, migrations
from agenticdb.targets.postgres import PostgresTarget

PASSWORD = "pw-Secret-38"


@pytest.fixture(scope="module")
def central() -> Iterator[PostgresSandboxInfo]:
    """A private PostgreSQL with a role that must give a password (scram) over TCP."""
    base = Path(tempfile.mkdtemp(prefix="agenticdb-central-faults-"))
    base.chmod(0o755)
    sb = PostgresSandbox(base)
    info = sb.up()
    with psycopg.connect(info.dsn, autocommit=True) as c:
        c.execute(f"CREATE ROLE authtest LOGIN PASSWORD '{PASSWORD}'")
        hba = Path(info.data_dir) / "pg_hba.conf"
        hba.write_text("host all authtest 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        c.execute("SELECT pg_reload_conf()")
    try:
        yield info
    finally:
        sb.down()


_SEQ = iter(range(1000))


@pytest.fixture()
def url(central: PostgresSandboxInfo) -> str:
    name = f"book_{next(_SEQ)}"
    with psycopg.connect(central.dsn, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    u = f"postgresql://postgres@127.0.0.1:{central.port}/{name}"
    PostgresBackend(u).close()  # migrated, like a book another agent created earlier
    return u


def experience(session: str) -> Experience:
    f = Fingerprint(
        dbms="postgresql", version_major="15", benchmark="pgbench", workload_class="oltp", read_fraction=0.5
    )
    return Experience(fingerprint=f, session_id=session, best_gain=0.1, created_at=1000.0)


class RowBlocker:
    """Holds an uncommitted insert of (host, session_id) so an upload of the same key waits on it."""

    def __init__(self, url: str, host: str, session: str) -> None:
        self.url = url
        self.conn = psycopg.connect(url)
        self.conn.execute(
            "INSERT INTO agenticdb.experience (host, session_id, dbms, version_major, benchmark, workload_class,"
            " family, fingerprint, experience, created_at) VALUES (%s, %s, 'postgresql', '15', 'pgbench', 'oltp',"
            " 'postgresql', '{}', '{}', now())",
            (host, session),
        )

    def kill_waiter(self, alive: Callable[[], bool], timeout_s: float = 120.0) -> int:
        """Wait for the backend blocked on our row (an event, polled while the uploader is ``alive``),
        terminate it; returns its pid."""
        deadline = time.monotonic() + timeout_s
        with psycopg.connect(self.url, autocommit=True) as admin:
            while time.monotonic() < deadline and alive():
                row = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE 'INSERT INTO agenticdb.experience%%' AND pid <> pg_backend_pid()"
                ).fetchone()
                if row:
                    assert admin.execute("SELECT pg_terminate_backend(%s)", (row[0],)).fetchone() == (True,)
                    return int(row[0])
                time.sleep(0.05)
        raise AssertionError("no upload ever waited on the held row (the uploader ended or never came)")

    def release(self) -> None:
        self.conn.rollback()
        self.conn.close()


def _env(home: Path, url: str) -> dict[str, str]:
    return {
        **os.environ,
        "AGENTICDB_HOME": str(home),
        "AGENTICDB_STORAGE__MEMORY_URL": url,
        "AGENTICDB_STORAGE__HOST_LABEL": "host-a",
        "COLUMNS": "200",
        "NO_COLOR": "1",
    }


def _sync(home: Path, url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agenticdb.cli", "memory", "sync"],
        env=_env(home, url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def test_memory_sync_killed_mid_upsert_says_one_line_every_time(url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemoryBook(home / "memory.db", host="host-a") as book:
        book.write_experience(experience("s1"))
    for attempt in range(10):
        blocker = RowBlocker(url, "host-a", "s1")
        try:
            proc = _sync(home, url)
            blocker.kill_waiter(lambda p=proc: p.poll() is None)  # type: ignore[misc]
            out, err = proc.communicate(timeout=120)
        finally:
            blocker.release()
        lines = [ln for ln in (out + err).splitlines() if ln.strip()]
        assert proc.returncode == 1, (attempt, out, err)
        assert len(lines) == 1, (attempt, lines)
        line = lines[0]
        assert "Traceback" not in line and "AdminShutdown" not in line
        assert "upload failed: the server ended the connection" in line and "57P01" in line, line
        assert "1 experience row(s) stay pending" in line and str(home / "memory.db") in line, line
    done = subprocess.run(
        [sys.executable, "-m", "agenticdb.cli", "memory", "sync"],
        env=_env(home, url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "1 experience uploaded" in done.stdout, done.stdout + done.stderr
    with psycopg.connect(url) as c:
        assert c.execute("SELECT count(*) FROM agenticdb.experience").fetchone() == (1,)


def test_session_upload_killed_keeps_the_row_pending_and_says_it_once(url: str, tmp_path: Path) -> None:
    said: list[str] = []
    pending: list[int] = []

    def session_writes() -> None:  # the book lives in the thread that uses it (SQLite's rule)
        book = attach_central(MemoryBook(tmp_path / "memory.db", host="host-a"), url, said.append)
        book.write_experience(experience("s2"))
        pending.append(len(SqliteBackend(book).pending()[0]))
        book.close()

    blocker = RowBlocker(url, "host-a", "s2")
    try:
        writer = threading.Thread(target=session_writes)
        writer.start()
        blocker.kill_waiter(writer.is_alive)
        writer.join(120)
        assert not writer.is_alive()
    finally:
        blocker.release()
    assert pending == [1]
    assert len(said) == 1, said
    assert "\n" not in said[0]
    assert "upload failed: the server ended the connection" in said[0] and "stay pending" in said[0], said
    book = attach_central(MemoryBook(tmp_path / "memory.db", host="host-a"), url, said.append)
    book.write_experience(experience("s3"))  # the next session's push uploads both
    assert SqliteBackend(book).pending()[0] == []
    book.close()
    assert len(said) == 1
    with psycopg.connect(url) as c:
        rows = c.execute("SELECT session_id FROM agenticdb.experience ORDER BY session_id").fetchall()
    assert rows == [("s2",), ("s3",)]


def test_wrong_password_says_authentication_failed_without_the_password(
    central: PostgresSandboxInfo, tmp_path: Path
) -> None:
    bad = f"postgresql://authtest:not-{PASSWORD}@127.0.0.1:{central.port}/postgres"
    with pytest.raises(Exception) as info:
        PostgresBackend(bad)
    msg = str(info.value)
    assert 'authentication failed for user "authtest"' in msg and PASSWORD not in msg, msg
    target = PostgresTarget.from_config(central.target_config().model_copy(update={"dsn": bad}))
    assert not target.available()
    assert target.unavailable_reason is not None and "authentication failed" in target.unavailable_reason
    r = subprocess.run(
        [sys.executable, "-m", "agenticdb.cli", "tune", "--target", bad, "--rounds", "1"],
        env={**os.environ, "AGENTICDB_HOME": str(tmp_path), "COLUMNS": "200", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = r.stdout + r.stderr
    assert r.returncode == 1, text
    assert 'authentication failed for user "authtest"' in text and "not accepting connections" not in text, text
    assert PASSWORD not in text and "Traceback" not in text
    good = f"postgresql://authtest:{PASSWORD}@127.0.0.1:{central.port}/postgres"
    with psycopg.connect(good) as c:  # the role really works with the right password
        assert c.execute("SELECT current_user").fetchone() == ("authtest",)


def test_newer_central_schema_is_read_with_a_warning_and_never_written(url: str, tmp_path: Path) -> None:
    shipped = max(v for v, _, _ in migrations())
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("INSERT INTO agenticdb.schema_version (version, name) VALUES (%s, 'future.sql')", (shipped + 1,))
    backend = PostgresBackend(url)
    assert backend.newer and backend.central_version == shipped + 1
    assert backend.records() == []
    with pytest.raises(NewerSchemaError, match=f"version {shipped + 1}, newer than this agenticdb's {shipped}"):
        backend.upsert([])
    backend.close()
    home = tmp_path / "home"
    with MemoryBook(home / "memory.db", host="host-a") as book:
        book.write_experience(experience("s4"))
    r = subprocess.run(
        [sys.executable, "-m", "agenticdb.cli", "memory", "sync"],
        env=_env(home, url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip() and "central_schema_newer" not in ln]
    assert r.returncode == 1 and len(lines) == 1, lines
    assert "refusing to write" in lines[0] and "1 experience row(s) stay pending" in lines[0], lines
    with psycopg.connect(url) as c:
        assert c.execute("SELECT count(*) FROM agenticdb.experience").fetchone() == (0,)
