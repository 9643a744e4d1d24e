"""The private MariaDB sandbox: created by mariadb-install-db, reachable over TCP and socket, stoppable."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pymysql

from agenticdb.sandbox.mariadb import MariaDBSandbox, MariaDBSandboxInfo


def test_sandbox_reachable_over_tcp_and_socket(mariadb_sandbox: MariaDBSandboxInfo) -> None:
    with mariadb_sandbox.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT VERSION(), @@port, @@datadir, @@bind_address")
        version, port, datadir, bind = cur.fetchone()
    assert "MariaDB" in version
    assert port == mariadb_sandbox.port
    assert Path(datadir).resolve() == Path(mariadb_sandbox.data_dir).resolve()
    assert bind == "127.0.0.1"
    with pymysql.connect(unix_socket=mariadb_sandbox.socket, user="root", password="") as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT CURRENT_USER()")
            assert cur.fetchone()[0] == "root@localhost"


def test_defaults_file_includes_managed_option_file(mariadb_sandbox: MariaDBSandboxInfo) -> None:
    text = Path(mariadb_sandbox.defaults_file).read_text()
    assert f"!include {mariadb_sandbox.option_file}" in text
    assert "[mysqld]" in Path(mariadb_sandbox.option_file).read_text()
    cfg = mariadb_sandbox.target_config()
    assert cfg.kind == "mariadb" and cfg.service.kind == "mariadbd"
    assert cfg.option_file == mariadb_sandbox.option_file
    assert cfg.service.defaults_file == mariadb_sandbox.defaults_file
    assert mariadb_sandbox.dsn == f"mysql://root@127.0.0.1:{mariadb_sandbox.port}/"


def test_up_status_down_lifecycle() -> None:
    base = Path(__import__("tempfile").mkdtemp(prefix="agenticdb-mariadb-life-"))
    os.chmod(base, 0o755)
    sandbox = MariaDBSandbox(base)
    try:
        assert sandbox.status() == {"exists": False, "running": False}
        info = sandbox.up()
        assert sandbox.up() == info  # idempotent: same instance, still running
        assert sandbox.status()["running"] is True
        svc = sandbox.service(info)
        svc.stop()
        assert not svc.running()
        assert sandbox.status()["running"] is False
        sandbox.up()
        assert sandbox.status()["running"] is True
        sandbox.down()
        assert sandbox.info() is None
        assert not Path(info.root).exists()
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)


def test_the_sandbox_keeps_its_temporary_tables_in_its_own_tmpdir(mariadb_sandbox: MariaDBSandboxInfo) -> None:
    """Every private instance used the host's /tmp for on-disk temporary tables, shared with every other
    instance on the host; a test's GROUP BY failed twice beside other sandboxes with "Error on delete of
    '/tmp/#sql-temptable-…MAI'". Each sandbox now has its own tmpdir, and a query that spills works there."""
    with mariadb_sandbox.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT @@tmpdir")
        assert Path(cur.fetchone()[0]).resolve() == (Path(mariadb_sandbox.root) / "tmp").resolve()
        cur.execute("SET SESSION tmp_table_size = 1024, max_heap_table_size = 16384")
        cur.execute("SELECT seq % 5000, count(*) FROM mysql.seq_1_to_20000 GROUP BY 1 ORDER BY 2 DESC LIMIT 1")
        assert cur.fetchone()[1] == 4
        cur.execute("SHOW SESSION STATUS LIKE 'Created_tmp_disk_tables'")
        assert int(cur.fetchone()[1]) >= 1
