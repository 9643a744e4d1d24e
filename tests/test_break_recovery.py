"""Forcing changes past the validator on private instances: the executor/target/recovery path must never
half-apply a change set and must bring the server back with its original values when a change stops it.

PostgreSQL runs in its own sandbox (these tests restart it and break its configuration on purpose);
MariaDB uses the session sandbox and leaves it as found. Every case asserts the original values are in
effect afterwards through a real query.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pymysql
import pytest

from agenticdb.loop.recovery import Recovery
from agenticdb.models import ApplyMode, Failure, NormalizedChange
from agenticdb.sandbox.mariadb import MariaDBSandboxInfo
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.targets.base import ApplyError
from agenticdb.targets.mysql import MySQLTarget
from agenticdb.targets.postgres import PostgresTarget

pytestmark = pytest.mark.usefixtures("no_opening")  # diagnosis rounds, not the opening (tests/test_race.py)

WATCHED = ["shared_buffers", "work_mem", "maintenance_work_mem", "wal_level", "huge_pages", "max_stack_depth"]


@pytest.fixture(scope="module")
def pg_info() -> Iterator[PostgresSandboxInfo]:
    base = Path(tempfile.mkdtemp(prefix="agenticdb-break-"))
    base.chmod(0o755)
    sandbox = PostgresSandbox(base)
    info = sandbox.up()
    try:
        yield info
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture()
def pg(pg_info: PostgresSandboxInfo) -> Iterator[PostgresTarget]:
    t = PostgresTarget.from_config(pg_info.target_config())
    yield t
    t.close()


def server_values(info: PostgresSandboxInfo, names: list[str]) -> dict[str, str]:
    """What a fresh client sees (not the target's own reading)."""
    with psycopg.connect(info.dsn, autocommit=True, connect_timeout=5) as c:
        rows = c.execute(
            "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)", (names,)
        ).fetchall()
    return dict(rows)


def ch(name: str, value: str, mode: ApplyMode, base: float | None = None, unit: str | None = None) -> NormalizedChange:
    return NormalizedChange(name=name, value=value, base_value=base, unit=unit, apply=mode)


def forced_restart_is_recovered(pg: PostgresTarget, info: PostgresSandboxInfo, changes: list[NormalizedChange]) -> None:
    before = server_values(info, WATCHED)
    safe = pg.snapshot(WATCHED, label="safe")
    with pytest.raises(ApplyError) as err:
        pg.apply(changes, ApplyMode.restart)
    assert not pg.available()
    failure = Failure(phase="restart", message=str(err.value), logs=err.value.logs, attempted=changes)
    result = Recovery(pg, retry_pause_s=0.5).recover(failure, safe)
    assert result.action == "restored" and result.service_available and result.verified, result
    assert server_values(info, WATCHED) == before
    assert pg.pending_restart() == []


def test_shared_buffers_larger_than_ram_is_recovered(pg: PostgresTarget, pg_info: PostgresSandboxInfo) -> None:
    """'could not map anonymous shared memory: Cannot allocate memory' at start."""
    ram = psutil.virtual_memory().total + psutil.swap_memory().total
    gb = int(ram * 3 // 1024**3) + 1
    forced_restart_is_recovered(pg, pg_info, [ch("shared_buffers", f"{gb}GB", ApplyMode.restart)])


@pytest.mark.skipif(
    "HugePages_Total:       0" not in Path("/proc/meminfo").read_text(),
    reason="the host has huge pages configured",
)
def test_huge_pages_on_without_huge_pages_is_recovered(pg: PostgresTarget, pg_info: PostgresSandboxInfo) -> None:
    """huge_pages=on on a host without reserved huge pages: the server refuses to start."""
    forced_restart_is_recovered(pg, pg_info, [ch("huge_pages", "on", ApplyMode.restart)])


def test_bad_unit_written_into_auto_conf_is_recovered(pg: PostgresTarget, pg_info: PostgresSandboxInfo) -> None:
    """'128M' (not MB) in postgresql.auto.conf stops the server at start (sclorg/postgresql-container 109)."""
    before = server_values(pg_info, WATCHED)
    safe = pg.snapshot(WATCHED, label="safe")
    original = pg.auto_conf.read_text()
    # what an outside tool (or a tuner that skips normalisation) leaves behind
    pg.auto_conf.write_text(original + "shared_buffers = '256M'\n")
    with pytest.raises(ApplyError) as err:
        pg.apply([ch("work_mem", "8MB", ApplyMode.restart, 8192, "kB")], ApplyMode.restart)
    assert not pg.available() or server_values(pg_info, ["work_mem"])["work_mem"] != "8MB"
    failure = Failure(phase="restart", message=str(err.value), logs=err.value.logs, attempted=[])
    result = Recovery(pg, retry_pause_s=0.5).recover(failure, safe)
    assert result.action == "restored" and result.verified, result
    assert server_values(pg_info, WATCHED) == before
    assert "256M'" not in pg.auto_conf.read_text()


def test_third_change_failing_at_apply_leaves_nothing(pg: PostgresTarget, pg_info: PostgresSandboxInfo) -> None:
    """max_stack_depth above the stack rlimit is refused by ALTER SYSTEM; the two changes before it,
    one of them a postmaster knob, must not remain in postgresql.auto.conf nor in effect."""
    before = server_values(pg_info, WATCHED)
    file_before = pg.auto_conf.read_bytes()
    changes = [
        ch("work_mem", "7MB", ApplyMode.reload, 7168, "kB"),
        ch("shared_buffers", "160MB", ApplyMode.restart, 20480, "8kB"),
        ch("max_stack_depth", "100MB", ApplyMode.dynamic, 102400, "kB"),
    ]
    with pytest.raises(ApplyError, match="max_stack_depth"):
        pg.apply(changes, ApplyMode.restart)
    assert pg.auto_conf.read_bytes() == file_before
    assert server_values(pg_info, WATCHED) == before
    assert pg.pending_restart() == []


# ------------------------------------------------------------------ MariaDB


@pytest.fixture()
def maria(mariadb_sandbox: MariaDBSandboxInfo) -> Iterator[MySQLTarget]:
    t = MySQLTarget.from_config(mariadb_sandbox.target_config())
    snap = t.snapshot(
        [
            "innodb_io_capacity",
            "innodb_log_buffer_size",
            "innodb_buffer_pool_size",
            "innodb_change_buffering",
            "sort_buffer_size",
        ],
        label="test start",
    )
    yield t
    t.restore(snap)
    assert t.current_values(list(snap.values)) == snap.values
    t.close()


def maria_values(info: MariaDBSandboxInfo, names: list[str]) -> dict[str, str]:
    conn = pymysql.connect(unix_socket=info.socket, user="root", connect_timeout=5)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT VARIABLE_NAME, GLOBAL_VALUE FROM information_schema.SYSTEM_VARIABLES "
                "WHERE VARIABLE_NAME IN (" + ", ".join(["%s"] * len(names)) + ")",
                [n.upper() for n in names],
            )
            return {str(k).lower(): str(v) for k, v in cur.fetchall()}
    finally:
        conn.close()


def test_mariadb_third_change_failing_leaves_nothing(maria: MySQLTarget, mariadb_sandbox: MariaDBSandboxInfo) -> None:
    names = ["sort_buffer_size", "innodb_io_capacity", "innodb_change_buffering"]
    before = maria_values(mariadb_sandbox, names)
    file_before = Path(mariadb_sandbox.option_file).read_text()
    with pytest.raises(ApplyError, match="innodb_change_buffering"):
        maria.apply(
            [
                ch("sort_buffer_size", "4194304", ApplyMode.dynamic, 4194304.0),
                ch("innodb_io_capacity", "1234", ApplyMode.dynamic, 1234.0),
                ch("innodb_change_buffering", "bogus", ApplyMode.dynamic),
            ],
            ApplyMode.dynamic,
        )
    assert maria_values(mariadb_sandbox, names) == before
    assert Path(mariadb_sandbox.option_file).read_text() == file_before


# ------------------------------------------------------------------ rollback through the CLI


@pytest.mark.slow
def test_cli_rollback_after_a_session_returns_the_original_values(tmp_path: Path) -> None:
    """`agenticdb rollback --dbms` after a session (that started from other values) puts back what the
    server had before the session, in postgresql.auto.conf and in effect."""
    import os
    import subprocess
    import sys

    home = Path(tempfile.mkdtemp(prefix="agenticdb-break-cli-"))
    home.chmod(0o755)
    env = {**os.environ, "AGENTICDB_HOME": str(home)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agenticdb.cli", *args],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            stdin=subprocess.DEVNULL,
        )

    r = cli("sandbox", "up", "postgres")
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        info = PostgresSandbox(home).info()
        assert info is not None
        names = ["work_mem", "random_page_cost", "shared_buffers", "jit"]
        original = server_values(info, names)
        start = tmp_path / "start.toml"
        start.write_text('work_mem = "8MB"\nrandom_page_cost = 1.5\n')
        r = cli(
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
            "2",
            "--max-pairs",
            "1",
            "--start-from",
            str(start),
        )
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert server_values(info, ["work_mem"]) == {"work_mem": "8MB"}  # the start values stayed
        r = cli("rollback", "--sandbox", "postgres", "--dbms")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "verified" in r.stdout
        assert server_values(info, names) == original
        assert "work_mem" not in Path(info.data_dir, "postgresql.auto.conf").read_text()
    finally:
        cli("sandbox", "down", "postgres")
        shutil.rmtree(home, ignore_errors=True)
